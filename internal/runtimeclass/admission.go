// Package runtimeclass is kube-apiserver's RuntimeClass admission plugin for tranche's
// API server: a pod created with spec.runtimeClassName must name an existing
// RuntimeClass; the class's overhead becomes the pod's spec.overhead (a pod that sets
// another overhead, or an overhead the class does not define, is refused) and the
// class's scheduling nodeSelector and tolerations are merged into the pod's (a
// conflicting nodeSelector value is refused).
package runtimeclass

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/apiserver"
)

var (
	runtimeClassesGVR = nodev1.SchemeGroupVersion.WithResource("runtimeclasses")
	podsGR            = schema.GroupResource{Resource: "pods"}
)

// Admission completes and checks pods naming a RuntimeClass (apiserver.Mutator).
type Admission struct{}

var _ apiserver.Mutator = Admission{}

// Mutate implements apiserver.Mutator for pod creates (not their subresources); every
// other write is let through. Refusals are 403s worded as upstream's.
func (Admission) Mutate(ctx context.Context, req *apiserver.AdmissionRequest) error {
	if req.Operation != apiserver.AdmitCreate || req.Resource.Group != "" || req.Resource.Resource != "pods" || req.Subresource != "" {
		return nil
	}
	pod, ok := req.Object.(*v1.Pod)
	if !ok || pod == nil {
		return apierrors.NewBadRequest(fmt.Sprintf("expected *v1.Pod but got %T", req.Object))
	}
	var rc *nodev1.RuntimeClass
	if name := pod.Spec.RuntimeClassName; name != nil {
		var err error
		if rc, err = find(ctx, req.Reader, *name); err != nil {
			return err
		}
		if rc == nil {
			return apierrors.NewForbidden(podsGR, req.Name, fmt.Errorf("pod rejected: RuntimeClass %q not found", *name))
		}
	}
	if err := Apply(pod, rc); err != nil {
		return apierrors.NewForbidden(podsGR, req.Name, err)
	}
	return nil
}

func find(ctx context.Context, r apiserver.Reader, name string) (*nodev1.RuntimeClass, error) {
	objs, err := r.List(ctx, runtimeClassesGVR, "")
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	for _, o := range objs {
		if rc, ok := o.(*nodev1.RuntimeClass); ok && rc.Name == name {
			return rc, nil
		}
	}
	return nil, nil
}

// Apply sets rc's overhead and scheduling on pod (rc nil: the pod names no class) and
// returns the reason a pod is refused: an overhead other than the class's, an overhead
// without one in the class, or a nodeSelector value the class sets differently.
func Apply(pod *v1.Pod, rc *nodev1.RuntimeClass) error {
	if rc == nil || rc.Overhead == nil {
		if pod.Spec.Overhead != nil {
			return fmt.Errorf("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead")
		}
	} else {
		if len(pod.Spec.Overhead) > 0 && !apiequality.Semantic.DeepEqual(rc.Overhead.PodFixed, pod.Spec.Overhead) {
			return fmt.Errorf("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead")
		}
		pod.Spec.Overhead = rc.Overhead.PodFixed.DeepCopy()
	}
	if rc == nil || rc.Scheduling == nil {
		return nil
	}
	sel := pod.Spec.NodeSelector
	if sel == nil {
		sel = map[string]string{}
	}
	for k, v := range rc.Scheduling.NodeSelector {
		if pv, ok := sel[k]; ok && pv != v {
			return fmt.Errorf("conflict: runtimeClass.scheduling.nodeSelector[%s] = %s; pod.spec.nodeSelector[%s] = %s", k, v, k, pv)
		}
		sel[k] = v
	}
	if len(sel) > 0 {
		pod.Spec.NodeSelector = sel
	}
	pod.Spec.Tolerations = MergeTolerations(pod.Spec.Tolerations, rc.Scheduling.Tolerations)
	return nil
}

// MergeTolerations returns first and second together without the tolerations another
// one already covers (of two equal ones, the first stays), as Kubernetes merges a
// RuntimeClass's tolerations into a pod's.
func MergeTolerations(first, second []v1.Toleration) []v1.Toleration {
	all := append(append([]v1.Toleration(nil), first...), second...)
	var out []v1.Toleration
	for i, t := range all {
		redundant := false
		for _, kept := range out {
			if covers(kept, t) {
				redundant = true
				break
			}
		}
		for j := i + 1; !redundant && j < len(all); j++ {
			if !apiequality.Semantic.DeepEqual(t, all[j]) && covers(all[j], t) {
				redundant = true
			}
		}
		if !redundant {
			out = append(out, t)
		}
	}
	return out
}

// covers reports whether s tolerates every taint t tolerates.
func covers(s, t v1.Toleration) bool {
	if apiequality.Semantic.DeepEqual(s, t) {
		return true
	}
	if t.Key != s.Key && (s.Key != "" || s.Operator != v1.TolerationOpExists) {
		return false
	}
	if t.Effect != s.Effect && s.Effect != "" {
		return false
	}
	if s.Effect == v1.TaintEffectNoExecute && s.TolerationSeconds != nil &&
		(t.TolerationSeconds == nil || *t.TolerationSeconds > *s.TolerationSeconds) {
		return false
	}
	switch s.Operator {
	case v1.TolerationOpEqual, "":
		return t.Operator == v1.TolerationOpEqual && t.Value == s.Value
	case v1.TolerationOpExists:
		return true
	}
	return false
}
