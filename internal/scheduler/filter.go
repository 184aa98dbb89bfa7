package scheduler

import (
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	"github.com/tranche/tranche/internal/hostports"
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Failure reasons, worded as Kubernetes' filter plugins word them: they are
// counted per reason in FailedScheduling messages that users search for.
const (
	reasonUnschedulable = "node(s) were unschedulable"
	reasonNodeAffinity  = "node(s) didn't match Pod's node affinity/selector"
	reasonHostPorts     = "node(s) didn't have free ports for the requested pod ports"
	reasonTooManyPods   = "Too many pods"
)

// Taints that the node lifecycle controller puts on nodes whose Ready
// condition is False or Unknown; the scheduler behaves as if they were there
// even before the controller has caught up.
const (
	taintNotReady      = "node.kubernetes.io/not-ready"
	taintUnreachable   = "node.kubernetes.io/unreachable"
	taintUnschedulable = "node.kubernetes.io/unschedulable"
)

// filterPlugin is one yes/no test of a pod against a node.
type filterPlugin struct {
	// resolvable says whether evicting pods from the node could make it
	// pass (Kubernetes' Unschedulable, as opposed to
	// UnschedulableAndUnresolvable); it decides the preemption wording.
	resolvable bool
	// filter returns why the node cannot run the pod, nothing when it can.
	filter func(pod *v1.Pod, n *nodeInfo) []string
}

// filters run in Kubernetes' default plugin order; a node is rejected by the
// first filter that fails, so only that filter's reasons are reported.
// Kubernetes' plugin names are given beside each.
var filters = []filterPlugin{
	{filter: filterUnschedulable},               // NodeUnschedulable
	{filter: filterTaints},                      // TaintToleration
	{filter: filterNodeAffinity},                // NodeAffinity
	{resolvable: true, filter: filterHostPorts}, // NodePorts
	{resolvable: true, filter: filterResources}, // NodeResourcesFit
}

// filterUnschedulable rejects cordoned nodes unless the pod tolerates the
// unschedulable taint, as DaemonSet pods do.
func filterUnschedulable(pod *v1.Pod, n *nodeInfo) []string {
	if !n.node.Spec.Unschedulable {
		return nil
	}
	if tolerated(pod.Spec.Tolerations, &v1.Taint{Key: taintUnschedulable, Effect: v1.TaintEffectNoSchedule}) {
		return nil
	}
	return []string{reasonUnschedulable}
}

// filterTaints rejects a node with a NoSchedule or NoExecute taint the pod
// does not tolerate, naming the first such taint. A node that is not Ready
// counts as tainted not-ready (unreachable when its status is Unknown).
func filterTaints(pod *v1.Pod, n *nodeInfo) []string {
	taint, found := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), effectiveTaints(n.node), pod.Spec.Tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}, false)
	if found {
		return []string{fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value)}
	}
	return nil
}

// effectiveTaints is the node's taints plus the readiness taint its Ready
// condition implies, when the node does not carry that taint already.
func effectiveTaints(node *v1.Node) []v1.Taint {
	key := ""
	switch readyStatus(node) {
	case v1.ConditionTrue:
		return node.Spec.Taints
	case v1.ConditionUnknown:
		key = taintUnreachable
	default:
		key = taintNotReady
	}
	for _, t := range node.Spec.Taints {
		if t.Key == key && t.Effect == v1.TaintEffectNoSchedule {
			return node.Spec.Taints
		}
	}
	return append(slices.Clone(node.Spec.Taints), v1.Taint{Key: key, Effect: v1.TaintEffectNoSchedule})
}

// readyStatus is the status of the node's Ready condition, False when the
// node has not reported one yet.
func readyStatus(node *v1.Node) v1.ConditionStatus {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status
		}
	}
	return v1.ConditionFalse
}

func tolerated(tolerations []v1.Toleration, taint *v1.Taint) bool {
	return corev1helpers.TolerationsTolerateTaint(logr.Discard(), tolerations, taint, false)
}

// filterNodeAffinity rejects a node that misses a label of spec.nodeSelector
// or matches none of the required node affinity terms, as the NodeAffinity
// plugin decides; a term that does not parse matches no node.
func filterNodeAffinity(pod *v1.Pod, n *nodeInfo) []string {
	if fits, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(n.node); !fits {
		return []string{reasonNodeAffinity}
	}
	return nil
}

// filterHostPorts rejects a node where another pod holds a host port the pod
// wants on the same protocol and an overlapping address.
func filterHostPorts(pod *v1.Pod, n *nodeInfo) []string {
	if hostports.Conflict(hostports.Of(pod), n.usedPorts) {
		return []string{reasonHostPorts}
	}
	return nil
}

// filterResources rejects a node whose allocatable resources, minus what its
// pods request, cannot hold the pod's requests, and a node at its pod limit.
// Every short resource is reported, cpu, memory and ephemeral storage first
// and then extended resources by name.
func filterResources(pod *v1.Pod, n *nodeInfo) []string {
	var reasons []string
	if int64(len(n.pods))+1 > n.allowedPods {
		reasons = append(reasons, reasonTooManyPods)
	}
	req := podRequests(pod, false)
	short := func(want, allocatable, used int64) bool { return want > 0 && want > allocatable-used }
	if short(req.milliCPU, n.allocatable.milliCPU, n.requested.milliCPU) {
		reasons = append(reasons, "Insufficient cpu")
	}
	if short(req.memory, n.allocatable.memory, n.requested.memory) {
		reasons = append(reasons, "Insufficient memory")
	}
	if short(req.ephemeral, n.allocatable.ephemeral, n.requested.ephemeral) {
		reasons = append(reasons, "Insufficient ephemeral-storage")
	}
	names := make([]v1.ResourceName, 0, len(req.scalar))
	for name := range req.scalar {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if short(req.scalar[name], n.allocatable.scalar[name], n.requested.scalar[name]) {
			reasons = append(reasons, "Insufficient "+string(name))
		}
	}
	return reasons
}
