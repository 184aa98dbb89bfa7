package netpol

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Direction is the direction of a policy rule: ingress of the selected pod or its egress.
type Direction string

// The two directions, as the metrics' direction label spells them.
const (
	Ingress Direction = "ingress"
	Egress  Direction = "egress"
)

// Snapshot is the cluster state the compiler reads.
type Snapshot struct {
	Policies   []*networkingv1.NetworkPolicy
	Pods       []*v1.Pod
	Namespaces []*v1.Namespace
	// NodeName picks the pods the model enforces for (those with spec.nodeName equal
	// to it); "" takes every pod (Explain's view of the whole cluster).
	NodeName string
}

// Model is what a node enforces: its pods that some policy isolates, and the
// compiled rules of every policy selecting one of them.
type Model struct {
	// Pods are the node's isolated pods, keyed "ns/name".
	Pods map[string]*Pod
	// Policies are the policies that select at least one of Pods, keyed "ns/name".
	Policies map[string]*Policy
	// Problems lists the parts of policies that cannot be programmed (left out: the
	// rule allows nothing, the pods stay isolated), one line each naming the field.
	Problems []string
}

// Pod is one isolated pod of the node.
type Pod struct {
	Namespace, Name string
	IP              netip.Addr
	// Ingress and Egress are the keys ("ns/name", sorted) of the policies of that
	// direction selecting the pod; empty when it is not isolated in that direction.
	Ingress, Egress []string
}

// Key is "ns/name".
func (p *Pod) Key() string { return p.Namespace + "/" + p.Name }

// Policy is one compiled NetworkPolicy.
type Policy struct {
	Namespace, Name string
	// Ingress and Egress are its rules of each direction, in spec order; a direction
	// the policy does not have (policyTypes) has none and selects nothing.
	Ingress, Egress []Rule
	// HasIngress and HasEgress are the effective policyTypes.
	HasIngress, HasEgress bool
}

// Key is "ns/name".
func (p *Policy) Key() string { return p.Namespace + "/" + p.Name }

// Rules returns the rules of direction d.
func (p *Policy) Rules(d Direction) []Rule {
	if d == Ingress {
		return p.Ingress
	}
	return p.Egress
}

// Rule is one compiled ingress or egress rule: a connection matches when its peer
// (source for ingress, destination for egress) and its port match.
type Rule struct {
	// Path is the rule's field path, e.g. "spec.ingress[1]".
	Path string
	// AllPeers is true when the rule has no from/to: every peer matches.
	AllPeers bool
	// HasPodPeers is true when some peer uses a pod or namespace selector; PeerPods are
	// the addresses of the pods they select (sorted, unique).
	HasPodPeers bool
	PeerPods    []netip.Addr
	// HasCIDRPeers is true when some peer is an ipBlock; PeerCIDRs are the blocks minus
	// their except lists, as sorted disjoint prefixes.
	HasCIDRPeers bool
	PeerCIDRs    []netip.Prefix
	// AllPorts is true when the rule has no ports: every port of every protocol.
	AllPorts bool
	// Ports are the numeric ports and ranges (a port alone is a range of one).
	Ports []PortRange
	// HasNamed is true when some port is named; Named are the (pod IP, protocol,
	// port) a name resolves to: for ingress on the selected pods of this model, for
	// egress on the destination pods the peers select. A name no pod has matches
	// nothing.
	HasNamed bool
	Named    []NamedPort
}

// PortRange is a protocol and an inclusive port range.
type PortRange struct {
	Protocol v1.Protocol
	From, To int32
}

// NamedPort is a named port resolved on one pod.
type NamedPort struct {
	IP       netip.Addr
	Protocol v1.Protocol
	Port     int32
}

// podInfo is a pod usable as a peer or a target.
type podInfo struct {
	pod *v1.Pod
	ip  netip.Addr
}

// usablePod returns the pod's address when the pod takes part in policies: it has an
// address, is not on the host network (its address is the node's) and has not
// terminated.
func usablePod(p *v1.Pod) (netip.Addr, bool) {
	if p.Spec.HostNetwork || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(p.Status.PodIP)
	if err != nil || !ip.Is4() {
		return netip.Addr{}, false
	}
	return ip, true
}

// policyTypes returns a policy's effective policyTypes, defaulted as upstream: Ingress
// always, Egress when it has egress rules.
func policyTypes(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(np.Spec.PolicyTypes) == 0 {
		return true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

// compiler holds the indexes of one Compile.
type compiler struct {
	byNS     map[string][]podInfo
	all      []podInfo
	nsLabels map[string]labels.Set
	problems []string
}

// Compile turns a snapshot into the model a node enforces. It does no I/O.
func Compile(s Snapshot) *Model {
	c := newCompiler(s.Pods, s.Namespaces)
	m := &Model{Pods: map[string]*Pod{}, Policies: map[string]*Policy{}}
	pols := slices.Clone(s.Policies)
	slices.SortFunc(pols, func(a, b *networkingv1.NetworkPolicy) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, np := range pols {
		pol, selected := c.policy(np, s.NodeName)
		if pol == nil {
			continue
		}
		key := pol.Key()
		for _, pi := range selected {
			k := pi.pod.Namespace + "/" + pi.pod.Name
			p := m.Pods[k]
			if p == nil {
				p = &Pod{Namespace: pi.pod.Namespace, Name: pi.pod.Name, IP: pi.ip}
				m.Pods[k] = p
			}
			if pol.HasIngress {
				p.Ingress = append(p.Ingress, key)
			}
			if pol.HasEgress {
				p.Egress = append(p.Egress, key)
			}
		}
		m.Policies[key] = pol
	}
	m.Problems = c.problems
	return m
}

// newCompiler indexes the usable pods and the namespaces' labels.
func newCompiler(pods []*v1.Pod, nss []*v1.Namespace) *compiler {
	c := &compiler{byNS: map[string][]podInfo{}, nsLabels: map[string]labels.Set{}}
	for _, ns := range nss {
		c.nsLabels[ns.Name] = labels.Set(ns.Labels)
	}
	for _, p := range pods {
		if ip, ok := usablePod(p); ok {
			pi := podInfo{pod: p, ip: ip}
			c.byNS[p.Namespace] = append(c.byNS[p.Namespace], pi)
			c.all = append(c.all, pi)
		}
	}
	return c
}

// policy compiles one policy for the pods of node ("": every pod) and returns it with
// the pods it selects, or nil when it selects none (or cannot be compiled).
func (c *compiler) policy(np *networkingv1.NetworkPolicy, node string) (*Policy, []podInfo) {
	key := np.Namespace + "/" + np.Name
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		c.problem("%s: spec.podSelector: %v", key, err)
		return nil, nil
	}
	hasIn, hasEg := policyTypes(np)
	var selected []podInfo
	for _, pi := range c.byNS[np.Namespace] {
		if (node == "" || pi.pod.Spec.NodeName == node) && sel.Matches(labels.Set(pi.pod.Labels)) {
			selected = append(selected, pi)
		}
	}
	if len(selected) == 0 || (!hasIn && !hasEg) {
		return nil, nil
	}
	pol := &Policy{Namespace: np.Namespace, Name: np.Name, HasIngress: hasIn, HasEgress: hasEg}
	if hasIn {
		for i, r := range np.Spec.Ingress {
			pol.Ingress = append(pol.Ingress, c.rule(key, np.Namespace, fmt.Sprintf("spec.ingress[%d]", i), "from", r.From, r.Ports, Ingress, selected))
		}
	}
	if hasEg {
		for i, r := range np.Spec.Egress {
			pol.Egress = append(pol.Egress, c.rule(key, np.Namespace, fmt.Sprintf("spec.egress[%d]", i), "to", r.To, r.Ports, Egress, selected))
		}
	}
	return pol, selected
}

func (c *compiler) problem(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// rule compiles one rule of policy key (namespace ns) at path; peersField is "from"
// or "to"; selected are the pods of this model the policy selects.
func (c *compiler) rule(key, ns, path, peersField string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, d Direction, selected []podInfo) Rule {
	r := Rule{Path: path, AllPeers: len(peers) == 0, AllPorts: len(ports) == 0}
	var peerPods []podInfo
	var blocks []netip.Prefix
	for i, peer := range peers {
		pp := fmt.Sprintf("%s.%s[%d]", path, peersField, i)
		if peer.IPBlock != nil {
			r.HasCIDRPeers = true
			set, err := ipBlockPrefixes(peer.IPBlock)
			if err != nil {
				c.problem("%s: %s.ipBlock: %v", key, pp, err)
				continue
			}
			blocks = append(blocks, set...)
			continue
		}
		if peer.PodSelector == nil && peer.NamespaceSelector == nil {
			c.problem("%s: %s: a peer needs podSelector, namespaceSelector or ipBlock", key, pp)
			continue
		}
		r.HasPodPeers = true
		podSel, nsSel := labels.Everything(), labels.Selector(nil)
		var err error
		if peer.PodSelector != nil {
			if podSel, err = metav1.LabelSelectorAsSelector(peer.PodSelector); err != nil {
				c.problem("%s: %s.podSelector: %v", key, pp, err)
				continue
			}
		}
		if peer.NamespaceSelector != nil {
			if nsSel, err = metav1.LabelSelectorAsSelector(peer.NamespaceSelector); err != nil {
				c.problem("%s: %s.namespaceSelector: %v", key, pp, err)
				continue
			}
		}
		if nsSel == nil {
			for _, pi := range c.byNS[ns] {
				if podSel.Matches(labels.Set(pi.pod.Labels)) {
					peerPods = append(peerPods, pi)
				}
			}
			continue
		}
		for _, pi := range c.all {
			nsl, ok := c.nsLabels[pi.pod.Namespace]
			if ok && nsSel.Matches(nsl) && podSel.Matches(labels.Set(pi.pod.Labels)) {
				peerPods = append(peerPods, pi)
			}
		}
	}
	for _, pi := range peerPods {
		r.PeerPods = append(r.PeerPods, pi.ip)
	}
	slices.SortFunc(r.PeerPods, netip.Addr.Compare)
	r.PeerPods = slices.Compact(r.PeerPods)
	r.PeerCIDRs = normalize(blocks)

	var named []networkingv1.NetworkPolicyPort
	for i, p := range ports {
		proto := v1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		pp := fmt.Sprintf("%s.ports[%d]", path, i)
		if proto != v1.ProtocolTCP && proto != v1.ProtocolUDP && proto != v1.ProtocolSCTP {
			c.problem("%s: %s.protocol: Unsupported value: %q: supported values: \"SCTP\", \"TCP\", \"UDP\"", key, pp, proto)
			continue
		}
		switch {
		case p.Port == nil:
			r.Ports = append(r.Ports, PortRange{Protocol: proto, From: 0, To: 65535})
		case p.Port.Type == 1: // intstr.String
			r.HasNamed = true
			named = append(named, networkingv1.NetworkPolicyPort{Protocol: &proto, Port: p.Port})
		default:
			from, to := p.Port.IntVal, p.Port.IntVal
			if p.EndPort != nil {
				to = *p.EndPort
			}
			if from < 1 || from > 65535 || to < from || to > 65535 {
				c.problem("%s: %s: invalid port range %d-%d", key, pp, from, to)
				continue
			}
			r.Ports = append(r.Ports, PortRange{Protocol: proto, From: from, To: to})
		}
	}
	if len(named) > 0 {
		// Ingress: the selected pod is the destination; egress: the peer is.
		targets := selected
		if d == Egress {
			targets = nil
			for _, pi := range c.all {
				if r.AllPeers || slices.Contains(r.PeerPods, pi.ip) || inPrefixes(r.PeerCIDRs, pi.ip) {
					targets = append(targets, pi)
				}
			}
		}
		for _, pi := range targets {
			for _, np := range named {
				for _, ctr := range pi.pod.Spec.Containers {
					for _, cp := range ctr.Ports {
						cpProto := cp.Protocol
						if cpProto == "" {
							cpProto = v1.ProtocolTCP
						}
						if cp.Name == np.Port.StrVal && cpProto == *np.Protocol {
							r.Named = append(r.Named, NamedPort{IP: pi.ip, Protocol: cpProto, Port: cp.ContainerPort})
						}
					}
				}
			}
		}
		slices.SortFunc(r.Named, func(a, b NamedPort) int {
			return cmp.Or(a.IP.Compare(b.IP), cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
		})
		r.Named = slices.Compact(r.Named)
	}
	return r
}

// Matches reports whether a connection to or from peer (its other end being target,
// the pod whose named ports count for ingress) matches the rule.
func (r *Rule) Matches(peer, target netip.Addr, proto v1.Protocol, port int32) bool {
	peerOK := r.AllPeers || slices.Contains(r.PeerPods, peer) || inPrefixes(r.PeerCIDRs, peer)
	if !peerOK {
		return false
	}
	if r.AllPorts {
		return true
	}
	for _, pr := range r.Ports {
		if pr.Protocol == proto && port >= pr.From && port <= pr.To {
			return true
		}
	}
	return slices.Contains(r.Named, NamedPort{IP: target, Protocol: proto, Port: port})
}
