package core

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"

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

// podEvict serves POST pods/NAME/eviction as Kubernetes' eviction REST does: a pod
// that is not running (pending, finished or already deleting) is deleted at once; a
// running pod is deleted only when the one PodDisruptionBudget selecting it allows a
// disruption, which the eviction spends (status.disruptionsAllowed decremented, the pod
// recorded in status.disruptedPods) before deleting it with a DisruptionTarget
// condition. A refused eviction is a 429 naming the budget; a pod under several budgets
// is a 500.
func podEvict(ctx context.Context, req *registry.HandlerRequest) (runtime.Object, int, error) {
	var ev policyv1.Eviction
	if err := req.Body.Decode(&ev, policyv1.SchemeGroupVersion.WithKind("Eviction"), registry.DecodeOptions{Optional: true}); err != nil {
		return nil, 0, err
	}
	if ev.Name != "" && ev.Name != req.Name {
		return nil, 0, apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	opts := ev.DeleteOptions
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	if opts.IgnoreStoreReadErrorWithClusterBreakingPotential != nil && *opts.IgnoreStoreReadErrorWithClusterBreakingPotential {
		return nil, 0, apierrors.NewInvalid(evictionGK, req.Name, field.ErrorList{field.Invalid(
			field.NewPath("deleteOptions").Child("ignoreStoreReadErrorWithClusterBreakingPotential"), true,
			"can not be set for pod eviction, try after removing the option")})
	}
	dry, err := req.DryRun()
	if err != nil {
		return nil, 0, err
	}
	dry = dry || slices.Contains(opts.DryRun, metav1.DryRunAll)
	rvUnset := opts.Preconditions == nil || opts.Preconditions.ResourceVersion == nil

	// A pod that does not count for any budget is deleted at once; a concurrent change
	// of it is retried unless the client pinned a resourceVersion.
	var pod *v1.Pod
	for attempt := 0; ; attempt++ {
		obj, err := req.Objects.Get(ctx, req.Namespace, req.Name)
		if err != nil {
			return nil, 0, err
		}
		pod = obj.(*v1.Pod)
		if !evictionIgnoresBudgets(pod) {
			break
		}
		del := opts
		if evictionPinsVersion(pod) && rvUnset {
			del = withResourceVersion(opts, pod.ResourceVersion)
		}
		err = evictPod(ctx, req, del, dry)
		if err == nil {
			return registry.SuccessStatus(), http.StatusCreated, nil
		}
		if !apierrors.IsConflict(err) || !rvUnset || attempt >= evictionRetries {
			return nil, 0, err
		}
	}

	objs, err := req.Objects.ListOf(ctx, policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"), req.Namespace)
	if err != nil {
		return nil, 0, err
	}
	pdbs := matchingBudgets(pod, objs)
	if len(pdbs) > 1 {
		return &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
			Code:    http.StatusInternalServerError}, http.StatusInternalServerError, nil
	}
	pinDeletion := false
	var pdbName string
	if len(pdbs) == 1 {
		pdb := pdbs[0]
		pdbName = pdb.Name
		if evictionSkipsBudget(pod, pdb) {
			// An unready pod goes without spending the budget, as long as it is the pod
			// the decision was made on.
			pinDeletion = true
		} else if err := spendBudget(ctx, req, pdb, pod.Name, dry); err != nil {
			return nil, 0, err
		}
	}
	del := opts
	if pinDeletion {
		del = withResourceVersion(opts, pod.ResourceVersion)
	}
	if err := evictPod(ctx, req, del, dry); err != nil {
		if apierrors.IsConflict(err) && pinDeletion && rvUnset {
			return nil, 0, budgetBeingProcessed(pdbName)
		}
		return nil, 0, err
	}
	return registry.SuccessStatus(), http.StatusCreated, nil
}

var evictionGK = policyv1.SchemeGroupVersion.WithKind("Eviction").GroupKind()

// evictionRetries bounds the retries of an eviction racing other writes of its pod or
// budget.
const evictionRetries = 20

// maxDisruptedPods is how many evictions a budget may record before the disruption
// controller confirms them; beyond it evictions are refused.
const maxDisruptedPods = 2000

// evictionIgnoresBudgets reports whether no budget protects pod: it is not running
// (pending or finished) or is already being deleted.
func evictionIgnoresBudgets(pod *v1.Pod) bool {
	switch pod.Status.Phase {
	case v1.PodSucceeded, v1.PodFailed, v1.PodPending:
		return true
	}
	return pod.DeletionTimestamp != nil
}

// evictionPinsVersion reports whether the deletion of a pod no budget protects must be
// of the version the decision saw (a pending pod may start running meanwhile).
func evictionPinsVersion(pod *v1.Pod) bool {
	return pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed && pod.DeletionTimestamp == nil
}

// evictionSkipsBudget reports whether an unready pod may go without spending its
// budget: the budget says AlwaysAllow, or it is healthy enough without the pod.
func evictionSkipsBudget(pod *v1.Pod, pdb *policyv1.PodDisruptionBudget) bool {
	if podIsReady(pod) {
		return false
	}
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
		return true
	}
	return pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0
}

func podIsReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// matchingBudgets returns the budgets of pod's namespace whose selector selects it.
func matchingBudgets(pod *v1.Pod, objs []runtime.Object) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for _, o := range objs {
		pdb, ok := o.(*policyv1.PodDisruptionBudget)
		if !ok || pdb.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, pdb)
	}
	return out
}

// spendBudget takes one disruption from the budget for podName, on the budget's
// current version (the generic update path retries on concurrent writes).
func spendBudget(ctx context.Context, req *registry.HandlerRequest, pdb *policyv1.PodDisruptionBudget, podName string, dry bool) error {
	if dry {
		_, err := decrementBudget(pdb.DeepCopy(), podName, req.Objects.Now())
		return err
	}
	_, _, err := req.Objects.UpdateOf(ctx, policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"), pdb.Namespace, pdb.Name, "status", false,
		func(cur runtime.Object) (runtime.Object, error) {
			cp, ok := cur.(*policyv1.PodDisruptionBudget)
			if !ok {
				return nil, apierrors.NewInternalError(fmt.Errorf("poddisruptionbudget %s is a %T", pdb.Name, cur))
			}
			cp.ResourceVersion = ""
			return decrementBudget(cp, podName, req.Objects.Now())
		})
	return err
}

// decrementBudget is the budget's decision on one eviction: refused with a 429 while
// the disruption controller has not seen the budget's last change or allows no
// disruption, a 403 when the budget is broken; otherwise pdb has one disruption less,
// podName recorded in status.disruptedPods at now.
func decrementBudget(pdb *policyv1.PodDisruptionBudget, podName string, now time.Time) (*policyv1.PodDisruptionBudget, error) {
	if pdb.Status.ObservedGeneration < pdb.Generation {
		return nil, budgetBeingProcessed(pdb.Name)
	}
	if pdb.Status.DisruptionsAllowed < 0 {
		return nil, budgetForbidden(pdb.Name, "pdb disruptions allowed is negative",
			fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: pdb disruptions allowed is negative", pdb.Name))
	}
	if len(pdb.Status.DisruptedPods) > maxDisruptedPods {
		return nil, budgetForbidden(pdb.Name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
			fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: too many pending evictions not confirmed by PDB controller", pdb.Name))
	}
	if pdb.Status.DisruptionsAllowed == 0 {
		err := apierrors.NewTooManyRequests(budgetViolation, 0)
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
			Type: policyv1.DisruptionBudgetCause, Message: budgetRefusal(pdb)})
		return nil, err
	}
	pdb.Status.DisruptionsAllowed--
	if pdb.Status.DisruptionsAllowed == 0 {
		pdbhelper.UpdateDisruptionAllowedCondition(pdb)
	}
	if pdb.Status.DisruptedPods == nil {
		pdb.Status.DisruptedPods = map[string]metav1.Time{}
	}
	pdb.Status.DisruptedPods[podName] = metav1.NewTime(now)
	return pdb, nil
}

const budgetViolation = "Cannot evict pod as it would violate the pod's disruption budget."

// budgetRefusal explains why a budget allows no disruption, in Kubernetes' words.
func budgetRefusal(pdb *policyv1.PodDisruptionBudget) string {
	c := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	switch {
	case c != nil && c.Status == metav1.ConditionFalse && c.Message != "" && c.Reason == policyv1.SyncFailedReason:
		return fmt.Sprintf("The disruption budget %s does not allow evicting pods currently because it failed sync: %s", pdb.Name, c.Message)
	case pdb.Status.CurrentHealthy <= pdb.Status.DesiredHealthy:
		return fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy)
	case c != nil && c.Status == metav1.ConditionFalse && c.Message != "":
		return fmt.Sprintf("The disruption budget %s does not allow evicting pods currently (%s): %s", pdb.Name, c.Reason, c.Message)
	}
	return fmt.Sprintf("The disruption budget %s does not allow evicting pods currently", pdb.Name)
}

func budgetBeingProcessed(name string) error {
	err := apierrors.NewTooManyRequests(budgetViolation, 10)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: policyv1.DisruptionBudgetCause, Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", name)})
	return err
}

func budgetForbidden(name, reason, cause string) error {
	err := apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), name, errors.New(reason))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: cause})
	return err
}

func withResourceVersion(opts *metav1.DeleteOptions, rv string) *metav1.DeleteOptions {
	out := opts.DeepCopy()
	if out.Preconditions == nil {
		out.Preconditions = &metav1.Preconditions{}
	}
	out.Preconditions.ResourceVersion = &rv
	return out
}

// evictPod marks the pod with the DisruptionTarget condition, checking opts'
// preconditions, then deletes it with opts.
func evictPod(ctx context.Context, req *registry.HandlerRequest, opts *metav1.DeleteOptions, dry bool) error {
	if !dry {
		out, _, err := req.Objects.Update(ctx, req.Namespace, req.Name, "status", false, registry.Mutate(func(pod *v1.Pod) (*v1.Pod, error) {
			if p := opts.Preconditions; p != nil {
				if p.UID != nil && *p.UID != "" && *p.UID != pod.UID {
					return nil, apierrors.NewConflict(schema.GroupResource{Resource: "Pod"}, pod.Name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *p.UID, pod.UID))
				}
				if p.ResourceVersion != nil && *p.ResourceVersion != "" && *p.ResourceVersion != pod.ResourceVersion {
					return nil, apierrors.NewConflict(schema.GroupResource{Resource: "Pod"}, pod.Name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *p.ResourceVersion, pod.ResourceVersion))
				}
			}
			pod.ResourceVersion = ""
			pod.Status.Conditions = setPodCondition(pod.Status.Conditions, v1.PodCondition{
				Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "EvictionByEvictionAPI",
				Message: "Eviction API: evicting", LastTransitionTime: metav1.NewTime(req.Objects.Now()),
			})
			return pod, nil
		}))
		if err != nil {
			return err
		}
		if opts.Preconditions != nil && opts.Preconditions.ResourceVersion != nil {
			m, err := apimeta.Accessor(out)
			if err != nil {
				return apierrors.NewInternalError(err)
			}
			opts = withResourceVersion(opts, m.GetResourceVersion())
		}
	}
	_, _, err := req.Objects.Delete(ctx, req.Namespace, req.Name, opts, dry)
	return err
}
