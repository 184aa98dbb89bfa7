package statefulset

import (
	"reflect"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// snapshot is what one sync of a StatefulSet sees.
type snapshot struct {
	set *appsv1.StatefulSet
	// pods are the set's own pods (after adoption).
	pods []*v1.Pod
	// claims are the namespace's claims by name.
	claims map[string]*v1.PersistentVolumeClaim
	// current and update are the revisions with their templates.
	current, update         *appsv1.ControllerRevision
	currentTmpl, updateTmpl *v1.PodTemplateSpec
	now                     time.Time
}

// claimUpdate is a claim whose ownerReferences change.
type claimUpdate struct {
	claim  *v1.PersistentVolumeClaim
	owners []metav1.OwnerReference
}

// plan is the outcome of one sync, applied in order: claims, pod creates,
// pod deletes, status.
type plan struct {
	createClaims []*v1.PersistentVolumeClaim
	// claimPod names the pod each created claim is for (for events).
	claimPod     map[string]string
	updateClaims []claimUpdate
	createPods   []*v1.Pod
	deletePods   []*v1.Pod
	status       appsv1.StatefulSetStatus
	// requeue wakes the set when a ready pod becomes available.
	requeue time.Duration
}

// compute decides one step of a StatefulSet: with OrderedReady it stops at
// the first pod that is missing, not yet Running and available, or
// terminating (create i only after 0..i-1 are ready, scale down from the
// highest); with Parallel it does everything at once. Then the rolling
// update replaces, from the highest ordinal down to the partition, one pod
// whose revision is not the update revision (up to maxUnavailable when it is
// set). It does no I/O.
func compute(s snapshot) plan {
	set := s.set
	p := plan{claimPod: map[string]string{}}
	start, end := ordinalRange(set)
	monotonic := set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	minReady := set.Spec.MinReadySeconds
	replicas := make([]*v1.Pod, end-start)
	var condemned []*v1.Pod
	for _, pod := range s.pods {
		ord, ok := ordinalOf(set, pod)
		if !ok {
			continue
		}
		if ord >= start && ord < end {
			replicas[ord-start] = pod
		} else {
			condemned = append(condemned, pod)
		}
	}
	sort.Slice(condemned, func(i, j int) bool {
		a, _ := ordinalOf(set, condemned[i])
		b, _ := ordinalOf(set, condemned[j])
		return a > b
	})
	p.status = status(s, replicas, condemned)
	for _, pod := range s.pods {
		if runningAndReady(pod) {
			if d := availableIn(pod, minReady, s.now); d > 0 && (p.requeue == 0 || d < p.requeue) {
				p.requeue = d
			}
		}
	}
	if set.DeletionTimestamp != nil {
		return p
	}
	p.updateClaims = claimOwnerUpdates(s, replicas, condemned, start)

	// firstUnhealthy is the lowest ordinal pod in range that is not
	// available (or terminating), else the lowest ordinal such condemned
	// pod: the only unhealthy pod OrderedReady may delete while scaling
	// down, as upstream's firstUnavailablePod. Condemned pods are sorted
	// highest first, so they are searched from the end: with every pod
	// unhealthy, scale-down halts instead of removing the highest.
	var firstUnhealthy *v1.Pod
	for _, pod := range replicas {
		if pod != nil && unavailable(pod, minReady, s.now) {
			firstUnhealthy = pod
			break
		}
	}
	for i := len(condemned) - 1; i >= 0 && firstUnhealthy == nil; i-- {
		if unavailable(condemned[i], minReady, s.now) {
			firstUnhealthy = condemned[i]
		}
	}
	for i, pod := range replicas {
		ord := start + i
		if pod != nil && (pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded) {
			// A finished pod is replaced under the same name once gone.
			if pod.DeletionTimestamp == nil {
				p.deletePods = append(p.deletePods, pod)
			}
			if monotonic {
				return p
			}
			continue
		}
		if pod == nil {
			tmpl, rev := s.updateTmpl, s.update.Name
			if useCurrent(set, ord) {
				tmpl, rev = s.currentTmpl, s.current.Name
			}
			p.createMissingClaims(s, ord)
			p.createPods = append(p.createPods, newPod(set, tmpl, rev, ord))
			if monotonic {
				return p
			}
			continue
		}
		// The pod exists: its claims must too (they may have been deleted
		// under a pending pod).
		p.createMissingClaims(s, ord)
		if !monotonic {
			continue
		}
		if pod.DeletionTimestamp != nil || !runningAndReady(pod) {
			return p
		}
		if !available(pod, minReady, s.now) {
			return p
		}
	}
	for _, pod := range condemned {
		if pod.DeletionTimestamp != nil {
			if monotonic {
				return p
			}
			continue
		}
		// OrderedReady deletes an unavailable condemned pod only when it
		// is the first unhealthy one; a healthy one goes regardless.
		if monotonic && !available(pod, minReady, s.now) && pod != firstUnhealthy {
			return p
		}
		p.deletePods = append(p.deletePods, pod)
		if monotonic {
			return p
		}
	}
	if set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return p
	}
	partition := 0
	ru := set.Spec.UpdateStrategy.RollingUpdate
	if ru != nil && ru.Partition != nil {
		partition = int(*ru.Partition)
	}
	if ru != nil && ru.MaxUnavailable != nil {
		p.deletePods = append(p.deletePods, rollWithMaxUnavailable(s, replicas, start, partition, ru.MaxUnavailable)...)
		return p
	}
	for i := len(replicas) - 1; i >= 0 && start+i >= partition; i-- {
		pod := replicas[i]
		if pod == nil || pod.DeletionTimestamp != nil {
			return p
		}
		if pod.Labels[appsv1.ControllerRevisionHashLabelKey] != s.update.Name {
			p.deletePods = append(p.deletePods, pod)
			return p
		}
		if !runningAndReady(pod) || !available(pod, minReady, s.now) {
			return p
		}
	}
	return p
}

// rollWithMaxUnavailable replaces old pods from the highest ordinal down to
// the partition, as many at a time as maxUnavailable leaves room for once
// the pods already unavailable (missing, terminating, not yet available)
// are counted.
func rollWithMaxUnavailable(s snapshot, replicas []*v1.Pod, start, partition int, maxUnavailable *intstr.IntOrString) []*v1.Pod {
	limit, err := intstr.GetScaledValueFromIntOrPercent(maxUnavailable, len(replicas), false)
	if err != nil || limit < 1 {
		limit = 1
	}
	unavailable := 0
	for _, pod := range replicas {
		if pod == nil || pod.DeletionTimestamp != nil || !available(pod, s.set.Spec.MinReadySeconds, s.now) {
			unavailable++
		}
	}
	var out []*v1.Pod
	for i := len(replicas) - 1; i >= 0 && start+i >= partition && unavailable < limit; i-- {
		pod := replicas[i]
		if pod == nil || pod.DeletionTimestamp != nil || pod.Labels[appsv1.ControllerRevisionHashLabelKey] == s.update.Name {
			continue
		}
		if available(pod, s.set.Spec.MinReadySeconds, s.now) {
			unavailable++
		}
		out = append(out, pod)
	}
	return out
}

// useCurrent says whether the pod of ordinal runs the current revision:
// below the partition of a rolling update.
func useCurrent(set *appsv1.StatefulSet, ord int) bool {
	if set.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType {
		return false
	}
	ru := set.Spec.UpdateStrategy.RollingUpdate
	return ru != nil && ru.Partition != nil && ord < int(*ru.Partition)
}

func (p *plan) createMissingClaims(s snapshot, ord int) {
	for _, c := range newClaims(s.set, ord) {
		if _, ok := s.claims[c.Name]; ok {
			continue
		}
		c.OwnerReferences = claimOwners(s.set, c, nil, false)
		p.createClaims = append(p.createClaims, c)
		p.claimPod[c.Name] = podName(s.set, ord)
	}
}

// claimOwnerUpdates brings existing claims' ownerReferences in line with
// the retention policy.
func claimOwnerUpdates(s snapshot, replicas, condemned []*v1.Pod, start int) []claimUpdate {
	var out []claimUpdate
	check := func(pod *v1.Pod, ord int, isCondemned bool) {
		for _, tmpl := range newClaims(s.set, ord) {
			claim, ok := s.claims[tmpl.Name]
			if !ok || claim.DeletionTimestamp != nil {
				continue
			}
			owners := claimOwners(s.set, claim, pod, isCondemned)
			if !sameOwners(owners, claim.OwnerReferences) {
				out = append(out, claimUpdate{claim: claim, owners: owners})
			}
		}
	}
	for i, pod := range replicas {
		check(pod, start+i, false)
	}
	for _, pod := range condemned {
		ord, _ := ordinalOf(s.set, pod)
		check(pod, ord, true)
	}
	return out
}

func sameOwners(a, b []metav1.OwnerReference) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// status counts as kubectl reads it; once every pod runs the update
// revision and is ready, the update revision becomes the current one.
func status(s snapshot, replicas, condemned []*v1.Pod) appsv1.StatefulSetStatus {
	set := s.set
	st := appsv1.StatefulSetStatus{
		ObservedGeneration: set.Generation,
		CurrentRevision:    s.current.Name,
		UpdateRevision:     s.update.Name,
		CollisionCount:     set.Status.CollisionCount,
		Conditions:         set.Status.Conditions,
	}
	for _, pod := range append(append([]*v1.Pod(nil), replicas...), condemned...) {
		if pod == nil {
			continue
		}
		st.Replicas++
		if runningAndReady(pod) {
			st.ReadyReplicas++
			if available(pod, set.Spec.MinReadySeconds, s.now) {
				st.AvailableReplicas++
			}
		}
		if pod.DeletionTimestamp != nil {
			continue
		}
		switch pod.Labels[appsv1.ControllerRevisionHashLabelKey] {
		case s.current.Name:
			st.CurrentReplicas++
			if s.current.Name == s.update.Name {
				st.UpdatedReplicas++
			}
		case s.update.Name:
			st.UpdatedReplicas++
		}
	}
	if st.UpdatedReplicas == st.Replicas && st.ReadyReplicas == st.Replicas && st.Replicas == int32(len(replicas)) {
		st.CurrentRevision = st.UpdateRevision
		st.CurrentReplicas = st.UpdatedReplicas
	}
	return st
}

func runningAndReady(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodRunning && podReady(pod)
}

func podReady(pod *v1.Pod) bool {
	return readySince(pod) != nil
}

func readySince(pod *v1.Pod) *metav1.Time {
	for i, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			return &pod.Status.Conditions[i].LastTransitionTime
		}
	}
	return nil
}

// unavailable is not available or terminating, upstream's isUnavailable.
func unavailable(pod *v1.Pod, minReadySeconds int32, now time.Time) bool {
	return !available(pod, minReadySeconds, now) || pod.DeletionTimestamp != nil
}

// available is Running and Ready for at least minReadySeconds.
func available(pod *v1.Pod, minReadySeconds int32, now time.Time) bool {
	return runningAndReady(pod) && availableIn(pod, minReadySeconds, now) == 0
}

// availableIn is how long a ready pod has left before it counts available.
func availableIn(pod *v1.Pod, minReadySeconds int32, now time.Time) time.Duration {
	since := readySince(pod)
	if since == nil || minReadySeconds == 0 {
		return 0
	}
	return max(since.Add(time.Duration(minReadySeconds)*time.Second).Sub(now), 0)
}
