package clusternet

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/tranche/tranche/internal/netns"
)

// Apply performs steps in order and stops at the first failure, returning it wrapped with
// the failing step. What was done before stays done: after a failed Up, Teardown the
// prefix; the other plans can be applied again because their steps replace or ignore
// what already exists (except creating a namespace or link that exists).
func Apply(steps []Step) error {
	a := applier{handles: map[string]*netns.Links{}}
	defer a.close()
	for _, s := range steps {
		if err := a.apply(s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// applier keeps one netlink handle per namespace for the length of a plan.
type applier struct {
	handles map[string]*netns.Links
}

func (a applier) links(ns string) (*netns.Links, error) {
	if h, ok := a.handles[ns]; ok {
		return h, nil
	}
	h, err := netns.OpenLinks(ns)
	if err != nil {
		return nil, err
	}
	a.handles[ns] = h
	return h, nil
}

func (a applier) close() {
	for ns, h := range a.handles {
		h.Close()
		delete(a.handles, ns)
	}
}

func (a applier) apply(s Step) error {
	switch s.Op {
	case OpCreateNamespace:
		return netns.Create(s.Namespace)
	case OpDeleteNamespace:
		// An open handle would keep the namespace alive after its name is gone.
		if h, ok := a.handles[s.Namespace]; ok {
			h.Close()
			delete(a.handles, s.Namespace)
		}
		return netns.Delete(s.Namespace)
	case OpSysctl:
		if s.IfExists {
			return netns.SetSysctlIfExists(s.Namespace, s.Key, s.Value)
		}
		return netns.SetSysctl(s.Namespace, s.Key, s.Value)
	}
	l, err := a.links(s.Namespace)
	if err != nil {
		return err
	}
	switch s.Op {
	case OpLoUp:
		return l.LoUp()
	case OpBridge:
		return l.AddBridge(s.Link, s.Addr, s.MAC)
	case OpVeth:
		return l.AddVeth(s.Link, s.Peer, s.PeerNamespace)
	case OpAttach:
		return l.AttachToBridge(s.Link, s.Bridge)
	case OpAddr:
		add := l.AddAddr
		if s.NoPrefixRoute {
			add = l.AddAddrNoPrefixRoute
		}
		if err := add(s.Link, s.Addr); err != nil {
			return err
		}
		return l.SetUp(s.Link)
	case OpRoute:
		return l.AddRoute(s.Dst, s.Via, s.Link)
	case OpDelRoute:
		return l.DelRoute(s.Dst)
	case OpDelLink:
		return l.DelLink(s.Link)
	case OpMTU:
		return l.SetMTU(s.Link, s.MTU)
	case OpBridgeIfMissing:
		if ok, err := l.LinkExists(s.Link); err != nil || ok {
			return err
		}
		return l.AddBridge(s.Link, s.Addr, s.MAC)
	}
	return fmt.Errorf("unknown op %d", int(s.Op))
}

// Up builds the cluster network of t from nothing. It fails if any of its namespaces
// exists; call Teardown(t.Prefix) first to clear a crashed cluster's leftovers, and after
// a failure.
func Up(t Topology) error {
	steps, err := PlanUp(t)
	if err != nil {
		return err
	}
	if err := Apply(steps); err != nil {
		return fmt.Errorf("building cluster network %q: %w", t.Prefix, err)
	}
	return nil
}

// AddNode adds node n to the running cluster t and returns the new topology.
func AddNode(t Topology, n Node) (Topology, error) {
	steps, err := PlanAddNode(t, n)
	if err != nil {
		return t, err
	}
	if err := Apply(steps); err != nil {
		return t, fmt.Errorf("adding node %q: %w", n.Name, err)
	}
	t.Nodes = append(append([]Node(nil), t.Nodes...), n)
	return t, nil
}

// RemoveNode removes node name from the running cluster t and returns the new topology.
// Processes still running in the node's namespace (its agent) keep the namespace, and
// with it its pod veths, alive until they exit; pods' namespaces are their owner's.
func RemoveNode(t Topology, name string) (Topology, error) {
	steps, err := PlanRemoveNode(t, name)
	if err != nil {
		return t, err
	}
	if err := Apply(steps); err != nil {
		return t, fmt.Errorf("removing node %q: %w", name, err)
	}
	var rest []Node
	for _, n := range t.Nodes {
		if n.Name != name {
			rest = append(rest, n)
		}
	}
	t.Nodes = rest
	return t, nil
}

// AttachPod connects the existing namespace podNS to node's pod bridge with address ip
// (see PlanAttachPod) and returns the name of the veth's end in the node namespace.
func AttachPod(t Topology, node, podNS string, ip netip.Addr) (hostVeth string, err error) {
	steps, err := PlanAttachPod(t, node, podNS, ip)
	if err != nil {
		return "", err
	}
	if err := Apply(steps); err != nil {
		return "", fmt.Errorf("attaching pod namespace %q to node %q: %w", podNS, node, err)
	}
	return PodVeth(podNS), nil
}

// DetachPod removes podNS's veth from node; it is not an error if there is none.
func DetachPod(t Topology, node, podNS string) error {
	steps, err := PlanDetachPod(t, node, podNS)
	if err != nil {
		return err
	}
	if err := Apply(steps); err != nil {
		return fmt.Errorf("detaching pod namespace %q from node %q: %w", podNS, node, err)
	}
	return nil
}

// PrepareNode makes the existing namespace of node name a node (see PlanPrepareNode).
func PrepareNode(t Topology, name string) error {
	steps, err := PlanPrepareNode(t, name)
	if err != nil {
		return err
	}
	if err := Apply(steps); err != nil {
		return fmt.Errorf("preparing node %q: %w", name, err)
	}
	return nil
}

// Teardown deletes every network namespace whose name starts with prefix (the underlay,
// the nodes and the pods); their veths go with them. It is idempotent and continues past
// failures, returning all of them. The empty prefix is refused: it would mean every
// namespace on the machine.
func Teardown(prefix string) error {
	if prefix == "" {
		return errors.New("teardown: the prefix must not be empty")
	}
	names, err := netns.List(prefix)
	if err != nil {
		return fmt.Errorf("teardown %q: %w", prefix, err)
	}
	var errs []error
	for _, n := range names {
		errs = append(errs, netns.Delete(n))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("teardown %q: %w", prefix, err)
	}
	return nil
}
