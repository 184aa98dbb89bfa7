package scheduler

import (
	"fmt"
	"math"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Preemption messages, worded as kube-scheduler's DefaultPreemption plugin
// words them.
const (
	msgPreemptNever      = "preemption: not eligible due to preemptionPolicy=Never."
	msgTerminatingVictim = "preemption: not eligible due to a terminating pod on the nominated node."
	reasonNoVictims      = "No preemption victims found for incoming pod"
	reasonNotHelpful     = "Preemption is not helpful for scheduling"
)

// preemption is what kube-scheduler's DefaultPreemption decides for a pod no
// node can run: evict lower-priority victims from one node so that the pod
// fits there, or nothing.
type preemption struct {
	// message is the "preemption: ..." part of the FailedScheduling text.
	message string
	// node is where the pod fits once victims are gone; empty when
	// preemption cannot help.
	node string
	// victims are the pods to evict from node, most important first.
	victims []*v1.Pod
	// keepNomination is set when the pod was not eligible to preempt: its
	// status.nominatedNodeName stays as it is. Otherwise it becomes node
	// (cleared when node is empty).
	keepNomination bool
}

// preempt runs DefaultPreemption's dry run for pod over s, given why each
// node rejected it. A pod may not preempt when its preemptionPolicy is Never,
// or while a victim of its own earlier preemption is still terminating on its
// nominated node. Otherwise every node whose rejection eviction could resolve
// is tried (selectVictims) and the best one picked (pickCandidate). It
// neither changes s nor does I/O.
func preempt(pod *v1.Pod, s *snapshot, statuses map[string]nodeStatus) *preemption {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		return &preemption{message: msgPreemptNever, keepNomination: true}
	}
	if nnn := pod.Status.NominatedNodeName; nnn != "" {
		st, rejected := statuses[nnn]
		if n := s.byName[nnn]; n != nil && !(rejected && !st.resolvable) {
			for _, p := range n.pods {
				if priority(p) < priority(pod) && terminatingByPreemption(p) {
					return &preemption{message: msgTerminatingVictim, keepNomination: true}
				}
			}
		}
	}
	counts := map[string]int{}
	var candidates []*candidate
	for _, n := range s.nodes {
		if st, ok := statuses[n.node.Name]; !ok || !st.resolvable {
			counts[reasonNotHelpful]++
			continue
		}
		c, reasons := selectVictims(pod, s, n)
		if c == nil {
			for _, r := range reasons {
				counts[r]++
			}
			continue
		}
		candidates = append(candidates, c)
	}
	if len(candidates) == 0 {
		return &preemption{message: "preemption: " + availability(len(s.nodes), counts, "")}
	}
	best := pickCandidate(candidates, s.now)
	return &preemption{
		message: fmt.Sprintf("preemption: found a potential placement for pod on node %v, preempting %d victims", best.node, len(best.victims)),
		node:    best.node,
		victims: best.victims,
	}
}

// candidate is a node where pod fits once victims are evicted.
type candidate struct {
	node    string
	victims []*v1.Pod
	// pdbViolations counts the victims whose eviction a
	// PodDisruptionBudget does not allow.
	pdbViolations int
}

// selectVictims finds the fewest, least important pods to evict from n so
// that pod fits, as DefaultPreemption's SelectVictimsOnNode does: remove every
// pod of lower priority; if pod then fits, give back the most important ones
// first (those a PodDisruptionBudget protects before the others) as long as
// pod still fits. It returns the candidate, or why there is none.
func selectVictims(pod *v1.Pod, s *snapshot, n *nodeInfo) (*candidate, []string) {
	ni := s.withNominated(pod, n).clone()
	var potential []*v1.Pod
	for _, p := range ni.pods {
		if priority(p) < priority(pod) {
			potential = append(potential, p)
		}
	}
	if len(potential) == 0 {
		return nil, []string{reasonNoVictims}
	}
	for _, p := range potential {
		ni.removePod(p)
	}
	if plugin, reasons := runFilters(pod, ni); plugin != nil {
		return nil, reasons
	}
	sort.SliceStable(potential, func(i, j int) bool { return moreImportant(potential[i], potential[j], s.now) })
	violating, nonViolating := splitByPDB(potential, s.pdbs)
	c := &candidate{node: n.node.Name}
	reprieve := func(p *v1.Pod) bool {
		ni.addPod(p)
		if plugin, _ := runFilters(pod, ni); plugin != nil {
			ni.removePod(p)
			c.victims = append(c.victims, p)
			return false
		}
		return true
	}
	for _, p := range violating {
		if !reprieve(p) {
			c.pdbViolations++
		}
	}
	for _, p := range nonViolating {
		reprieve(p)
	}
	if len(violating) > 0 && len(nonViolating) > 0 {
		sort.SliceStable(c.victims, func(i, j int) bool { return moreImportant(c.victims[i], c.victims[j], s.now) })
	}
	return c, nil
}

// pickCandidate chooses among candidates (in node name order) as
// DefaultPreemption does, each rule deciding only among those the previous
// ones left tied: fewest PodDisruptionBudget violations, lowest highest
// victim priority, lowest sum of victim priorities, fewest victims, latest
// start of the highest-priority victims, then the first.
func pickCandidate(candidates []*candidate, now time.Time) *candidate {
	scores := []func(c *candidate) int64{
		func(c *candidate) int64 { return -int64(c.pdbViolations) },
		func(c *candidate) int64 { return -int64(priority(c.victims[0])) },
		func(c *candidate) int64 {
			var sum int64
			for _, p := range c.victims {
				// Shifted to be positive, so that fewer negative priorities do
				// not count as more.
				sum += int64(priority(p)) + int64(math.MaxInt32) + 1
			}
			return -sum
		},
		func(c *candidate) int64 { return -int64(len(c.victims)) },
		func(c *candidate) int64 { return earliestStart(c.victims, now).UnixNano() },
	}
	left := candidates
	for _, score := range scores {
		var best []*candidate
		top := int64(math.MinInt64)
		for _, c := range left {
			switch v := score(c); {
			case v > top:
				top, best = v, []*candidate{c}
			case v == top:
				best = append(best, c)
			}
		}
		if len(best) == 1 {
			return best[0]
		}
		left = best
	}
	return left[0]
}

// earliestStart is the earliest start time among the victims of the highest
// priority.
func earliestStart(victims []*v1.Pod, now time.Time) time.Time {
	top := priority(victims[0])
	earliest := startTime(victims[0], now)
	for _, p := range victims[1:] {
		switch pr := priority(p); {
		case pr == top && startTime(p, now).Before(earliest):
			earliest = startTime(p, now)
		case pr > top:
			top, earliest = pr, startTime(p, now)
		}
	}
	return earliest
}

// moreImportant orders victims: higher priority first, then the one running
// longer.
func moreImportant(a, b *v1.Pod, now time.Time) bool {
	if pa, pb := priority(a), priority(b); pa != pb {
		return pa > pb
	}
	return startTime(a, now).Before(startTime(b, now))
}

// startTime is when the pod started, now for one that has not.
func startTime(p *v1.Pod, now time.Time) time.Time {
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time
	}
	return now
}

// splitByPDB separates the pods whose eviction some PodDisruptionBudget does
// not allow, counting the budgets down in the given order as
// DefaultPreemption does; pods a budget already lists as disrupted do not
// spend it.
func splitByPDB(pods []*v1.Pod, pdbs []*policyv1.PodDisruptionBudget) (violating, nonViolating []*v1.Pod) {
	allowed := make([]int32, len(pdbs))
	selectors := make([]labels.Selector, len(pdbs))
	for i, pdb := range pdbs {
		allowed[i] = pdb.Status.DisruptionsAllowed
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil {
			selectors[i] = sel
		}
	}
	for _, p := range pods {
		violates := false
		for i, pdb := range pdbs {
			if len(p.Labels) == 0 || pdb.Namespace != p.Namespace || selectors[i] == nil ||
				selectors[i].Empty() || !selectors[i].Matches(labels.Set(p.Labels)) {
				continue
			}
			if _, done := pdb.Status.DisruptedPods[p.Name]; done {
				continue
			}
			allowed[i]--
			if allowed[i] < 0 {
				violates = true
				break
			}
		}
		if violates {
			violating = append(violating, p)
		} else {
			nonViolating = append(nonViolating, p)
		}
	}
	return violating, nonViolating
}

// terminatingByPreemption reports whether p is being deleted because the
// scheduler preempted it.
func terminatingByPreemption(p *v1.Pod) bool {
	if p.DeletionTimestamp == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			return c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonPreemptionByScheduler
		}
	}
	return false
}
