package disruption

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"
)

// DeletionTimeout is how long an eviction's entry in status.disruptedPods keeps its pod
// out of the healthy count while the pod is not yet deleted, as upstream: past it the
// pod counts again.
const DeletionTimeout = 2 * time.Minute

// scaleFinder returns the UID and desired replicas of the controller of pod (a
// Deployment, ReplicaSet, StatefulSet or ReplicationController); found is false when no
// such controller exists.
type scaleFinder func(pod *v1.Pod, ref *metav1.OwnerReference) (uid types.UID, scale int32, found bool)

// counts is what a budget's status is made of.
type counts struct {
	expected, desired, healthy int32
	disrupted                  map[string]metav1.Time
	// recheck, when set, is when a disrupted pod's entry expires.
	recheck *time.Time
	// unmanaged are the selected pods no controller owns.
	unmanaged []string
}

// computeCounts is the disruption controller's arithmetic for one budget and the pods
// its selector picks: expected pods (the controllers' scale, or the pod count for an
// integer minAvailable), desired healthy pods, current healthy (ready, not deleting,
// not recently evicted) pods and the evictions still awaiting their pod's deletion.
func computeCounts(pdb *policyv1.PodDisruptionBudget, pods []*v1.Pod, find scaleFinder, now time.Time) (counts, error) {
	var c counts
	var err error
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		if c.expected, c.unmanaged, err = expectedScale(pods, find); err != nil {
			return c, err
		}
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(c.expected), true)
		if err != nil {
			return c, err
		}
		c.desired = max(c.expected-int32(maxUnavailable), 0)
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		c.desired = pdb.Spec.MinAvailable.IntVal
		c.expected = int32(len(pods))
	case pdb.Spec.MinAvailable != nil:
		if c.expected, c.unmanaged, err = expectedScale(pods, find); err != nil {
			return c, err
		}
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(c.expected), true)
		if err != nil {
			return c, err
		}
		c.desired = int32(minAvailable)
	}
	c.disrupted, c.recheck = disruptedPods(pdb, pods, now)
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if _, ok := c.disrupted[pod.Name]; ok {
			continue
		}
		if podReady(pod) {
			c.healthy++
		}
	}
	return c, nil
}

// expectedScale adds up the desired replicas of the selected pods' controllers, each
// counted once; a pod owned by a controller that cannot be found fails the sync.
func expectedScale(pods []*v1.Pod, find scaleFinder) (int32, []string, error) {
	scales := map[types.UID]int32{}
	var unmanaged []string
	for _, pod := range pods {
		ref := metav1.GetControllerOf(pod)
		if ref == nil {
			unmanaged = append(unmanaged, pod.Name)
			continue
		}
		if _, ok := scales[ref.UID]; ok {
			continue
		}
		uid, scale, found := find(pod, ref)
		if !found {
			return 0, unmanaged, fmt.Errorf("found no controllers for pod %q", pod.Name)
		}
		scales[uid] = scale
	}
	var total int32
	for _, n := range scales {
		total += n
	}
	return total, unmanaged, nil
}

// disruptedPods keeps the evictions of status.disruptedPods whose pod still exists, is
// not yet deleting and was evicted less than DeletionTimeout ago; recheck is when the
// first of them expires.
func disruptedPods(pdb *policyv1.PodDisruptionBudget, pods []*v1.Pod, now time.Time) (map[string]metav1.Time, *time.Time) {
	out := map[string]metav1.Time{}
	var recheck *time.Time
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		t, ok := pdb.Status.DisruptedPods[pod.Name]
		if !ok {
			continue
		}
		expires := t.Add(DeletionTimeout)
		if expires.Before(now) {
			continue
		}
		if recheck == nil || expires.Before(*recheck) {
			recheck = &expires
		}
		out[pod.Name] = t
	}
	return out, recheck
}

func podReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// newStatus returns the budget with its status set from c, or nil when the stored
// status already says the same. Disruptions are allowed only when some pod is expected
// and more are healthy than desired.
func newStatus(pdb *policyv1.PodDisruptionBudget, c counts) *policyv1.PodDisruptionBudget {
	allowed := c.healthy - c.desired
	if c.expected <= 0 || allowed <= 0 {
		allowed = 0
	}
	s := pdb.Status
	if s.CurrentHealthy == c.healthy && s.DesiredHealthy == c.desired && s.ExpectedPods == c.expected &&
		s.DisruptionsAllowed == allowed && apiequality.Semantic.DeepEqual(s.DisruptedPods, c.disrupted) &&
		s.ObservedGeneration == pdb.Generation && pdbhelper.ConditionsAreUpToDate(pdb) {
		return nil
	}
	out := pdb.DeepCopy()
	out.Status = policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: c.healthy, DesiredHealthy: c.desired, ExpectedPods: c.expected,
		DisruptionsAllowed: allowed, DisruptedPods: c.disrupted, ObservedGeneration: pdb.Generation,
		Conditions: out.Status.Conditions,
	}
	pdbhelper.UpdateDisruptionAllowedCondition(out)
	return out
}

// failedStatus is the budget after a failed sync: no disruption allowed, the
// DisruptionAllowed condition False with reason SyncFailed and the error as message.
func failedStatus(pdb *policyv1.PodDisruptionBudget, err error) *policyv1.PodDisruptionBudget {
	out := pdb.DeepCopy()
	out.Status.DisruptionsAllowed = 0
	if out.Status.Conditions == nil {
		out.Status.Conditions = []metav1.Condition{}
	}
	apimeta.SetStatusCondition(&out.Status.Conditions, metav1.Condition{
		Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: policyv1.SyncFailedReason,
		Message: err.Error(), ObservedGeneration: out.Status.ObservedGeneration,
	})
	return out
}
