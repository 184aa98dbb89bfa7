package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/storage"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}.String()

// mirrorPodAnnotation marks the API copy of a static pod, which the ServiceAccount
// admission leaves alone.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// serviceAccountAdmission is the part of Kubernetes' ServiceAccount admission plugin that
// refuses a pod naming a ServiceAccount that does not exist in its namespace, with
// upstream's Forbidden wording. Like upstream it looks the "default" account up a few
// times (it may be about to be created with its namespace) and any other once. A pod
// without serviceAccountName is not given one: tranche does not invent it.
type serviceAccountAdmission struct {
	store storage.Interface
	// retries and interval bound the lookups of "default".
	retries  int
	interval time.Duration
}

var _ apiserver.Admitter = (*serviceAccountAdmission)(nil)

func newServiceAccountAdmission(store storage.Interface) *serviceAccountAdmission {
	return &serviceAccountAdmission{store: store, retries: 10, interval: 150 * time.Millisecond}
}

// Admit checks a created pod's ServiceAccount.
func (a *serviceAccountAdmission) Admit(ctx context.Context, op apiserver.AdmitOp, gvr string, obj, _ runtime.Object, _ bool) ([]storage.Op, error) {
	if op != apiserver.AdmitCreate || gvr != podsGVR {
		return nil, nil
	}
	pod, ok := obj.(*v1.Pod)
	if !ok || pod == nil || pod.Spec.ServiceAccountName == "" {
		return nil, nil
	}
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		return nil, nil
	}
	name := pod.Spec.ServiceAccountName
	attempts := 1
	if name == "default" {
		attempts = a.retries
	}
	key := "/registry/core/serviceaccounts/" + pod.Namespace + "/" + name
	for i := range attempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, apierrors.NewInternalError(ctx.Err())
			case <-time.After(a.interval):
			}
		}
		_, err := a.store.Get(ctx, key)
		if err == nil {
			return nil, nil
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return nil, apierrors.NewInternalError(fmt.Errorf("looking up service account %s/%s: %w", pod.Namespace, name, err))
		}
	}
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccount"}, name)
	return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, pod.Name,
		fmt.Errorf("error looking up service account %s/%s: %w", pod.Namespace, name, notFound))
}

// Release holds nothing.
func (a *serviceAccountAdmission) Release(context.Context, string, runtime.Object) []storage.Op {
	return nil
}
