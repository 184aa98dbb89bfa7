package scheduler

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// errNoNodes is Kubernetes' error, word for word, when the cluster has no
// node at all.
var errNoNodes = errors.New("no nodes available to schedule pods")

// nodeStatus is why one node cannot run a pod.
type nodeStatus struct {
	// reasons are the rejecting filter's reasons, as Kubernetes words them.
	reasons []string
	// resolvable is set when evicting pods from the node could make it pass
	// (Kubernetes' Unschedulable, as opposed to UnschedulableAndUnresolvable).
	resolvable bool
}

// fitError explains why no node can run a pod. Its message is Kubernetes'
// FailedScheduling text: a histogram of filter reasons, then what preemption
// concluded.
type fitError struct {
	numNodes int
	// statuses has every node's verdict, by node name.
	statuses map[string]nodeStatus
	// postFilter is the preemption step's message ("preemption: ..."), empty
	// until it ran.
	postFilter string
	// preemption is what the preemption step decided; nil until it ran.
	preemption *preemption
}

// Error renders, e.g. "0/3 nodes are available: 1 node(s) had untolerated
// taint {node.kubernetes.io/not-ready: }, 2 Insufficient cpu. preemption:
// 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No
// preemption victims found for incoming pod." Entries are "<count> <reason>"
// sorted as strings, as Kubernetes sorts them.
func (e *fitError) Error() string {
	counts := map[string]int{}
	for _, st := range e.statuses {
		for _, r := range st.reasons {
			counts[r]++
		}
	}
	return availability(e.numNodes, counts, e.postFilter)
}

// availability renders "0/<numNodes> nodes are available: <histogram>." and
// then post, if any.
func availability(numNodes int, counts map[string]int, post string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "0/%d nodes are available:", numNodes)
	if hist := histogram(counts); len(hist) > 0 {
		fmt.Fprintf(&b, " %s.", strings.Join(hist, ", "))
	}
	if post != "" {
		b.WriteString(" " + post)
	}
	return b.String()
}

func histogram(counts map[string]int) []string {
	out := make([]string, 0, len(counts))
	for reason, n := range counts {
		out = append(out, fmt.Sprintf("%d %s", n, reason))
	}
	sort.Strings(out)
	return out
}

// schedule picks the node for pod in s: the best-ranked node that passes
// every filter, counting the room preemption keeps for nominated pods of
// higher or equal priority. When there is none it returns errNoNodes or a
// *fitError carrying the preemption decision (see preempt). It neither
// changes s nor does I/O.
func schedule(pod *v1.Pod, s *snapshot) (string, error) {
	if len(s.nodes) == 0 {
		return "", errNoNodes
	}
	fe := &fitError{numNodes: len(s.nodes), statuses: map[string]nodeStatus{}}
	var feasible []*nodeInfo
	for _, n := range s.nodes {
		plugin, reasons := runFilters(pod, s.withNominated(pod, n))
		if plugin == nil {
			feasible = append(feasible, n)
			continue
		}
		fe.statuses[n.node.Name] = nodeStatus{reasons: reasons, resolvable: plugin.resolvable}
	}
	if len(feasible) == 0 {
		fe.preemption = preempt(pod, s, fe.statuses)
		fe.postFilter = fe.preemption.message
		return "", fe
	}
	scores := scoreNodes(pod, feasible, s.nodes)
	best := scores[0]
	for _, sc := range scores[1:] {
		if sc.better(best) {
			best = sc
		}
	}
	return best.name, nil
}

// runFilters returns the first filter that rejects n for pod, with its
// reasons, or nil when n can run the pod.
func runFilters(pod *v1.Pod, n *nodeInfo) (*filterPlugin, []string) {
	for i := range filters {
		if reasons := filters[i].filter(pod, n); len(reasons) > 0 {
			return &filters[i], reasons
		}
	}
	return nil, nil
}
