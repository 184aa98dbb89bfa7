package netpol

import (
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// Peer is one end of a connection Explain decides.
type Peer struct {
	// Namespace and Pod name a pod; Pod "" means the end is not a pod (IP only).
	Namespace, Pod string
	// IP is the end's address; for a pod, "" takes the pod's status.podIP.
	IP netip.Addr
}

// ExplainInput is the cluster state and the connection Explain decides.
type ExplainInput struct {
	Policies   []*networkingv1.NetworkPolicy
	Pods       []*v1.Pod
	Namespaces []*v1.Namespace
	From, To   Peer
	Port       int32
	// Protocol is TCP, UDP or SCTP ("" is TCP).
	Protocol v1.Protocol
}

// Verdict is one direction's decision (egress of From, ingress of To).
type Verdict struct {
	// Isolated is true when some policy of that direction selects the pod.
	Isolated bool
	Allowed  bool
	// Policy is "ns/name" of the first policy whose rule allowed the connection (""
	// when denied or not isolated), Rule the field path of that rule, e.g.
	// "spec.ingress[1]".
	Policy, Rule string
	// Selecting lists "ns/name" of every policy of that direction selecting the pod.
	Selecting []string
	// OwnNode is true when the peer is the pod's own node (its address is the pod's
	// status.hostIP: the node itself or a hostNetwork pod there). Such traffic takes the
	// node's output or input path, which no policy filters (Kubernetes documents that a
	// pod cannot block its node), so it is allowed whatever the policies.
	OwnNode bool
}

// Decision is Explain's answer: the connection is allowed when both directions allow it.
type Decision struct {
	Allowed         bool
	Egress, Ingress Verdict
}

// Explain decides one connection from the same compiled model the kernel rules are
// rendered from (Compile over every node). A pod peer must exist; its address is the
// pod's unless IP is set. The connection is allowed when the source's egress and the
// destination's ingress both allow it.
func Explain(in ExplainInput) (Decision, error) {
	from, err := resolvePeer(in.Pods, in.From, "from")
	if err != nil {
		return Decision{}, err
	}
	to, err := resolvePeer(in.Pods, in.To, "to")
	if err != nil {
		return Decision{}, err
	}
	proto := in.Protocol
	if proto == "" {
		proto = v1.ProtocolTCP
	}
	if proto != v1.ProtocolTCP && proto != v1.ProtocolUDP && proto != v1.ProtocolSCTP {
		return Decision{}, fmt.Errorf("protocol: Unsupported value: %q: supported values: \"SCTP\", \"TCP\", \"UDP\"", proto)
	}
	if in.Port < 1 || in.Port > 65535 {
		return Decision{}, fmt.Errorf("port: Invalid value: %d: must be between 1 and 65535, inclusive", in.Port)
	}
	m := Compile(Snapshot{Policies: in.Policies, Pods: in.Pods, Namespaces: in.Namespaces})
	d := Decision{
		Egress:  m.verdict(Egress, in.From, from.IP, to.IP, proto, in.Port),
		Ingress: m.verdict(Ingress, in.To, to.IP, from.IP, proto, in.Port),
	}
	if nodeOf(in.Pods, in.From) == to.IP {
		d.Egress.OwnNode, d.Egress.Allowed, d.Egress.Policy, d.Egress.Rule = true, true, "", ""
	}
	if nodeOf(in.Pods, in.To) == from.IP {
		d.Ingress.OwnNode, d.Ingress.Allowed, d.Ingress.Policy, d.Ingress.Rule = true, true, "", ""
	}
	d.Allowed = d.Egress.Allowed && d.Ingress.Allowed
	return d, nil
}

// nodeOf returns the address of the node a pod peer runs on (its status.hostIP), or the
// zero Addr.
func nodeOf(pods []*v1.Pod, p Peer) netip.Addr {
	if p.Pod == "" {
		return netip.Addr{}
	}
	for _, pod := range pods {
		if pod.Namespace == p.Namespace && pod.Name == p.Pod {
			ip, _ := netip.ParseAddr(pod.Status.HostIP)
			return ip
		}
	}
	return netip.Addr{}
}

// resolvePeer fills in a pod peer's address from its status.
func resolvePeer(pods []*v1.Pod, p Peer, what string) (Peer, error) {
	if p.Pod == "" {
		if !p.IP.IsValid() {
			return p, fmt.Errorf("%s: Required value: a pod or an IP address", what)
		}
		return p, nil
	}
	for _, pod := range pods {
		if pod.Namespace == p.Namespace && pod.Name == p.Pod {
			if p.IP.IsValid() {
				return p, nil
			}
			ip, err := netip.ParseAddr(pod.Status.PodIP)
			if err != nil {
				return p, fmt.Errorf("%s: pod %s/%s has no IP address yet", what, p.Namespace, p.Pod)
			}
			p.IP = ip
			return p, nil
		}
	}
	return p, fmt.Errorf("%s: pods %q not found in namespace %q", what, p.Pod, p.Namespace)
}

// verdict decides direction d for the pod self (address selfIP) talking to peer, with
// the same rules the kernel is given.
func (m *Model) verdict(d Direction, self Peer, selfIP, peer netip.Addr, proto v1.Protocol, port int32) Verdict {
	v := Verdict{Allowed: true}
	if self.Pod == "" {
		return v
	}
	p := m.Pods[self.Namespace+"/"+self.Pod]
	if p == nil {
		return v
	}
	keys := p.Ingress
	if d == Egress {
		keys = p.Egress
	}
	if len(keys) == 0 {
		return v
	}
	v.Isolated, v.Allowed, v.Selecting = true, false, slices.Clone(keys)
	if peer == selfIP { // a pod cannot block access to itself
		v.Allowed = true
		return v
	}
	// For ingress the selected pod is the destination whose named ports count; for
	// egress the destination is the peer.
	target := selfIP
	if d == Egress {
		target = peer
	}
	for _, k := range keys {
		pol := m.Policies[k]
		for i := range pol.Rules(d) {
			r := &pol.Rules(d)[i]
			if r.Matches(peer, target, proto, port) {
				v.Allowed, v.Policy, v.Rule = true, k, r.Path
				return v
			}
		}
	}
	return v
}
