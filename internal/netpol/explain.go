package netpol

import (
	"errors"
	"net/netip"

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
}

// Decision is Explain's answer: the connection is allowed when both directions allow it.
type Decision struct {
	Allowed         bool
	Egress, Ingress Verdict
}

// Explain decides one connection from the same compiled model the kernel rules are
// rendered from.
func Explain(in ExplainInput) (Decision, error) {
	return Decision{}, errors.New("netpol: Explain is not implemented yet")
}
