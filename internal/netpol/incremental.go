package netpol

import (
	"maps"
	"reflect"
	"slices"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Incremental keeps a node's Model up to date one object at a time, as kube-proxy
// keeps its per-Service state: a changed policy is compiled again alone; a pod or a
// namespace that changed is matched against each policy's selectors (its old and new
// labels), and only the policies whose selection it enters or leaves are compiled
// again. A Model it returns keeps the very Policy and Pod objects of the last one for
// what did not change, which is what lets the Syncer render and write only the rest.
// Its result equals Compile's of the same objects. Not safe for concurrent use.
type Incremental struct {
	node string
	c    *compiler
	// allStale is set when c.all must be rebuilt from pods before compiling.
	allStale bool
	pods     map[string]*v1.Pod // usable pods, by "ns/name"
	raw      map[string]*networkingv1.NetworkPolicy
	out      map[string]*compiled
	// selectedBy maps a pod of the node to the policies selecting it.
	selectedBy map[string]map[string]bool
	// dirty are the pods whose Pod must be built again.
	dirty map[string]bool
	model *Model
	// compiles counts the policies compiled (for tests).
	compiles int
}

// compiled is one policy's compilation and what it depends on.
type compiled struct {
	pol      *Policy // nil: selects no pod of the node
	selected []string
	problems []string
	deps     policyDeps
}

// policyDeps are the selectors of a policy, parsed: a pod or a namespace matters to
// the policy when one of them matches it.
type policyDeps struct {
	ns     string
	podSel labels.Selector // nil: the policy cannot select anything
	peers  []peerDeps
	// anyPod: egress named ports towards every peer or ipBlocks, resolved on every pod.
	anyPod bool
}

type peerDeps struct {
	podSel labels.Selector
	nsSel  labels.Selector // nil: the policy's namespace
}

// NewIncremental returns the Incremental of node ("": every pod) for a snapshot.
func NewIncremental(s Snapshot) *Incremental {
	in := &Incremental{node: s.NodeName, c: newCompiler(nil, s.Namespaces), pods: map[string]*v1.Pod{},
		raw: map[string]*networkingv1.NetworkPolicy{}, out: map[string]*compiled{}, selectedBy: map[string]map[string]bool{},
		dirty: map[string]bool{}, model: &Model{Pods: map[string]*Pod{}, Policies: map[string]*Policy{}}}
	for _, p := range s.Pods {
		in.setPodIndex(p.Namespace+"/"+p.Name, p)
	}
	for _, np := range s.Policies {
		in.SetPolicy(np.Namespace+"/"+np.Name, np)
	}
	return in
}

// SetPolicy records policy key ("ns/name") as np (nil: deleted) and compiles it.
func (in *Incremental) SetPolicy(key string, np *networkingv1.NetworkPolicy) {
	if np == nil {
		delete(in.raw, key)
	} else {
		in.raw[key] = np
	}
	in.recompile(key)
}

// SetPod records pod key ("ns/name") as p (nil: deleted) and compiles again the
// policies that select it, or have it as a peer, before or after.
func (in *Incremental) SetPod(key string, p *v1.Pod) {
	old := in.pods[key]
	in.setPodIndex(key, p)
	in.dirty[key] = true
	for _, k := range slices.Sorted(maps.Keys(in.out)) {
		d := &in.out[k].deps
		if d.matchesPod(old, in.c.nsLabels) || d.matchesPod(in.pods[key], in.c.nsLabels) {
			in.recompile(k)
		}
	}
}

// SetNamespace records namespace name as ns (nil: deleted) and compiles again the
// policies whose namespaceSelectors match it before or after.
func (in *Incremental) SetNamespace(name string, ns *v1.Namespace) {
	old, hadOld := in.c.nsLabels[name]
	if ns == nil {
		delete(in.c.nsLabels, name)
	} else {
		in.c.nsLabels[name] = labels.Set(ns.Labels)
	}
	cur, hasCur := in.c.nsLabels[name]
	for _, k := range slices.Sorted(maps.Keys(in.out)) {
		for _, p := range in.out[k].deps.peers {
			if p.nsSel != nil && ((hadOld && p.nsSel.Matches(old)) || (hasCur && p.nsSel.Matches(cur))) {
				in.recompile(k)
				break
			}
		}
	}
}

// Model returns the model of the objects recorded so far. Its Policies and Pods are
// shared with later models as long as they do not change: do not modify them.
func (in *Incremental) Model() *Model {
	for key := range in.dirty {
		in.buildPod(key)
	}
	clear(in.dirty)
	m := &Model{Pods: maps.Clone(in.model.Pods), Policies: maps.Clone(in.model.Policies)}
	for _, k := range slices.Sorted(maps.Keys(in.out)) {
		m.Problems = append(m.Problems, in.out[k].problems...)
	}
	return m
}

// setPodIndex puts p (when usable) in the compiler's index in place of key's pod.
func (in *Incremental) setPodIndex(key string, p *v1.Pod) {
	if old := in.pods[key]; old != nil {
		in.c.byNS[old.Namespace] = slices.DeleteFunc(in.c.byNS[old.Namespace], func(pi podInfo) bool { return pi.pod == old })
		delete(in.pods, key)
	}
	if p == nil {
		in.allStale = true
		return
	}
	if ip, ok := usablePod(p); ok {
		in.pods[key] = p
		in.c.byNS[p.Namespace] = append(in.c.byNS[p.Namespace], podInfo{pod: p, ip: ip})
	}
	in.allStale = true
}

// recompile compiles policy key again and marks the pods it selected or selects.
func (in *Incremental) recompile(key string) {
	if in.allStale {
		in.c.all = in.c.all[:0]
		for _, pis := range in.c.byNS {
			in.c.all = append(in.c.all, pis...)
		}
		in.allStale = false
	}
	in.compiles++
	old := in.out[key]
	np := in.raw[key]
	var cur *compiled
	if np != nil {
		in.c.problems = nil
		pol, selected := in.c.policy(np, in.node)
		cur = &compiled{pol: pol, problems: in.c.problems, deps: depsOf(np)}
		for _, pi := range selected {
			cur.selected = append(cur.selected, pi.pod.Namespace+"/"+pi.pod.Name)
		}
		slices.Sort(cur.selected)
		in.c.problems = nil
		in.out[key] = cur
	} else {
		delete(in.out, key)
	}
	var before, after []string
	if old != nil && old.pol != nil {
		before = old.selected
	}
	if cur != nil && cur.pol != nil {
		in.model.Policies[key] = cur.pol
		after = cur.selected
	} else {
		delete(in.model.Policies, key)
	}
	if old != nil && cur != nil && old.pol != nil && cur.pol != nil {
		if reflect.DeepEqual(old.pol, cur.pol) {
			// The same outcome: the same object, nothing to render again.
			cur.pol = old.pol
			in.model.Policies[key] = cur.pol
		}
		if old.pol.HasIngress == cur.pol.HasIngress && old.pol.HasEgress == cur.pol.HasEgress {
			// The same directions: only the pods it selects no more, or newly, change.
			before, after = without(before, after), without(after, before)
		}
	}
	for _, pk := range before {
		delete(in.selectedBy[pk], key)
		in.dirty[pk] = true
	}
	for _, pk := range after {
		if in.selectedBy[pk] == nil {
			in.selectedBy[pk] = map[string]bool{}
		}
		in.selectedBy[pk][key] = true
		in.dirty[pk] = true
	}
}

// without returns the keys of a (sorted) not in b (sorted).
func without(a, b []string) []string {
	var out []string
	for _, k := range a {
		if _, found := slices.BinarySearch(b, k); !found {
			out = append(out, k)
		}
	}
	return out
}

// buildPod builds the Pod of key again from the policies selecting it.
func (in *Incremental) buildPod(key string) {
	p := in.pods[key]
	by := in.selectedBy[key]
	if p == nil || len(by) == 0 {
		delete(in.model.Pods, key)
		if len(by) == 0 {
			delete(in.selectedBy, key)
		}
		return
	}
	ip, _ := usablePod(p)
	pod := &Pod{Namespace: p.Namespace, Name: p.Name, IP: ip}
	for _, k := range slices.Sorted(maps.Keys(by)) {
		pol := in.out[k].pol
		if pol.HasIngress {
			pod.Ingress = append(pod.Ingress, k)
		}
		if pol.HasEgress {
			pod.Egress = append(pod.Egress, k)
		}
	}
	in.model.Pods[key] = pod
}

// depsOf parses np's selectors; one that does not parse selects nothing (Compile
// reports it).
func depsOf(np *networkingv1.NetworkPolicy) policyDeps {
	d := policyDeps{ns: np.Namespace}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		return d
	}
	d.podSel = sel
	add := func(peers []networkingv1.NetworkPolicyPeer) {
		for _, peer := range peers {
			if peer.IPBlock != nil || (peer.PodSelector == nil && peer.NamespaceSelector == nil) {
				continue
			}
			pd := peerDeps{podSel: labels.Everything()}
			var err error
			if peer.PodSelector != nil {
				if pd.podSel, err = metav1.LabelSelectorAsSelector(peer.PodSelector); err != nil {
					continue
				}
			}
			if peer.NamespaceSelector != nil {
				if pd.nsSel, err = metav1.LabelSelectorAsSelector(peer.NamespaceSelector); err != nil {
					continue
				}
			}
			d.peers = append(d.peers, pd)
		}
	}
	for _, r := range np.Spec.Ingress {
		add(r.From)
	}
	for _, r := range np.Spec.Egress {
		add(r.To)
		named := false
		for _, p := range r.Ports {
			named = named || (p.Port != nil && p.Port.Type == 1) // intstr.String
		}
		hasBlock := len(r.To) == 0
		for _, peer := range r.To {
			hasBlock = hasBlock || peer.IPBlock != nil
		}
		d.anyPod = d.anyPod || (named && hasBlock)
	}
	return d
}

// matchesPod reports whether pod p (nil: none) can take part in the policy: selected
// by it, or a peer, or a target of its named ports.
func (d *policyDeps) matchesPod(p *v1.Pod, nsLabels map[string]labels.Set) bool {
	if p == nil || d.podSel == nil {
		return false
	}
	if d.anyPod {
		return true
	}
	l := labels.Set(p.Labels)
	if p.Namespace == d.ns && d.podSel.Matches(l) {
		return true
	}
	for _, peer := range d.peers {
		if !peer.podSel.Matches(l) {
			continue
		}
		if peer.nsSel == nil {
			if p.Namespace == d.ns {
				return true
			}
			continue
		}
		if nsl, ok := nsLabels[p.Namespace]; ok && peer.nsSel.Matches(nsl) {
			return true
		}
	}
	return false
}
