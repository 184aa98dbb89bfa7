package nodelifecycle

import (
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
)

// evictions decides, at now, the fate of pods on a node with taints, as
// Kubernetes' taint eviction controller does; only NoExecute taints count.
// A pod that does not tolerate every one of them is in deleteNow. A pod
// that tolerates them all is kept for as long as the shortest
// tolerationSeconds among the tolerations used (for each taint, the pod's
// first toleration that matches it), counted from that taint's TimeAdded:
// in deleteNow once that time has come, in deleteAt until then, and in
// neither when no used toleration has tolerationSeconds. Pods already being
// deleted are left out. A taint without TimeAdded counts as added at now,
// so callers stamp such taints with the time they first saw them.
func evictions(pods []*v1.Pod, taints []v1.Taint, now time.Time) (deleteNow []*v1.Pod, deleteAt map[*v1.Pod]time.Time) {
	var noExecute []v1.Taint
	for _, t := range taints {
		if t.Effect == v1.TaintEffectNoExecute {
			noExecute = append(noExecute, t)
		}
	}
	if len(noExecute) == 0 {
		return nil, nil
	}
	for _, pod := range pods {
		if pod == nil || pod.DeletionTimestamp != nil {
			continue
		}
		at, forever := deadline(pod.Spec.Tolerations, noExecute, now)
		switch {
		case forever:
			// Tolerated without a time limit: the pod stays.
		case at.After(now):
			if deleteAt == nil {
				deleteAt = map[*v1.Pod]time.Time{}
			}
			deleteAt[pod] = at
		default:
			deleteNow = append(deleteNow, pod)
		}
	}
	return deleteNow, deleteAt
}

// deadline returns when a pod with tolerations must go from a node with
// the NoExecute taints, or forever when it may stay. A taint that no
// toleration matches makes the deadline now.
func deadline(tolerations []v1.Toleration, taints []v1.Taint, now time.Time) (at time.Time, forever bool) {
	forever = true
	for i := range taints {
		tol := firstTolerating(tolerations, &taints[i])
		if tol == nil {
			return now, false
		}
		if tol.TolerationSeconds == nil {
			continue
		}
		added := now
		if taints[i].TimeAdded != nil {
			added = taints[i].TimeAdded.Time
		}
		due := added
		if s := *tol.TolerationSeconds; s > 0 {
			due = added.Add(time.Duration(s) * time.Second)
		}
		if forever || due.Before(at) {
			at, forever = due, false
		}
	}
	return at, forever
}

// firstTolerating returns the first of tolerations that tolerates taint.
// Numeric (Lt, Gt) tolerations are honoured: the API server admitted them.
func firstTolerating(tolerations []v1.Toleration, taint *v1.Taint) *v1.Toleration {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(logr.Discard(), taint, true) {
			return &tolerations[i]
		}
	}
	return nil
}
