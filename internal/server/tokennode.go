package server

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/internal/auth/authn"
)

// podNodeRef names the node of a pod a token is bound to, as kube-apiserver's
// TokenRequest puts it in the token (so that TokenReview and SelfSubjectReview show
// authentication.kubernetes.io/node-name and node-uid): nil for an unscheduled pod,
// the name alone when the node cannot be read.
func podNodeRef(ctx context.Context, client kubernetes.Interface, pod *v1.Pod) *authn.ObjectRef {
	if pod.Spec.NodeName == "" {
		return nil
	}
	ref := &authn.ObjectRef{Name: pod.Spec.NodeName}
	if node, err := client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{}); err == nil {
		ref.UID = string(node.UID)
	}
	return ref
}
