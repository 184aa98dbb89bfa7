// Package defaulttolerations is kube-apiserver's DefaultTolerationSeconds admission
// plugin for tranche's API server: every pod that is created or updated without a
// toleration for the node lifecycle controller's not-ready or unreachable NoExecute
// taint gets one, operator Exists, for a limited time (300 s unless configured). A node
// that is briefly lost then leaves its pods in place for that long instead of having
// them evicted the moment it is tainted.
//
// What counts as already tolerating a taint is Kubernetes' rule, which looks at the key
// and the effect only: a toleration of that key, or with an empty key (which tolerates
// every taint), whose effect is NoExecute or empty.
package defaulttolerations

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tranche/tranche/internal/apiserver"
)

// DefaultSeconds is kube-apiserver's default for --default-not-ready-toleration-seconds
// and --default-unreachable-toleration-seconds.
const DefaultSeconds int64 = 300

// Admission adds the default tolerations to pods (apiserver.Mutator).
type Admission struct {
	notReadySeconds, unreachableSeconds int64
}

var _ apiserver.Mutator = (*Admission)(nil)

// New returns the admission step that tolerates not-ready for notReadySeconds and
// unreachable for unreachableSeconds (DefaultSeconds each in Kubernetes).
func New(notReadySeconds, unreachableSeconds int64) *Admission {
	return &Admission{notReadySeconds: notReadySeconds, unreachableSeconds: unreachableSeconds}
}

// Mutate implements apiserver.Mutator: creates and updates of pods themselves (not of
// their subresources) get the tolerations they lack; every other write is let through.
func (a *Admission) Mutate(_ context.Context, req *apiserver.AdmissionRequest) error {
	if req.Resource.Group != "" || req.Resource.Resource != "pods" || req.Subresource != "" {
		return nil
	}
	pod, ok := req.Object.(*v1.Pod)
	if !ok || pod == nil {
		return apierrors.NewBadRequest(fmt.Sprintf("expected *v1.Pod but got %T", req.Object))
	}
	pod.Spec.Tolerations = WithDefaults(pod.Spec.Tolerations, a.notReadySeconds, a.unreachableSeconds)
	return nil
}

// WithDefaults returns tolerations with the not-ready and unreachable NoExecute
// tolerations it lacks appended, in that order, for the given seconds.
func WithDefaults(tolerations []v1.Toleration, notReadySeconds, unreachableSeconds int64) []v1.Toleration {
	for _, d := range []struct {
		key     string
		seconds int64
	}{{v1.TaintNodeNotReady, notReadySeconds}, {v1.TaintNodeUnreachable, unreachableSeconds}} {
		if coversNoExecute(tolerations, d.key) {
			continue
		}
		seconds := d.seconds
		tolerations = append(tolerations, v1.Toleration{
			Key: d.key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &seconds,
		})
	}
	return tolerations
}

// coversNoExecute reports whether one of tolerations is, by Kubernetes' rule, already
// about the NoExecute taint of key: its key is key or empty and its effect NoExecute or
// empty. Operator and value do not matter, nor whether it has tolerationSeconds.
func coversNoExecute(tolerations []v1.Toleration, key string) bool {
	for _, t := range tolerations {
		if (t.Key == key || t.Key == "") && (t.Effect == v1.TaintEffectNoExecute || t.Effect == "") {
			return true
		}
	}
	return false
}
