package replicaset

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/tranche/tranche/internal/controller/controllerref"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// burstReplicas caps the pods one sync creates or deletes, as upstream's
// default does, so one huge scale request is spread over several syncs.
const burstReplicas = 500

// deletionCostAnnotation lets users say which pods to delete first on a
// scale-down: lower cost goes first.
const deletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// Reasons of the ReplicaFailure condition, the same as the event reasons.
const (
	reasonFailedCreate = "FailedCreate"
	reasonFailedDelete = "FailedDelete"
)

// controllerKind is the kind written into the ownerReferences of our pods.
var controllerKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

// snapshot is what one sync of a ReplicaSet starts from.
type snapshot struct {
	rs *appsv1.ReplicaSet
	// active are the ReplicaSet's active (not terminating, not finished) pods.
	active []*v1.Pod
	// terminating are its pods being deleted but not yet gone.
	terminating []*v1.Pod
	// related are the pods of every ReplicaSet with the same controller
	// (or of this one alone), for the co-location rank on scale-down.
	related []*v1.Pod
	// manage is false while earlier creates or deletes are still unseen in
	// the informer, or while the ReplicaSet is being deleted: then only
	// the status is computed.
	manage bool
	now    time.Time
}

// plan is the outcome of planReplicaSet.
type plan struct {
	// create is how many pods to create from the template.
	create int
	// delete are the pods to delete, the most dispensable first.
	delete []*v1.Pod
	// status is the status to write if every create and delete succeeds.
	status appsv1.ReplicaSetStatus
}

// planReplicaSet decides how many pods to create or which to delete so
// that s.rs has spec.replicas active pods, at most burstReplicas at a time,
// and computes its status from the pods.
func planReplicaSet(s snapshot) plan {
	var p plan
	if s.manage {
		diff := len(s.active) - int(replicas(s.rs))
		switch {
		case diff < 0:
			p.create = min(-diff, burstReplicas)
		case diff > 0:
			p.delete = podsToDelete(s.active, s.related, min(diff, burstReplicas), s.now)
		}
	}
	p.status = replicaSetStatus(s.rs, s.active, s.terminating, s.now)
	return p
}

// replicas is spec.replicas with apps/v1's default of 1.
func replicas(rs *appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}

// replicaSetStatus counts the pods the way `kubectl get rs` and the
// Deployment controller read them, and clears a ReplicaFailure condition:
// failedStatus puts it back when a create or delete fails.
func replicaSetStatus(rs *appsv1.ReplicaSet, active, terminating []*v1.Pod, now time.Time) appsv1.ReplicaSetStatus {
	st := *rs.Status.DeepCopy()
	templateLabels := labels.Set(rs.Spec.Template.Labels).AsSelectorPreValidated()
	var fully, ready, available int32
	for _, pod := range active {
		if templateLabels.Matches(labels.Set(pod.Labels)) {
			fully++
		}
		if isPodReady(pod) {
			ready++
			if isPodAvailable(pod, rs.Spec.MinReadySeconds, now) {
				available++
			}
		}
	}
	st.Replicas = int32(len(active))
	st.FullyLabeledReplicas = fully
	st.ReadyReplicas = ready
	st.AvailableReplicas = available
	st.TerminatingReplicas = new(int32(len(terminating)))
	st.ObservedGeneration = rs.Generation
	st.Conditions = slices.DeleteFunc(st.Conditions, func(c appsv1.ReplicaSetCondition) bool {
		return c.Type == appsv1.ReplicaSetReplicaFailure
	})
	if len(st.Conditions) == 0 {
		st.Conditions = nil
	}
	return st
}

// failedStatus adds the ReplicaFailure condition for err to st, keeping
// an existing one from old as it is, so that repeated failures do not
// rewrite the status on every retry.
func failedStatus(st appsv1.ReplicaSetStatus, old *appsv1.ReplicaSetStatus, reason string, err error, now time.Time) appsv1.ReplicaSetStatus {
	cond := appsv1.ReplicaSetCondition{
		Type:               appsv1.ReplicaSetReplicaFailure,
		Status:             v1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(now),
		Reason:             reason,
		Message:            err.Error(),
	}
	for _, c := range old.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure {
			cond = c
		}
	}
	st.Conditions = append(slices.Clone(st.Conditions), cond)
	return st
}

// podsToDelete returns the n pods of active to delete first, by
// upstream's ranking (see deletionLess).
func podsToDelete(active, related []*v1.Pod, n int, now time.Time) []*v1.Pod {
	pods := slices.Clone(active)
	if n < len(pods) {
		onNode := map[string]int{}
		for _, pod := range related {
			if isPodActive(pod) {
				onNode[pod.Spec.NodeName]++
			}
		}
		ranked := make([]rankedPod, len(pods))
		for i, pod := range pods {
			ranked[i] = rankedPod{pod: pod, rank: onNode[pod.Spec.NodeName]}
		}
		slices.SortStableFunc(ranked, func(a, b rankedPod) int {
			switch {
			case deletionLess(a, b, now):
				return -1
			case deletionLess(b, a, now):
				return 1
			}
			return 0
		})
		for i := range ranked {
			pods[i] = ranked[i].pod
		}
	}
	return pods[:n]
}

// rankedPod is a pod with the number of related active pods on its node.
type rankedPod struct {
	pod  *v1.Pod
	rank int
}

// phaseOrdinal orders phases from the cheapest to lose to the dearest.
var phaseOrdinal = map[v1.PodPhase]int{v1.PodPending: 0, v1.PodUnknown: 1, v1.PodRunning: 2}

// deletionLess reports whether a should be deleted before b: unscheduled
// before scheduled; Pending before Unknown before Running; not ready before
// ready; lower pod-deletion-cost first; more related pods on the same node
// first; ready for a shorter time first; more container restarts first;
// newer first. Times compare on a log2 scale of their age (so pods of
// similar age are treated alike), ties broken by UID to spread deletions.
func deletionLess(a, b rankedPod, now time.Time) bool {
	pa, pb := a.pod, b.pod
	if pa.Spec.NodeName != pb.Spec.NodeName && (pa.Spec.NodeName == "" || pb.Spec.NodeName == "") {
		return pa.Spec.NodeName == ""
	}
	if oa, ob := phaseOrdinal[pa.Status.Phase], phaseOrdinal[pb.Status.Phase]; oa != ob {
		return oa < ob
	}
	readyA, readyB := isPodReady(pa), isPodReady(pb)
	if readyA != readyB {
		return !readyA
	}
	if ca, cb := deletionCost(pa), deletionCost(pb); ca != cb {
		return ca < cb
	}
	if a.rank != b.rank {
		return a.rank > b.rank
	}
	if readyA && readyB {
		ta, tb := readySince(pa), readySince(pb)
		if !ta.Equal(tb) {
			return newerLess(pa, pb, ta, tb, now)
		}
	}
	if ra, rb := maxRestarts(pa), maxRestarts(pb); ra != rb {
		return ra > rb
	}
	ta, tb := pa.CreationTimestamp.Time, pb.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return newerLess(pa, pb, ta, tb, now)
	}
	return false
}

// newerLess orders zero times first, then by log2 of the age with the UID
// breaking ties; with no reference time, simply newer first.
func newerLess(pa, pb *v1.Pod, ta, tb, now time.Time) bool {
	if now.IsZero() || ta.IsZero() || tb.IsZero() {
		if ta.IsZero() || tb.IsZero() {
			return ta.IsZero()
		}
		return ta.After(tb)
	}
	d := logAge(ta, now) - logAge(tb, now)
	if d == 0 {
		return pa.UID < pb.UID
	}
	return d < 0
}

// logAge is log2 of t's age in nanoseconds, -1 for a time not in the past.
func logAge(t, now time.Time) int64 {
	age := now.Sub(t)
	if age <= 0 {
		return -1
	}
	return int64(math.Log2(float64(age)))
}

// deletionCost parses the pod-deletion-cost annotation; anything that is
// not an int32 counts as 0.
func deletionCost(pod *v1.Pod) int32 {
	v, ok := pod.Annotations[deletionCostAnnotation]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

func maxRestarts(pod *v1.Pod) int32 {
	var n int32
	for _, c := range pod.Status.ContainerStatuses {
		n = max(n, c.RestartCount)
	}
	return n
}

// readySince is when a ready pod became ready; zero when it is not ready.
func readySince(pod *v1.Pod) time.Time {
	if c := readyCondition(pod); c != nil && c.Status == v1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

func readyCondition(pod *v1.Pod) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// isPodReady reports the pod's Ready condition.
func isPodReady(pod *v1.Pod) bool {
	c := readyCondition(pod)
	return c != nil && c.Status == v1.ConditionTrue
}

// isPodAvailable reports a pod ready for at least minReadySeconds.
func isPodAvailable(pod *v1.Pod, minReadySeconds int32, now time.Time) bool {
	c := readyCondition(pod)
	if c == nil || c.Status != v1.ConditionTrue {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	return !c.LastTransitionTime.IsZero() && c.LastTransitionTime.Add(time.Duration(minReadySeconds)*time.Second).Before(now)
}

// isPodActive reports a pod that is neither finished nor being deleted.
func isPodActive(pod *v1.Pod) bool {
	return pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed && pod.DeletionTimestamp == nil
}

// isPodTerminating reports a pod being deleted whose containers may still run.
func isPodTerminating(pod *v1.Pod) bool {
	return pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed && pod.DeletionTimestamp != nil
}

// podKey is the pod's namespace/name, the key of deletion expectations.
func podKey(pod *v1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}

// claimPods applies the ControllerRef rules: a pod controlled by another
// object is never touched; a pod we control that stops matching is
// released; a matching orphan that is not being deleted is adopted. A
// ReplicaSet being deleted neither adopts nor releases.
func claimPods(rs *appsv1.ReplicaSet, selector labels.Selector, pods []*v1.Pod) controllerref.Claims {
	return controllerref.Split(rs, func(pod *v1.Pod) bool { return selector.Matches(labels.Set(pod.Labels)) }, pods)
}

// podFromTemplate is a new pod of rs: named after it by generateName, with
// the template's labels, annotations, finalizers and spec, controlled by rs.
func podFromTemplate(rs *appsv1.ReplicaSet) (*v1.Pod, error) {
	t := rs.Spec.Template.DeepCopy()
	if len(t.Labels) == 0 {
		return nil, fmt.Errorf("unable to create pods, no labels")
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    rs.Name + "-",
			Namespace:       rs.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, ownerKind(rs))},
		},
		Spec: t.Spec,
	}, nil
}
