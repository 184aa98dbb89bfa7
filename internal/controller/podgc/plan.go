package podgc

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Why a pod is collected; each has its DisruptionTarget message or none.
type reason int

const (
	// terminated: beyond the threshold of Succeeded and Failed pods.
	terminated reason = iota
	// orphaned: bound to a node that no longer exists.
	orphaned
	// outOfService: terminating on a NotReady node with the out-of-service taint.
	outOfService
	// unscheduledTerminating: terminating and never bound to a node.
	unscheduledTerminating
)

func (r reason) String() string {
	return [...]string{"terminated", "orphaned", "out-of-service", "unscheduled-terminating"}[r]
}

// Upstream's wording of the condition set on an orphaned pod.
const (
	conditionReason   = "DeletionByPodGC"
	orphanedMessage   = "PodGC: node no longer exists"
	outOfServiceTaint = v1.TaintNodeOutOfService
)

// victim is a pod to force-delete and why.
type victim struct {
	pod    *v1.Pod
	reason reason
}

// snapshot is what one pass decides on.
type snapshot struct {
	pods  []*v1.Pod
	nodes map[string]*v1.Node
	// missingSince is when each node some pod is bound to was first seen
	// missing from the cache; gone says which of those the API server
	// confirmed deleted after the quarantine.
	missingSince map[string]time.Time
	gone         map[string]bool
	threshold    int
	now          time.Time
}

// decision is one pass's outcome: the pods to delete, and the missing
// nodes whose quarantine is over and which must be re-checked through the
// API before their pods go.
type decision struct {
	victims []victim
	// missing is every bound-to node absent from the cache, with the time
	// it was first seen missing (carried over or now).
	missing map[string]time.Time
	recheck []string
}

// plan is one pass of Kubernetes' pod GC, computed without side effects:
// terminated pods beyond threshold (oldest first), pods bound to nodes that
// are gone, terminating pods on NotReady out-of-service nodes, and
// terminating pods that were never scheduled.
func plan(s snapshot, quarantine time.Duration) decision {
	d := decision{missing: map[string]time.Time{}}
	var done []*v1.Pod
	for _, pod := range s.pods {
		if isTerminated(pod) {
			done = append(done, pod)
		}
	}
	seen := map[*v1.Pod]bool{}
	add := func(pod *v1.Pod, r reason) {
		if !seen[pod] {
			seen[pod] = true
			d.victims = append(d.victims, victim{pod: pod, reason: r})
		}
	}
	if s.threshold > 0 && len(done) > s.threshold {
		slices.SortStableFunc(done, func(a, b *v1.Pod) int {
			return a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time)
		})
		for _, pod := range done[:len(done)-s.threshold] {
			add(pod, terminated)
		}
	}
	recheck := map[string]bool{}
	for _, pod := range s.pods {
		name := pod.Spec.NodeName
		if name == "" {
			if pod.DeletionTimestamp != nil {
				add(pod, unscheduledTerminating)
			}
			continue
		}
		node, ok := s.nodes[name]
		if !ok {
			since, known := s.missingSince[name]
			if !known {
				since = s.now
			}
			d.missing[name] = since
			switch {
			case s.gone[name]:
				add(pod, orphaned)
			case s.now.Sub(since) >= quarantine:
				recheck[name] = true
			}
			continue
		}
		if pod.DeletionTimestamp != nil && !isReady(node) && hasOutOfServiceTaint(node) {
			add(pod, outOfService)
		}
	}
	for name := range recheck {
		d.recheck = append(d.recheck, name)
	}
	slices.Sort(d.recheck)
	return d
}

func isTerminated(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

func isReady(node *v1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func hasOutOfServiceTaint(node *v1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == outOfServiceTaint {
			return true
		}
	}
	return false
}
