package scheduler

import (
	"sort"
	"time"

	"github.com/tranche/tranche/internal/hostports"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// zoneLabel is the well-known label naming a node's failure zone; spreading
// treats nodes that share it as one failure domain.
const zoneLabel = "topology.kubernetes.io/zone"

// hostPort is one host port a container claims on its node. An empty or
// 0.0.0.0 address claims the port on every address.
// nodeInfo is one node as the filters and scores see it: the node, the pods
// bound to it that still hold resources, and the sums derived from them.
type nodeInfo struct {
	node        *v1.Node
	pods        []*v1.Pod
	allocatable resources
	allowedPods int64
	requested   resources // exact requests of pods, for fit
	nonZero     resources // requests with defaults, for ranking
	usedPorts   []hostports.Port
}

func newNodeInfo(node *v1.Node) *nodeInfo {
	n := &nodeInfo{node: node}
	n.allocatable.add(node.Status.Allocatable)
	if q, ok := node.Status.Allocatable[v1.ResourcePods]; ok {
		n.allowedPods = q.Value()
	}
	return n
}

// addPod accounts for a pod bound to (or assumed on) the node.
func (n *nodeInfo) addPod(pod *v1.Pod) {
	n.pods = append(n.pods, pod)
	n.requested = n.requested.plus(podRequests(pod, false))
	n.nonZero = n.nonZero.plus(podRequests(pod, true))
	n.usedPorts = append(n.usedPorts, hostports.Of(pod)...)
}

// clone returns a copy of n that pods can be added to and removed from
// without changing n.
func (n *nodeInfo) clone() *nodeInfo {
	out := newNodeInfo(n.node)
	for _, p := range n.pods {
		out.addPod(p)
	}
	return out
}

// removePod takes the pod with pod's UID off the node, as if it were gone.
func (n *nodeInfo) removePod(pod *v1.Pod) {
	rest := newNodeInfo(n.node)
	for _, p := range n.pods {
		if p.UID != pod.UID {
			rest.addPod(p)
		}
	}
	*n = *rest
}

// snapshot is the cluster as one scheduling decision sees it, nodes sorted by
// name so that every decision is reproducible from the same inputs.
type snapshot struct {
	nodes  []*nodeInfo
	byName map[string]*nodeInfo
	// nominated holds, per node name, the pending pods that preemption made
	// room for there (status.nominatedNodeName): a pod of lower or equal
	// priority must leave them that room.
	nominated map[string][]*v1.Pod
	// pdbs are the cluster's PodDisruptionBudgets, which preemption avoids
	// violating.
	pdbs []*policyv1.PodDisruptionBudget
	// now stands for the start time of pods that have not started yet, which
	// preemption ranks as the youngest.
	now time.Time
}

// newSnapshot builds a snapshot from nodes and the pods bound to them. Pods
// that are terminal or bound to unknown nodes are left out: they hold nothing.
func newSnapshot(nodes []*v1.Node, pods []*v1.Pod) *snapshot {
	s := &snapshot{byName: make(map[string]*nodeInfo, len(nodes)), nominated: map[string][]*v1.Pod{}}
	for _, node := range nodes {
		if node == nil {
			continue
		}
		n := newNodeInfo(node)
		s.nodes = append(s.nodes, n)
		s.byName[node.Name] = n
	}
	sort.Slice(s.nodes, func(i, j int) bool { return s.nodes[i].node.Name < s.nodes[j].node.Name })
	for _, pod := range pods {
		s.assume(pod, pod.Spec.NodeName)
	}
	return s
}

// assume records pod as running on the named node, so later decisions in the
// same snapshot see its resources, ports and spreading weight.
func (s *snapshot) assume(pod *v1.Pod, nodeName string) {
	if pod == nil || isTerminal(pod) {
		return
	}
	if n, ok := s.byName[nodeName]; ok {
		n.addPod(pod)
	}
}

// isTerminal reports whether a pod has finished for good and frees its node.
func isTerminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// nominate records pod as waiting for the room preemption made on nodeName.
func (s *snapshot) nominate(pod *v1.Pod, nodeName string) {
	if pod != nil && nodeName != "" {
		s.nominated[nodeName] = append(s.nominated[nodeName], pod)
	}
}

// withNominated returns n as pod must see it: with the pods nominated to n
// whose priority is at least pod's (pod itself excepted) counted as if they
// ran there, as kube-scheduler's RunFilterPluginsWithNominatedPods does. It
// returns n itself when there are none.
func (s *snapshot) withNominated(pod *v1.Pod, n *nodeInfo) *nodeInfo {
	var out *nodeInfo
	for _, p := range s.nominated[n.node.Name] {
		if p.UID == pod.UID || priority(p) < priority(pod) {
			continue
		}
		if out == nil {
			out = n.clone()
		}
		out.addPod(p)
	}
	if out == nil {
		return n
	}
	return out
}
