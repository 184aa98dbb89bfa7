package netpol

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func makePod(ns, name, node, ip string, lbls map[string]string, mut ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec:   v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: ip}}
	if a, ok := traceNodes[node]; ok {
		p.Status.HostIP = a.String()
	}
	for _, m := range mut {
		m(p)
	}
	return p
}

func makeNS(name string, lbls map[string]string) *v1.Namespace {
	l := map[string]string{"kubernetes.io/metadata.name": name}
	for k, v := range lbls {
		l[k] = v
	}
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

func makePolicy(ns, name string, mut func(*networkingv1.NetworkPolicy)) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if mut != nil {
		mut(np)
	}
	return np
}

func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func tcp(port intstr.IntOrString) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(v1.ProtocolTCP), Port: &port}
}

// cmpIP compares addresses and prefixes by value.
var cmpIP = cmp.Options{cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// world is x, y, z namespaces with pods a, b, c each (x/a on node-1, the rest spread).
func world() ([]*v1.Pod, []*v1.Namespace) {
	nss := []*v1.Namespace{makeNS("x", map[string]string{"ns": "x"}), makeNS("y", map[string]string{"ns": "y"}), makeNS("z", map[string]string{"ns": "z"})}
	var pods []*v1.Pod
	for i, ns := range []string{"x", "y", "z"} {
		for j, name := range []string{"a", "b", "c"} {
			node := "node-1"
			if j > 0 {
				node = "node-2"
			}
			ip := netip.AddrFrom4([4]byte{10, 244, byte(i + 1), byte(j + 2)}).String()
			pods = append(pods, makePod(ns, name, node, ip, map[string]string{"pod": name}, func(p *v1.Pod) {
				p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "serve-80", ContainerPort: 80}, {Name: "serve-81-udp", ContainerPort: 81, Protocol: v1.ProtocolUDP}}
			}))
		}
	}
	return pods, nss
}

func TestCompilePeers(t *testing.T) {
	pods, nss := world()
	cases := []struct {
		name string
		peer networkingv1.NetworkPolicyPeer
		want Rule
	}{
		{"podSelector in the policy's namespace", networkingv1.NetworkPolicyPeer{PodSelector: sel("pod", "b")},
			Rule{HasPodPeers: true, PeerPods: addrs("10.244.1.3")}},
		{"empty podSelector: the whole namespace", networkingv1.NetworkPolicyPeer{PodSelector: sel()},
			Rule{HasPodPeers: true, PeerPods: addrs("10.244.1.2", "10.244.1.3", "10.244.1.4")}},
		{"namespaceSelector: every pod of the namespaces", networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("ns", "y")},
			Rule{HasPodPeers: true, PeerPods: addrs("10.244.2.2", "10.244.2.3", "10.244.2.4")}},
		{"both: pods of those namespaces", networkingv1.NetworkPolicyPeer{NamespaceSelector: sel(), PodSelector: sel("pod", "c")},
			Rule{HasPodPeers: true, PeerPods: addrs("10.244.1.4", "10.244.2.4", "10.244.3.4")}},
		{"ipBlock minus except", networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.244.0.0/16", Except: []string{"10.244.2.0/24"}}},
			Rule{HasCIDRPeers: true, PeerCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/23"), netip.MustParsePrefix("10.244.3.0/24"), netip.MustParsePrefix("10.244.4.0/22"), netip.MustParsePrefix("10.244.8.0/21"), netip.MustParsePrefix("10.244.16.0/20"), netip.MustParsePrefix("10.244.32.0/19"), netip.MustParsePrefix("10.244.64.0/18"), netip.MustParsePrefix("10.244.128.0/17")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := makePolicy("x", "p", func(np *networkingv1.NetworkPolicy) {
				np.Spec.PodSelector = *sel("pod", "a")
				np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{tc.peer}}}
			})
			m := Compile(Snapshot{Policies: []*networkingv1.NetworkPolicy{np}, Pods: pods, Namespaces: nss, NodeName: "node-1"})
			tc.want.Path, tc.want.AllPorts = "spec.ingress[0]", true
			if diff := cmp.Diff([]Rule{tc.want}, m.Policies["x/p"].Ingress, cmpIP); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompilePorts(t *testing.T) {
	pods, nss := world()
	cases := []struct {
		name  string
		ports []networkingv1.NetworkPolicyPort
		dir   Direction
		want  Rule
	}{
		{"numeric", []networkingv1.NetworkPolicyPort{tcp(intstr.FromInt32(80))}, Ingress,
			Rule{Ports: []PortRange{{"TCP", 80, 80}}}},
		{"endPort range, UDP", []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(80)), EndPort: ptr.To(int32(90))}}, Ingress,
			Rule{Ports: []PortRange{{"UDP", 80, 90}}}},
		{"protocol only: every port", []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(v1.ProtocolSCTP)}}, Ingress,
			Rule{Ports: []PortRange{{"SCTP", 0, 65535}}}},
		{"named, ingress: resolved on the selected pod", []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("serve-80"))}, Ingress,
			Rule{HasNamed: true, Named: []NamedPort{{netip.MustParseAddr("10.244.1.2"), "TCP", 80}}}},
		{"named, wrong protocol: nothing", []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("serve-81-udp"))}, Ingress,
			Rule{HasNamed: true}},
		{"named nothing has: nothing", []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("nope"))}, Ingress,
			Rule{HasNamed: true}},
		{"named, egress: resolved on the destination pods", []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To(intstr.FromString("serve-81-udp"))}}, Egress,
			Rule{HasNamed: true, Named: []NamedPort{{netip.MustParseAddr("10.244.2.2"), "UDP", 81}, {netip.MustParseAddr("10.244.2.3"), "UDP", 81}, {netip.MustParseAddr("10.244.2.4"), "UDP", 81}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			peers := []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("ns", "y")}}
			np := makePolicy("x", "p", func(np *networkingv1.NetworkPolicy) {
				np.Spec.PodSelector = *sel("pod", "a")
				if tc.dir == Ingress {
					np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: peers, Ports: tc.ports}}
				} else {
					np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
					np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: peers, Ports: tc.ports}}
				}
			})
			m := Compile(Snapshot{Policies: []*networkingv1.NetworkPolicy{np}, Pods: pods, Namespaces: nss, NodeName: "node-1"})
			tc.want.Path = "spec." + string(tc.dir) + "[0]"
			tc.want.HasPodPeers, tc.want.PeerPods = true, addrs("10.244.2.2", "10.244.2.3", "10.244.2.4")
			if diff := cmp.Diff([]Rule{tc.want}, m.Policies["x/p"].Rules(tc.dir), cmpIP); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompileSelection(t *testing.T) {
	pods, nss := world()
	pods = append(pods,
		makePod("x", "host", "node-1", "10.240.0.11", map[string]string{"pod": "a"}, func(p *v1.Pod) { p.Spec.HostNetwork = true }),
		makePod("x", "done", "node-1", "10.244.1.9", map[string]string{"pod": "a"}, func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded }),
		makePod("x", "pending", "node-1", "", map[string]string{"pod": "a"}))
	pols := []*networkingv1.NetworkPolicy{
		makePolicy("x", "deny-all", nil), // ingress only (policyTypes default)
		makePolicy("x", "egress", func(np *networkingv1.NetworkPolicy) {
			np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
		}),
		makePolicy("x", "egress-only", func(np *networkingv1.NetworkPolicy) {
			np.Spec.PodSelector = *sel("pod", "b")
			np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		}),
	}
	m := Compile(Snapshot{Policies: pols, Pods: pods, Namespaces: nss, NodeName: "node-1"})
	want := map[string]*Pod{
		"x/a": {Namespace: "x", Name: "a", IP: netip.MustParseAddr("10.244.1.2"), Ingress: []string{"x/deny-all", "x/egress"}, Egress: []string{"x/egress"}},
	}
	if diff := cmp.Diff(want, m.Pods, cmpIP); diff != "" {
		t.Errorf("pods of node-1 (-want +got):\n%s", diff)
	}
	m = Compile(Snapshot{Policies: pols, Pods: pods, Namespaces: nss, NodeName: "node-2"})
	if got := m.Pods["x/b"]; got == nil || len(got.Egress) != 2 || len(got.Ingress) != 2 {
		t.Errorf("x/b on node-2: %+v, want isolated both ways by 2 policies", got)
	}
}

func TestExplain(t *testing.T) {
	pods, nss := world()
	pols := []*networkingv1.NetworkPolicy{
		makePolicy("x", "allow-y-80", func(np *networkingv1.NetworkPolicy) {
			np.Spec.PodSelector = *sel("pod", "a")
			np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "b")}}},
				{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("ns", "y")}}, Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("serve-80"))}},
			}
		}),
		makePolicy("y", "deny-egress", func(np *networkingv1.NetworkPolicy) {
			np.Spec.PodSelector = *sel("pod", "c")
			np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		}),
	}
	in := func(fromNS, from, toNS, to string, port int32) ExplainInput {
		return ExplainInput{Policies: pols, Pods: pods, Namespaces: nss, From: Peer{Namespace: fromNS, Pod: from}, To: Peer{Namespace: toNS, Pod: to}, Port: port, Protocol: v1.ProtocolTCP}
	}
	// ip is a connection from an address that is not a pod.
	ip := func(from, toNS, to string, port int32) ExplainInput {
		return ExplainInput{Policies: pols, Pods: pods, Namespaces: nss, From: Peer{IP: netip.MustParseAddr(from)}, To: Peer{Namespace: toNS, Pod: to}, Port: port, Protocol: v1.ProtocolTCP}
	}
	cases := []struct {
		name string
		in   ExplainInput
		want Decision
	}{
		{"not isolated", in("x", "a", "x", "b", 80), Decision{Allowed: true, Egress: Verdict{Allowed: true}, Ingress: Verdict{Allowed: true}}},
		{"allowed by the second rule", in("y", "a", "x", "a", 80), Decision{Allowed: true, Egress: Verdict{Allowed: true},
			Ingress: Verdict{Isolated: true, Allowed: true, Policy: "x/allow-y-80", Rule: "spec.ingress[1]", Selecting: []string{"x/allow-y-80"}}}},
		{"a pod cannot block access to itself", in("x", "a", "x", "a", 81), Decision{Allowed: true, Egress: Verdict{Allowed: true},
			Ingress: Verdict{Isolated: true, Allowed: true, Selecting: []string{"x/allow-y-80"}}}},
		{"wrong port", in("y", "a", "x", "a", 81), Decision{Egress: Verdict{Allowed: true},
			Ingress: Verdict{Isolated: true, Selecting: []string{"x/allow-y-80"}}}},
		{"egress denied", in("y", "c", "x", "a", 80), Decision{Egress: Verdict{Isolated: true, Selecting: []string{"y/deny-egress"}},
			Ingress: Verdict{Isolated: true, Allowed: true, Policy: "x/allow-y-80", Rule: "spec.ingress[1]", Selecting: []string{"x/allow-y-80"}}}},
		// Traffic between a pod and its own node is never filtered (the node's input and
		// output paths have no policy chain); another node's is.
		{"the pod's own node reaches it", ip("10.240.0.2", "x", "a", 81), Decision{Allowed: true, Egress: Verdict{Allowed: true},
			Ingress: Verdict{Isolated: true, Allowed: true, OwnNode: true, Selecting: []string{"x/allow-y-80"}}}},
		{"another node does not", ip("10.240.0.3", "x", "a", 81), Decision{Egress: Verdict{Allowed: true},
			Ingress: Verdict{Isolated: true, Selecting: []string{"x/allow-y-80"}}}},
		{"an egress-isolated pod reaches its own node", ExplainInput{Policies: pols, Pods: pods, Namespaces: nss,
			From: Peer{Namespace: "y", Pod: "c"}, To: Peer{IP: netip.MustParseAddr("10.240.0.3")}, Port: 10250, Protocol: v1.ProtocolTCP},
			Decision{Allowed: true, Egress: Verdict{Isolated: true, Allowed: true, OwnNode: true, Selecting: []string{"y/deny-egress"}}, Ingress: Verdict{Allowed: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Explain(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpIP); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := Explain(in("x", "nope", "x", "a", 80)); err == nil || err.Error() != `from: pods "nope" not found in namespace "x"` {
		t.Errorf("unknown pod: err = %v", err)
	}
}
