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

// fitError explains why no node can run a pod. Its message is Kubernetes'
// FailedScheduling text: a histogram of filter reasons, then what preemption
// concluded.
type fitError struct {
	numNodes int
	// reasons counts, per reason, the nodes that reported it.
	reasons map[string]int
	// resolvable counts nodes rejected only by filters that evicting pods
	// could satisfy; the rest could not be helped by preemption.
	resolvable int
	// preemptNever is set when the pod may not preempt by its policy.
	preemptNever bool
}

// Error renders, e.g. "0/3 nodes are available: 1 node(s) had untolerated
// taint {node.kubernetes.io/not-ready: }, 2 Insufficient cpu. preemption:
// 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No
// preemption victims found for incoming pod." Entries are "<count> <reason>"
// sorted as strings, as Kubernetes sorts them. tranche does not preempt, so
// nodes that preemption might help are reported as offering no victims.
func (e *fitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "0/%d nodes are available:", e.numNodes)
	if hist := histogram(e.reasons); len(hist) > 0 {
		fmt.Fprintf(&b, " %s.", strings.Join(hist, ", "))
	}
	if e.preemptNever {
		b.WriteString(" preemption: not eligible due to preemptionPolicy=Never.")
		return b.String()
	}
	fmt.Fprintf(&b, " preemption: 0/%d nodes are available:", e.numNodes)
	preempt := map[string]int{}
	if e.resolvable > 0 {
		preempt["No preemption victims found for incoming pod"] = e.resolvable
	}
	if rest := e.numNodes - e.resolvable; rest > 0 {
		preempt["Preemption is not helpful for scheduling"] = rest
	}
	fmt.Fprintf(&b, " %s.", strings.Join(histogram(preempt), ", "))
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
// every filter. It returns errNoNodes or a *fitError when there is none. It
// neither changes s nor does I/O.
func schedule(pod *v1.Pod, s *snapshot) (string, error) {
	if len(s.nodes) == 0 {
		return "", errNoNodes
	}
	fe := &fitError{numNodes: len(s.nodes), reasons: map[string]int{}}
	var feasible []*nodeInfo
	for _, n := range s.nodes {
		plugin, reasons := runFilters(pod, n)
		if plugin == nil {
			feasible = append(feasible, n)
			continue
		}
		for _, r := range reasons {
			fe.reasons[r]++
		}
		if plugin.resolvable {
			fe.resolvable++
		}
	}
	if len(feasible) == 0 {
		fe.preemptNever = pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever
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
