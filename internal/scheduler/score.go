package scheduler

import (
	"maps"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxScore is the top of every score's range, as in Kubernetes.
const maxScore = 100

// zoneWeight is the share of the spreading score that comes from the zone
// rather than the node: losing a zone loses more than losing a node.
const zoneWeight = 2.0 / 3.0

// nodeScore ranks one feasible node; higher is better, compared spread
// first, then least requested, then node name.
type nodeScore struct {
	name   string
	spread int64
	least  int64
}

// better orders scores: the node the pod should go to comes first.
func (a nodeScore) better(b nodeScore) bool {
	if a.spread != b.spread {
		return a.spread > b.spread
	}
	if a.least != b.least {
		return a.least > b.least
	}
	return a.name < b.name
}

// scoreNodes scores the feasible nodes for pod; all is the whole snapshot,
// whose pods count toward their zone even on nodes that are not feasible.
func scoreNodes(pod *v1.Pod, feasible []*nodeInfo, all []*nodeInfo) []nodeScore {
	spread := spreadScores(pod, feasible, all)
	req := podRequests(pod, true)
	out := make([]nodeScore, len(feasible))
	for i, n := range feasible {
		out[i] = nodeScore{name: n.node.Name, spread: spread[i], least: leastRequested(req, n)}
	}
	return out
}

// spreadScores gives each feasible node a score that falls with the number
// of pods of the pod's workload on it and in its zone, in the manner of
// Kubernetes' SelectorSpread: the node count and the zone count are each
// scaled against the busiest feasible node and zone, the zone weighing two
// thirds; a node without a zone label is judged on its own count alone.
func spreadScores(pod *v1.Pod, feasible []*nodeInfo, all []*nodeInfo) []int64 {
	perNode := make([]int64, len(feasible))
	var maxNode int64
	for i, n := range feasible {
		perNode[i] = countWorkload(pod, n)
		maxNode = max(maxNode, perNode[i])
	}
	perZone := map[string]int64{}
	for _, n := range all {
		if z := n.node.Labels[zoneLabel]; z != "" {
			perZone[z] += countWorkload(pod, n)
		}
	}
	var maxZone int64
	haveZones := false
	for _, n := range feasible {
		if z := n.node.Labels[zoneLabel]; z != "" {
			haveZones = true
			maxZone = max(maxZone, perZone[z])
		}
	}
	scores := make([]int64, len(feasible))
	for i, n := range feasible {
		score := float64(maxScore)
		if maxNode > 0 {
			score = maxScore * float64(maxNode-perNode[i]) / float64(maxNode)
		}
		if z := n.node.Labels[zoneLabel]; haveZones && z != "" {
			zoneScore := float64(maxScore)
			if maxZone > 0 {
				zoneScore = maxScore * float64(maxZone-perZone[z]) / float64(maxZone)
			}
			score = score*(1-zoneWeight) + zoneScore*zoneWeight
		}
		scores[i] = int64(score)
	}
	return scores
}

// countWorkload counts the node's pods that belong to pod's workload.
func countWorkload(pod *v1.Pod, n *nodeInfo) int64 {
	var c int64
	for _, other := range n.pods {
		if sameWorkload(pod, other) {
			c++
		}
	}
	return c
}

// sameWorkload reports whether other is a sibling of pod: same namespace and
// the same controller, or, for pods without a controller, the same non-empty
// labels. Pods being deleted no longer count, their replacements will.
func sameWorkload(pod, other *v1.Pod) bool {
	if other.Namespace != pod.Namespace || other.DeletionTimestamp != nil {
		return false
	}
	ref, otherRef := metav1.GetControllerOfNoCopy(pod), metav1.GetControllerOfNoCopy(other)
	if ref != nil {
		return otherRef != nil && otherRef.UID == ref.UID && otherRef.Kind == ref.Kind && otherRef.Name == ref.Name
	}
	return otherRef == nil && len(pod.Labels) > 0 && maps.Equal(pod.Labels, other.Labels)
}

// leastRequested is Kubernetes' LeastAllocated score over cpu and memory:
// the average share of each that stays free once the pod is placed, with
// request-less containers counted at the default requests.
func leastRequested(req resources, n *nodeInfo) int64 {
	free := func(allocatable, used int64) int64 {
		if allocatable <= 0 || used > allocatable {
			return 0
		}
		return (allocatable - used) * maxScore / allocatable
	}
	cpu := free(n.allocatable.milliCPU, n.nonZero.milliCPU+req.milliCPU)
	mem := free(n.allocatable.memory, n.nonZero.memory+req.memory)
	return (cpu + mem) / 2
}
