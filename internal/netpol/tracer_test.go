package netpol

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/tranche/tranche/internal/proxy/tracer"
)

// traceNodes are the nodes of the traced cluster and their addresses.
var traceNodes = map[string]netip.Addr{
	"node-1": netip.MustParseAddr("10.240.0.2"),
	"node-2": netip.MustParseAddr("10.240.0.3"),
}

// traceWorld is world() plus x/d on node-1, whose port serve-80 is 8080 (a named port
// resolved per pod), and x/h, a hostNetwork pod on node-2 labelled like x/b.
func traceWorld() ([]*v1.Pod, []*v1.Namespace) {
	pods, nss := world()
	pods = append(pods,
		makePod("x", "d", "node-1", "10.244.1.5", map[string]string{"pod": "d"}, func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "serve-80", ContainerPort: 8080}}
		}),
		makePod("x", "h", "node-2", traceNodes["node-2"].String(), map[string]string{"pod": "b"}, func(p *v1.Pod) { p.Spec.HostNetwork = true }))
	return pods, nss
}

// cluster is every node's NetworkPolicy table, rendered by the Syncer from Compile.
type cluster struct {
	pods   []*v1.Pod
	nss    []*v1.Namespace
	pols   []*networkingv1.NetworkPolicy
	tables map[string]*knftables.Fake
}

func newCluster(t *testing.T, pols []*networkingv1.NetworkPolicy) *cluster {
	t.Helper()
	pods, nss := traceWorld()
	c := &cluster{pods: pods, nss: nss, pols: pols, tables: map[string]*knftables.Fake{}}
	for node := range traceNodes {
		m := Compile(Snapshot{Policies: pols, Pods: pods, Namespaces: nss, NodeName: node})
		if len(m.Problems) > 0 {
			t.Fatalf("compile for %s: %v", node, m.Problems)
		}
		fake := newFake()
		if err := NewSyncer(fake, nil, nil).Sync(context.Background(), m, true, nil); err != nil {
			t.Fatalf("sync %s: %v", node, err)
		}
		c.tables[node] = fake
	}
	return c
}

// end is one end of a connection: "ns/name" of a pod, or an address.
func (c *cluster) end(t *testing.T, s string) (Peer, *v1.Pod) {
	t.Helper()
	if ns, name, ok := strings.Cut(s, "/"); ok {
		for _, p := range c.pods {
			if p.Namespace == ns && p.Name == name {
				return Peer{Namespace: ns, Pod: name, IP: netip.MustParseAddr(p.Status.PodIP)}, p
			}
		}
		t.Fatalf("no pod %s", s)
	}
	return Peer{IP: netip.MustParseAddr(s)}, nil
}

// hop is one node a packet crosses; fromHost when the node itself sends it.
type hop struct {
	node     string
	fromHost bool
}

// trace follows the first packet of a connection through the NetworkPolicy tables of
// the nodes it crosses (the source pod's node, then the destination pod's) and returns
// its verdict followed by the named counters it passed, e.g. "drop deny-in-x.a".
func (c *cluster) trace(t *testing.T, from, to string, proto v1.Protocol, port int32) string {
	t.Helper()
	src, srcPod := c.end(t, from)
	dst, dstPod := c.end(t, to)
	var hops []hop
	if srcPod != nil {
		hops = append(hops, hop{srcPod.Spec.NodeName, srcPod.Spec.HostNetwork})
	}
	if dstPod != nil && (srcPod == nil || dstPod.Spec.NodeName != srcPod.Spec.NodeName) {
		hops = append(hops, hop{dstPod.Spec.NodeName, false})
	}
	res := []string{"accept"}
	for _, h := range hops {
		tr, err := tracer.NewMulti([]*knftables.Fake{c.tables[h.node]}, traceNodes[h.node])
		if err != nil {
			t.Fatal(err)
		}
		out, err := tr.Trace(tracer.Packet{Src: src.IP, Dst: dst.IP, Proto: strings.ToLower(string(proto)), DPort: uint16(port), FromHost: h.fromHost})
		if err != nil {
			t.Fatalf("%s: %v", h.node, err)
		}
		if len(out) != 1 {
			t.Fatalf("%s: %d outcomes %v, want one", h.node, len(out), out)
		}
		res = append(res, out[0].Counters...)
		if out[0].Verdict != "accept" {
			res[0] = out[0].Verdict
			break
		}
	}
	return strings.Join(res, " ")
}

// explained is what the kernel's counters should show for Explain's decision: the
// egress side first (its node's forward-egress chain runs first, and a drop ends the
// packet), then the ingress side.
func explained(t *testing.T, d Decision, from, to Peer) string {
	t.Helper()
	res := []string{"accept"}
	for _, side := range []struct {
		dir  Direction
		v    Verdict
		self Peer
	}{{Egress, d.Egress, from}, {Ingress, d.Ingress, to}} {
		switch {
		case !side.v.Isolated:
		case !side.v.Allowed:
			res[0] = "drop"
			return strings.Join(append(res, denyCounter(side.self.Namespace, side.self.Pod, side.dir)), " ")
		case side.v.Policy != "":
			ns, name, _ := strings.Cut(side.v.Policy, "/")
			var i int
			if _, err := fmt.Sscanf(side.v.Rule, "spec."+string(side.dir)+"[%d]", &i); err != nil {
				t.Fatalf("rule path %q: %v", side.v.Rule, err)
			}
			res = append(res, allowCounter(ns, name, side.dir, i))
		}
	}
	return strings.Join(res, " ")
}

// conn is one connection and the verdict expected from the kernel rules, with the
// counters it passes.
type conn struct {
	from, to string
	proto    v1.Protocol
	port     int32
	want     string
}

func tcpc(from, to string, port int32, want string) conn {
	return conn{from, to, v1.ProtocolTCP, port, want}
}

func ingressPolicy(ns, name string, podSel map[string]string, rules ...networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
	return makePolicy(ns, name, func(np *networkingv1.NetworkPolicy) {
		for k, v := range podSel {
			np.Spec.PodSelector = *sel(k, v)
		}
		np.Spec.Ingress = rules
	})
}

func egressPolicy(ns, name string, podSel map[string]string, rules ...networkingv1.NetworkPolicyEgressRule) *networkingv1.NetworkPolicy {
	return makePolicy(ns, name, func(np *networkingv1.NetworkPolicy) {
		for k, v := range podSel {
			np.Spec.PodSelector = *sel(k, v)
		}
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		np.Spec.Egress = rules
	})
}

func from(peers ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyPeer { return peers }

func portOf(proto v1.Protocol, port *intstr.IntOrString, end *int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(proto), Port: port, EndPort: end}
}

func num(p int32) *intstr.IntOrString { return ptr.To(intstr.FromInt32(p)) }

func named(s string) *intstr.IntOrString { return ptr.To(intstr.FromString(s)) }

var podA = map[string]string{"pod": "a"}

// TestTraceMatchesExplain renders policies into each node's table, traces connections
// through the kernel rules and checks the verdict and counters both against the
// expected ones and against Explain, which decides from the model: the kernel rules
// and the model must agree.
func TestTraceMatchesExplain(t *testing.T) {
	cases := []struct {
		name  string
		pols  []*networkingv1.NetworkPolicy
		conns []conn
	}{
		{"no policy: everything allowed", nil, []conn{
			tcpc("y/b", "x/a", 80, "accept"),
			{"x/a", "z/c", v1.ProtocolUDP, 53, "accept"},
		}},
		{"default deny ingress", []*networkingv1.NetworkPolicy{makePolicy("x", "deny", nil)}, []conn{
			tcpc("y/b", "x/a", 80, "drop deny-in-x.a"),
			tcpc("x/a", "x/b", 80, "drop deny-in-x.b"),
			tcpc("10.240.0.9", "x/a", 80, "drop deny-in-x.a"),
			// Egress is not isolated by an ingress-only policy.
			tcpc("x/a", "y/b", 80, "accept"),
		}},
		{"default deny egress", []*networkingv1.NetworkPolicy{egressPolicy("x", "deny", nil)}, []conn{
			tcpc("x/a", "y/b", 80, "drop deny-eg-x.a"),
			{"x/a", "10.240.0.9", v1.ProtocolUDP, 53, "drop deny-eg-x.a"},
			tcpc("y/b", "x/a", 80, "accept"),
		}},
		{"allow all ingress", []*networkingv1.NetworkPolicy{ingressPolicy("x", "all", podA, networkingv1.NetworkPolicyIngressRule{})}, []conn{
			tcpc("y/b", "x/a", 9999, "accept allow-in-x.all-0"),
			{"10.1.2.3", "x/a", v1.ProtocolSCTP, 1, "accept allow-in-x.all-0"},
		}},
		{"podSelector: the policy's namespace", []*networkingv1.NetworkPolicy{ingressPolicy("x", "p", podA,
			networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{PodSelector: sel("pod", "b")})})}, []conn{
			tcpc("x/b", "x/a", 80, "accept allow-in-x.p-0"),
			tcpc("y/b", "x/a", 80, "drop deny-in-x.a"),
		}},
		{"namespaceSelector", []*networkingv1.NetworkPolicy{ingressPolicy("x", "p", podA,
			networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("ns", "y")})})}, []conn{
			tcpc("y/c", "x/a", 80, "accept allow-in-x.p-0"),
			tcpc("z/c", "x/a", 80, "drop deny-in-x.a"),
			tcpc("x/b", "x/a", 80, "drop deny-in-x.a"),
		}},
		{"both selectors in one peer: and", []*networkingv1.NetworkPolicy{ingressPolicy("x", "p", podA,
			networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("ns", "y"), PodSelector: sel("pod", "c")})})}, []conn{
			tcpc("y/c", "x/a", 80, "accept allow-in-x.p-0"),
			tcpc("y/b", "x/a", 80, "drop deny-in-x.a"),
			tcpc("x/c", "x/a", 80, "drop deny-in-x.a"),
		}},
		{"two peers: or", []*networkingv1.NetworkPolicy{ingressPolicy("x", "p", podA,
			networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("ns", "y")}, networkingv1.NetworkPolicyPeer{PodSelector: sel("pod", "c")})})}, []conn{
			tcpc("y/b", "x/a", 80, "accept allow-in-x.p-0"),
			tcpc("x/c", "x/a", 80, "accept allow-in-x.p-0"),
			tcpc("z/c", "x/a", 80, "drop deny-in-x.a"),
		}},
		{"ipBlock with except", []*networkingv1.NetworkPolicy{ingressPolicy("x", "p", podA,
			networkingv1.NetworkPolicyIngressRule{From: from(
				networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.240.0.0/24", Except: []string{"10.240.0.12/32"}}},
				networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.244.2.0/24", Except: []string{"10.244.2.3/32"}}})})}, []conn{
			tcpc("10.240.0.9", "x/a", 80, "accept allow-in-x.p-0"),
			tcpc("10.240.0.12", "x/a", 80, "drop deny-in-x.a"),
			tcpc("10.240.1.1", "x/a", 80, "drop deny-in-x.a"),
			tcpc("y/c", "x/a", 80, "accept allow-in-x.p-0"),
			tcpc("y/b", "x/a", 80, "drop deny-in-x.a"),
		}},
		{"numeric port", []*networkingv1.NetworkPolicy{ingressPolicy("x", "p", podA,
			networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromInt32(80))}})}, []conn{
			tcpc("y/b", "x/a", 80, "accept allow-in-x.p-0"),
			tcpc("y/b", "x/a", 81, "drop deny-in-x.a"),
			{"y/b", "x/a", v1.ProtocolUDP, 80, "drop deny-in-x.a"},
		}},
		{"named port resolved per pod", []*networkingv1.NetworkPolicy{ingressPolicy("x", "p", nil,
			networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("ns", "y")}), Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("serve-80"))}})}, []conn{
			tcpc("y/b", "x/a", 80, "accept allow-in-x.p-0"),
			tcpc("y/b", "x/d", 8080, "accept allow-in-x.p-0"),
			tcpc("y/b", "x/d", 80, "drop deny-in-x.d"),
			tcpc("y/b", "x/a", 8080, "drop deny-in-x.a"),
		}},
		{"named port no pod has: matches nothing", []*networkingv1.NetworkPolicy{ingressPolicy("x", "p", podA,
			networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("nope"))}})}, []conn{
			tcpc("y/b", "x/a", 80, "drop deny-in-x.a"),
		}},
		{"endPort range", []*networkingv1.NetworkPolicy{ingressPolicy("x", "p", podA,
			networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{portOf(v1.ProtocolTCP, num(8000), ptr.To(int32(8100)))}})}, []conn{
			tcpc("y/b", "x/a", 8000, "accept allow-in-x.p-0"),
			tcpc("y/b", "x/a", 8050, "accept allow-in-x.p-0"),
			tcpc("y/b", "x/a", 8100, "accept allow-in-x.p-0"),
			tcpc("y/b", "x/a", 7999, "drop deny-in-x.a"),
			tcpc("y/b", "x/a", 8101, "drop deny-in-x.a"),
		}},
		{"protocol only: every port of it", []*networkingv1.NetworkPolicy{ingressPolicy("x", "p", podA,
			networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{portOf(v1.ProtocolUDP, nil, nil)}})}, []conn{
			{"y/b", "x/a", v1.ProtocolUDP, 1, "accept allow-in-x.p-0"},
			{"y/b", "x/a", v1.ProtocolUDP, 65535, "accept allow-in-x.p-0"},
			tcpc("y/b", "x/a", 53, "drop deny-in-x.a"),
		}},
		{"UDP and SCTP ports", []*networkingv1.NetworkPolicy{ingressPolicy("x", "p", podA,
			networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{portOf(v1.ProtocolUDP, num(53), nil), portOf(v1.ProtocolSCTP, num(9000), nil)}})}, []conn{
			{"y/b", "x/a", v1.ProtocolUDP, 53, "accept allow-in-x.p-0"},
			{"y/b", "x/a", v1.ProtocolSCTP, 9000, "accept allow-in-x.p-0"},
			tcpc("y/b", "x/a", 53, "drop deny-in-x.a"),
			tcpc("y/b", "x/a", 9000, "drop deny-in-x.a"),
			{"y/b", "x/a", v1.ProtocolSCTP, 53, "drop deny-in-x.a"},
		}},
		{"egress to pods and a named port on the destination", []*networkingv1.NetworkPolicy{egressPolicy("x", "e", podA,
			networkingv1.NetworkPolicyEgressRule{To: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("ns", "y"), PodSelector: sel("pod", "c")}),
				Ports: []networkingv1.NetworkPolicyPort{portOf(v1.ProtocolUDP, num(53), nil)}},
			networkingv1.NetworkPolicyEgressRule{To: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("ns", "z")}),
				Ports: []networkingv1.NetworkPolicyPort{portOf(v1.ProtocolUDP, named("serve-81-udp"), nil)}})}, []conn{
			{"x/a", "y/c", v1.ProtocolUDP, 53, "accept allow-eg-x.e-0"},
			{"x/a", "y/b", v1.ProtocolUDP, 53, "drop deny-eg-x.a"},
			tcpc("x/a", "y/c", 53, "drop deny-eg-x.a"),
			{"x/a", "z/b", v1.ProtocolUDP, 81, "accept allow-eg-x.e-1"},
			{"x/a", "z/b", v1.ProtocolUDP, 82, "drop deny-eg-x.a"},
		}},
		{"egress and ingress both judge", []*networkingv1.NetworkPolicy{
			egressPolicy("x", "e", podA, networkingv1.NetworkPolicyEgressRule{To: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("ns", "y")})}),
			ingressPolicy("y", "i", map[string]string{"pod": "b"}, networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("ns", "x"), PodSelector: sel("pod", "a")})}),
		}, []conn{
			tcpc("x/a", "y/b", 80, "accept allow-eg-x.e-0 allow-in-y.i-0"),
			tcpc("x/a", "y/c", 80, "accept allow-eg-x.e-0"),
			tcpc("x/a", "z/b", 80, "drop deny-eg-x.a"),
			tcpc("x/b", "y/b", 80, "drop deny-in-y.b"),
		}},
		{"several policies add up", []*networkingv1.NetworkPolicy{
			makePolicy("x", "deny", nil),
			ingressPolicy("x", "from-b", podA, networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{PodSelector: sel("pod", "b")})}),
			ingressPolicy("x", "from-y-80", podA, networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("ns", "y")}), Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromInt32(80))}}),
		}, []conn{
			tcpc("x/b", "x/a", 81, "accept allow-in-x.from-b-0"),
			tcpc("y/c", "x/a", 80, "accept allow-in-x.from-y-80-0"),
			tcpc("y/c", "x/a", 81, "drop deny-in-x.a"),
			tcpc("z/c", "x/a", 80, "drop deny-in-x.a"),
			tcpc("y/c", "x/d", 80, "drop deny-in-x.d"),
		}},
		{"hostNetwork pods are outside policies", []*networkingv1.NetworkPolicy{
			ingressPolicy("x", "from-b", podA, networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{PodSelector: sel("pod", "b")})}),
			ingressPolicy("x", "deny-b", map[string]string{"pod": "b"}),
		}, []conn{
			// x/h has x/b's label but is no peer: its address is its node's.
			tcpc("x/b", "x/a", 80, "accept allow-in-x.from-b-0"),
			tcpc("x/h", "x/a", 80, "drop deny-in-x.a"),
			// deny-b selects x/b but not x/h: x/h is reached through its node's
			// input hook, which no policy filters.
			tcpc("x/a", "x/b", 80, "drop deny-in-x.b"),
			tcpc("x/a", "x/h", 80, "accept"),
			// From x/h to x/b, both on node-2: the node's own traffic takes its output
			// path, which no policy filters (Explain: OwnNode), though deny-b isolates x/b.
			tcpc("x/h", "x/b", 80, "accept"),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, tc.pols)
			for _, cn := range tc.conns {
				what := fmt.Sprintf("%s → %s %s/%d", cn.from, cn.to, cn.proto, cn.port)
				got := c.trace(t, cn.from, cn.to, cn.proto, cn.port)
				if got != cn.want {
					t.Errorf("%s: traced %q, want %q", what, got, cn.want)
				}
				src, _ := c.end(t, cn.from)
				dst, _ := c.end(t, cn.to)
				d, err := Explain(ExplainInput{Policies: c.pols, Pods: c.pods, Namespaces: c.nss, From: src, To: dst, Port: cn.port, Protocol: cn.proto})
				if err != nil {
					t.Fatalf("%s: explain: %v", what, err)
				}
				if ex := explained(t, d, src, dst); ex != got {
					t.Errorf("%s: the kernel rules say %q, Explain says %q (%+v)", what, got, ex, d)
				}
			}
		})
	}
}
