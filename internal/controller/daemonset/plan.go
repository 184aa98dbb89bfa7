package daemonset

import (
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// snapshot is what one sync of a DaemonSet sees.
type snapshot struct {
	ds    *appsv1.DaemonSet
	hash  string // current controller-revision-hash
	nodes []*v1.Node
	// pods are the DaemonSet's own pods (after adoption), terminating ones
	// included.
	pods []*v1.Pod
	now  time.Time
	// backoff holds nodes whose failed pod was deleted recently: no new pod
	// is created there before the given time.
	backoff map[string]time.Time
	// manage is false while earlier creates or deletes are still unobserved:
	// only the status is computed then.
	manage bool
}

// plan is the outcome of one sync.
type plan struct {
	// creates are the nodes that get a new pod.
	creates []string
	// deletes are pods to delete, with why (an event is recorded for failed
	// pods).
	deletes []*v1.Pod
	// failed are the failed pods among deletes, reported as FailedDaemonPod.
	failed []*v1.Pod
	status appsv1.DaemonSetStatus
}

// compute decides creates, deletes and the status of a DaemonSet: one pod on
// each node that should run it, none elsewhere, old pods replaced under the
// update strategy. It does no I/O.
func compute(s snapshot) plan {
	var p plan
	byNode := map[string][]*v1.Pod{}
	// terminating are the nodes with a pod on its way out.
	terminating := map[string]bool{}
	for _, pod := range s.pods {
		if pod.DeletionTimestamp != nil {
			terminating[targetNode(pod)] = true
			continue
		}
		n := targetNode(pod)
		byNode[n] = append(byNode[n], pod)
	}
	for _, pods := range byNode {
		sortOldestFirst(pods)
	}
	nodeNames := map[string]bool{}
	// kept are, per eligible node, the pods left after the manage step.
	kept := map[string][]*v1.Pod{}
	surge := s.ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType && maxSurge(s.ds, 1) > 0
	for _, node := range s.nodes {
		nodeNames[node.Name] = true
		shouldRun, shouldContinue := nodeFit(s.ds, node)
		pods := byNode[node.Name]
		if !shouldContinue || (!shouldRun && len(pods) == 0) {
			p.deletes = append(p.deletes, pods...)
			continue
		}
		var running []*v1.Pod
		failedHere := false
		for _, pod := range pods {
			if pod.Status.Phase == v1.PodFailed {
				p.deletes = append(p.deletes, pod)
				p.failed = append(p.failed, pod)
				failedHere = true
				continue
			}
			running = append(running, pod)
		}
		switch {
		case len(running) == 0 && shouldRun:
			if failedHere {
				// The replacement waits for the next sync, after the backoff.
				break
			}
			if until, ok := s.backoff[node.Name]; ok && s.now.Before(until) {
				break
			}
			if terminating[node.Name] && !surge {
				// As upstream, the replacement waits until the old pod
				// is gone (its ports, its files): its removal wakes us.
				break
			}
			p.creates = append(p.creates, node.Name)
		case len(running) > 1:
			keep, extra := keepOnNode(running, s.hash, surge)
			running = keep
			p.deletes = append(p.deletes, extra...)
		}
		if shouldRun {
			kept[node.Name] = running
		}
	}
	for name, pods := range byNode {
		if !nodeNames[name] {
			p.deletes = append(p.deletes, pods...)
		}
	}
	p.status = status(s, byNode)
	if s.ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		creates, deletes := rollingUpdate(s, kept)
		p.creates = append(p.creates, creates...)
		p.deletes = append(p.deletes, deletes...)
	}
	if !s.manage {
		p.creates, p.deletes, p.failed = nil, nil, nil
	}
	sort.Strings(p.creates)
	return p
}

// keepOnNode keeps the oldest pod (with surge: the oldest current and the
// oldest old one) and returns the rest as extra.
func keepOnNode(pods []*v1.Pod, hash string, surge bool) (keep, extra []*v1.Pod) {
	if !surge {
		return pods[:1], pods[1:]
	}
	var haveNew, haveOld bool
	for _, pod := range pods {
		isNew := pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash
		switch {
		case isNew && !haveNew:
			haveNew = true
			keep = append(keep, pod)
		case !isNew && !haveOld:
			haveOld = true
			keep = append(keep, pod)
		default:
			extra = append(extra, pod)
		}
	}
	return keep, extra
}

// rollingUpdate replaces old pods, at most maxUnavailable nodes without an
// available pod at a time (or, with maxSurge, at most maxSurge nodes running
// two pods), as upstream's rollingUpdate does. Old pods that are not
// available are replaced at once: they serve nothing.
func rollingUpdate(s snapshot, kept map[string][]*v1.Pod) (creates []string, deletes []*v1.Pod) {
	desired := len(kept)
	minReady := s.ds.Spec.MinReadySeconds
	nodes := make([]string, 0, len(kept))
	for n := range kept {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	split := func(pods []*v1.Pod) (newPod, oldPod *v1.Pod) {
		for _, pod := range pods {
			if pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == s.hash {
				newPod = pod
			} else if oldPod == nil {
				oldPod = pod
			}
		}
		return newPod, oldPod
	}
	if surgeN := maxSurge(s.ds, desired); surgeN > 0 {
		var allowed, candidates []string
		numSurge := 0
		for _, n := range nodes {
			newPod, oldPod := split(kept[n])
			switch {
			case oldPod == nil:
			case newPod == nil:
				if !available(oldPod, minReady, s.now) {
					allowed = append(allowed, n)
				} else {
					candidates = append(candidates, n)
				}
			default:
				if available(newPod, minReady, s.now) {
					deletes = append(deletes, oldPod)
				} else {
					numSurge++
				}
			}
		}
		room := max(surgeN-numSurge, 0)
		room = min(room, len(candidates))
		return append(allowed, candidates[:room]...), deletes
	}
	maxUnavail := maxUnavailable(s.ds, desired)
	numUnavailable := 0
	var candidates []*v1.Pod
	for _, n := range nodes {
		newPod, oldPod := split(kept[n])
		switch {
		case newPod == nil && oldPod == nil, newPod != nil && oldPod != nil:
			numUnavailable++
		case newPod != nil:
			if !available(newPod, minReady, s.now) {
				numUnavailable++
			}
		default:
			if !available(oldPod, minReady, s.now) {
				deletes = append(deletes, oldPod)
				numUnavailable++
			} else {
				candidates = append(candidates, oldPod)
			}
		}
	}
	room := min(max(maxUnavail-numUnavailable, 0), len(candidates))
	return nil, append(deletes, candidates[:room]...)
}

// status counts as kubectl reads it: desired = nodes that should run the
// pod, current = those that have one, misscheduled = pods on other nodes.
func status(s snapshot, byNode map[string][]*v1.Pod) appsv1.DaemonSetStatus {
	st := appsv1.DaemonSetStatus{
		ObservedGeneration: s.ds.Generation,
		CollisionCount:     s.ds.Status.CollisionCount,
		Conditions:         s.ds.Status.Conditions,
	}
	for _, node := range s.nodes {
		shouldRun, _ := nodeFit(s.ds, node)
		pods := byNode[node.Name]
		if !shouldRun {
			if len(pods) > 0 {
				st.NumberMisscheduled++
			}
			continue
		}
		st.DesiredNumberScheduled++
		if len(pods) == 0 {
			continue
		}
		st.CurrentNumberScheduled++
		pod := pods[0]
		for _, p := range pods {
			if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == s.hash {
				pod = p
				break
			}
		}
		if podReady(pod) {
			st.NumberReady++
			if available(pod, s.ds.Spec.MinReadySeconds, s.now) {
				st.NumberAvailable++
			}
		}
		if pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == s.hash {
			st.UpdatedNumberScheduled++
		}
	}
	st.NumberUnavailable = st.DesiredNumberScheduled - st.NumberAvailable
	return st
}

func maxUnavailable(ds *appsv1.DaemonSet, desired int) int {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	v := intstr.FromInt32(1)
	if ru != nil && ru.MaxUnavailable != nil {
		v = *ru.MaxUnavailable
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, desired, true)
	if err != nil {
		return 1
	}
	if n == 0 && maxSurge(ds, desired) == 0 {
		return 1
	}
	return n
}

func maxSurge(ds *appsv1.DaemonSet, desired int) int {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ru == nil || ru.MaxSurge == nil {
		return 0
	}
	v := *ru.MaxSurge
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, desired, true)
	if err != nil {
		return 0
	}
	return n
}

// podReady reports the pod's Ready condition.
func podReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// available is Ready for at least minReadySeconds.
func available(pod *v1.Pod, minReadySeconds int32, now time.Time) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type != v1.PodReady || c.Status != v1.ConditionTrue {
			continue
		}
		if minReadySeconds == 0 {
			return true
		}
		return !c.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second).After(now)
	}
	return false
}

func sortOldestFirst(pods []*v1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i].CreationTimestamp, pods[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return pods[i].Name < pods[j].Name
	})
}
