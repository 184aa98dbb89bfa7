package core

import (
	"context"
	"fmt"
	"net/http"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

var podsGR = schema.GroupResource{Resource: "pods"}

// PodHandlers are the pod subresources served by the pod's own code, in discovery
// order: binding and eviction, then the streaming ones (log, exec, attach,
// portforward, proxy) that discovery does not list.
func PodHandlers() []registry.Handler {
	return append([]registry.Handler{
		{Name: "binding", Kind: v1.SchemeGroupVersion.WithKind("Binding"), Verbs: []string{"create"}, OwnsValidation: true, Serve: podBind},
		{Name: "eviction", Kind: policyv1.SchemeGroupVersion.WithKind("Eviction"), Verbs: []string{"create"}, Serve: podEvict},
	}, podStreamingHandlers()...)
}

// PodDeleteStrategy is pods' graceful deletion: a pod bound to a node and not finished
// is marked for deletion and waits for its grace period (the node agent stops it and
// deletes it with grace 0); any other pod goes at once.
func PodDeleteStrategy() *registry.DeleteStrategy {
	return &registry.DeleteStrategy{
		GracePeriod: registry.FuncWith(podGracePeriod),
		AwaitsGrace: registry.Func(func(pod *v1.Pod) bool {
			g := pod.DeletionGracePeriodSeconds
			return g != nil && *g > 0 && podBoundAndRunning(pod)
		}),
	}
}

func podGracePeriod(pod *v1.Pod, opts *metav1.DeleteOptions) int64 {
	if !podBoundAndRunning(pod) {
		return 0
	}
	if opts.GracePeriodSeconds != nil {
		return *opts.GracePeriodSeconds
	}
	if pod.DeletionGracePeriodSeconds != nil {
		return *pod.DeletionGracePeriodSeconds
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return v1.DefaultTerminationGracePeriodSeconds
}

func podBoundAndRunning(pod *v1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed
}

// podBind serves POST pods/NAME/binding: it sets spec.nodeName once and marks the pod
// scheduled.
func podBind(ctx context.Context, req *registry.HandlerRequest) (runtime.Object, int, error) {
	var b v1.Binding
	if err := req.Body.Decode(&b, v1.SchemeGroupVersion.WithKind("Binding"), registry.DecodeOptions{}); err != nil {
		return nil, 0, err
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		return nil, 0, apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, b.Name, field.ErrorList{field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node"})})
	}
	if b.Target.Name == "" {
		return nil, 0, apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, b.Name, field.ErrorList{field.Required(field.NewPath("target", "name"), "")})
	}
	dry, err := req.DryRun()
	if err != nil {
		return nil, 0, err
	}
	_, _, err = req.Objects.Update(ctx, req.Namespace, req.Name, req.Subresource, dry, registry.Mutate(func(pod *v1.Pod) (*v1.Pod, error) {
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(podsGR, req.Name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", req.Name))
		}
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(podsGR, req.Name, fmt.Errorf("pod %s is already assigned to node %q", req.Name, pod.Spec.NodeName))
		}
		if b.UID != "" && b.UID != pod.UID {
			return nil, apierrors.NewConflict(podsGR, req.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", b.UID, pod.UID))
		}
		pod.Spec.NodeName = b.Target.Name
		pod.ResourceVersion = ""
		pod.Status.Conditions = setPodCondition(pod.Status.Conditions, v1.PodCondition{
			Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(req.Objects.Now()),
		})
		return pod, nil
	}))
	if err != nil {
		return nil, 0, err
	}
	return registry.SuccessStatus(), http.StatusCreated, nil
}

func setPodCondition(conds []v1.PodCondition, c v1.PodCondition) []v1.PodCondition {
	for i := range conds {
		if conds[i].Type == c.Type {
			if conds[i].Status != c.Status {
				conds[i] = c
			}
			return conds
		}
	}
	return append(conds, c)
}

// podEvict serves POST pods/NAME/eviction as a plain delete (no disruption budgets
// yet).
func podEvict(ctx context.Context, req *registry.HandlerRequest) (runtime.Object, int, error) {
	var ev policyv1.Eviction
	if err := req.Body.Decode(&ev, policyv1.SchemeGroupVersion.WithKind("Eviction"), registry.DecodeOptions{Optional: true}); err != nil {
		return nil, 0, err
	}
	opts := ev.DeleteOptions
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	if _, _, err := req.Objects.Delete(ctx, req.Namespace, req.Name, opts, false); err != nil {
		return nil, 0, err
	}
	return registry.SuccessStatus(), http.StatusCreated, nil
}
