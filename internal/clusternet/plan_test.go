package clusternet

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// makeTopology returns the default topology of nodes a, b (prefix "x-"), changed by mutate.
func makeTopology(t *testing.T, mutate func(*Topology)) Topology {
	t.Helper()
	topo, err := NewTopology("x-", "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(&topo)
	}
	return topo
}

func render(steps []Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.String()
	}
	return out
}

func TestNewTopology(t *testing.T) {
	topo := makeTopology(t, nil)
	want := []Node{
		{Name: "a", Underlay: netip.MustParseAddr("10.240.0.10"), PodCIDR: netip.MustParsePrefix("10.244.0.0/24")},
		{Name: "b", Underlay: netip.MustParseAddr("10.240.0.11"), PodCIDR: netip.MustParsePrefix("10.244.1.0/24")},
	}
	if diff := cmp.Diff(want, topo.Nodes, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if g := topo.Nodes[1].Gateway(); g != netip.MustParseAddr("10.244.1.1") {
		t.Errorf("gateway of b = %s", g)
	}
	if _, err := topo.NodeUnderlay(245); err == nil {
		t.Errorf("NodeUnderlay(245) gave an address beyond .254")
	}
	if p, err := topo.NodePodCIDR(255); err != nil || p != netip.MustParsePrefix("10.244.255.0/24") {
		t.Errorf("NodePodCIDR(255) = %s, %v", p, err)
	}
	if _, err := topo.NodePodCIDR(256); err == nil {
		t.Errorf("NodePodCIDR(256) gave a subnet outside 10.244.0.0/16")
	}

	// After removing a, its addresses are the first free ones again.
	topo.Nodes = topo.Nodes[1:]
	n, err := topo.NextNode("c")
	if err != nil || n.Underlay != netip.MustParseAddr("10.240.0.10") || n.PodCIDR != netip.MustParsePrefix("10.244.0.0/24") {
		t.Errorf("NextNode = %+v, %v", n, err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Topology)
		want   string // substring of the error; "" means valid
	}{
		{name: "default"},
		{name: "empty prefix", mutate: func(t *Topology) { t.Prefix = "" }, want: "prefix"},
		{name: "bad node name", mutate: func(t *Topology) { t.Nodes[0].Name = "A_1" }, want: `node 0 name "A_1"`},
		{name: "reserved name", mutate: func(t *Topology) { t.Nodes[0].Name = "net" }, want: "reserved"},
		{name: "duplicate name", mutate: func(t *Topology) { t.Nodes[1].Name = "a" }, want: "appears twice"},
		{name: "duplicate underlay", mutate: func(t *Topology) { t.Nodes[1].Underlay = t.Nodes[0].Underlay }, want: "is already"},
		{name: "underlay is API address", mutate: func(t *Topology) { t.Nodes[0].Underlay = t.APIAddress }, want: "the API address"},
		{name: "underlay outside", mutate: func(t *Topology) { t.Nodes[0].Underlay = netip.MustParseAddr("10.241.0.5") }, want: "host address of 10.240.0.0/24"},
		{name: "underlay broadcast", mutate: func(t *Topology) { t.Nodes[0].Underlay = netip.MustParseAddr("10.240.0.255") }, want: "host address"},
		{name: "API address outside", mutate: func(t *Topology) { t.APIAddress = netip.MustParseAddr("10.9.9.9") }, want: "API address"},
		{name: "pod CIDR outside", mutate: func(t *Topology) { t.Nodes[0].PodCIDR = netip.MustParsePrefix("10.245.0.0/24") }, want: "cluster CIDR"},
		{name: "pod CIDR unmasked", mutate: func(t *Topology) { t.Nodes[0].PodCIDR = netip.MustParsePrefix("10.244.0.1/24") }, want: "must be a subnet"},
		{name: "pod CIDRs overlap", mutate: func(t *Topology) { t.Nodes[1].PodCIDR = netip.MustParsePrefix("10.244.0.0/23") }, want: "overlaps"},
		{name: "IPv6 underlay", mutate: func(t *Topology) { t.UnderlayCIDR = netip.MustParsePrefix("fd00::/64") }, want: "IPv4"},
		{name: "long names hash apart", mutate: func(t *Topology) {
			t.Nodes[0].Name = "a-very-long-node-name-1"
			t.Nodes[1].Name = "a-very-long-node-name-2"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := makeTopology(t, tc.mutate).Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestPlanUp(t *testing.T) {
	steps, err := PlanUp(makeTopology(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ip netns add x-net",
		"x-net: sysctl -w -e net.bridge.bridge-nf-call-iptables=0",
		"x-net: sysctl -w -e net.bridge.bridge-nf-call-ip6tables=0",
		"x-net: sysctl -w -e net.bridge.bridge-nf-call-arptables=0",
		"x-net: ip link set lo up",
		"x-net: ip link add br_underlay address 0a:58:0a:f0:00:01 type bridge; ip addr add 10.240.0.1/24 dev br_underlay; ip link set br_underlay up",

		"ip netns add x-a",
		"x-a: sysctl -w net.ipv4.ip_forward=1",
		"x-a: sysctl -w net.ipv4.conf.all.rp_filter=0",
		"x-a: sysctl -w net.ipv4.conf.default.rp_filter=0",
		"x-a: sysctl -w net.ipv4.conf.all.send_redirects=0",
		"x-a: sysctl -w net.ipv4.conf.default.send_redirects=0",
		"x-a: sysctl -w -e net.bridge.bridge-nf-call-iptables=0",
		"x-a: sysctl -w -e net.bridge.bridge-nf-call-ip6tables=0",
		"x-a: sysctl -w -e net.bridge.bridge-nf-call-arptables=0",
		"x-a: ip link set lo up",
		"x-net: ip link add a type veth peer eth0 netns x-a",
		"x-net: ip link set a master br_underlay; bridge link set dev a hairpin on; ip link set a up",
		"x-a: ip addr add 10.240.0.10/24 dev eth0; ip link set eth0 up",
		"x-a: ip link add cbr0 address 0a:58:0a:f4:00:01 type bridge; ip addr add 10.244.0.1/24 dev cbr0; ip link set cbr0 up",
		"x-a: ip route replace 10.244.1.0/24 via 10.240.0.11 dev eth0",

		"ip netns add x-b",
		"x-b: sysctl -w net.ipv4.ip_forward=1",
		"x-b: sysctl -w net.ipv4.conf.all.rp_filter=0",
		"x-b: sysctl -w net.ipv4.conf.default.rp_filter=0",
		"x-b: sysctl -w net.ipv4.conf.all.send_redirects=0",
		"x-b: sysctl -w net.ipv4.conf.default.send_redirects=0",
		"x-b: sysctl -w -e net.bridge.bridge-nf-call-iptables=0",
		"x-b: sysctl -w -e net.bridge.bridge-nf-call-ip6tables=0",
		"x-b: sysctl -w -e net.bridge.bridge-nf-call-arptables=0",
		"x-b: ip link set lo up",
		"x-net: ip link add b type veth peer eth0 netns x-b",
		"x-net: ip link set b master br_underlay; bridge link set dev b hairpin on; ip link set b up",
		"x-b: ip addr add 10.240.0.11/24 dev eth0; ip link set eth0 up",
		"x-b: ip link add cbr0 address 0a:58:0a:f4:01:01 type bridge; ip addr add 10.244.1.1/24 dev cbr0; ip link set cbr0 up",
		"x-b: ip route replace 10.244.0.0/24 via 10.240.0.10 dev eth0",

		"x-net: ip route replace 10.244.0.0/24 via 10.240.0.10 dev br_underlay",
		"x-net: ip route replace 10.244.1.0/24 via 10.240.0.11 dev br_underlay",
	}
	if diff := cmp.Diff(want, render(steps)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}

	if _, err := PlanUp(makeTopology(t, func(t *Topology) { t.Prefix = "" })); err == nil {
		t.Errorf("PlanUp of an invalid topology succeeded")
	}
}

func TestPlanAddRemoveNode(t *testing.T) {
	topo := makeTopology(t, nil)
	c, err := topo.NextNode("c")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := PlanAddNode(topo, c)
	if err != nil {
		t.Fatal(err)
	}
	got := render(steps)
	wantTail := []string{
		"x-c: ip route replace 10.244.0.0/24 via 10.240.0.10 dev eth0",
		"x-c: ip route replace 10.244.1.0/24 via 10.240.0.11 dev eth0",
		"x-a: ip route replace 10.244.2.0/24 via 10.240.0.12 dev eth0",
		"x-b: ip route replace 10.244.2.0/24 via 10.240.0.12 dev eth0",
		"x-net: ip route replace 10.244.2.0/24 via 10.240.0.12 dev br_underlay",
	}
	if diff := cmp.Diff(wantTail, got[len(got)-len(wantTail):]); diff != "" {
		t.Errorf("add node plan ends (-want +got):\n%s", diff)
	}
	if got[0] != "ip netns add x-c" {
		t.Errorf("add node plan starts with %q", got[0])
	}
	if _, err := PlanAddNode(topo, topo.Nodes[0]); err == nil {
		t.Errorf("adding an existing node succeeded")
	}
	if _, err := PlanAddNode(topo, Node{Name: "d", Underlay: topo.Nodes[0].Underlay, PodCIDR: c.PodCIDR}); err == nil {
		t.Errorf("adding a node with a taken underlay address succeeded")
	}

	steps, err = PlanRemoveNode(topo, "a")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"x-b: ip route del 10.244.0.0/24",
		"x-net: ip route del 10.244.0.0/24",
		"x-net: ip link del a",
		"ip netns delete x-a",
	}
	if diff := cmp.Diff(want, render(steps)); diff != "" {
		t.Errorf("remove node plan (-want +got):\n%s", diff)
	}
	if _, err := PlanRemoveNode(topo, "zz"); err == nil {
		t.Errorf("removing an unknown node succeeded")
	}
}

func TestPlanAttachPod(t *testing.T) {
	topo := makeTopology(t, nil)
	steps, err := PlanAttachPod(topo, "b", "x-pod1", netip.MustParseAddr("10.244.1.7"))
	if err != nil {
		t.Fatal(err)
	}
	veth := PodVeth("x-pod1")
	want := []string{
		"x-pod1: ip link set lo up",
		"x-pod1: sysctl -w net.ipv4.conf.all.accept_redirects=0",
		"x-pod1: sysctl -w net.ipv4.conf.default.accept_redirects=0",
		"x-b: ip link add " + veth + " type veth peer eth0 netns x-pod1",
		"x-b: ip link set " + veth + " master cbr0; bridge link set dev " + veth + " hairpin on; ip link set " + veth + " up",
		"x-pod1: ip addr add 10.244.1.7/24 dev eth0 noprefixroute; ip link set eth0 up",
		"x-pod1: ip route replace 10.244.1.1 dev eth0 scope link",
		"x-pod1: ip route replace default via 10.244.1.1 dev eth0",
	}
	if diff := cmp.Diff(want, render(steps)); diff != "" {
		t.Errorf("attach plan (-want +got):\n%s", diff)
	}
	if len(veth) > 15 {
		t.Errorf("veth name %q is too long", veth)
	}

	for _, tc := range []struct {
		name, node, podNS, ip string
	}{
		{"unknown node", "zz", "x-pod1", "10.244.1.7"},
		{"gateway", "b", "x-pod1", "10.244.1.1"},
		{"network address", "b", "x-pod1", "10.244.1.0"},
		{"broadcast", "b", "x-pod1", "10.244.1.255"},
		{"other node's subnet", "b", "x-pod1", "10.244.0.7"},
		{"node namespace", "b", "x-a", "10.244.1.7"},
		{"underlay namespace", "b", "x-net", "10.244.1.7"},
		{"empty namespace", "b", "", "10.244.1.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := PlanAttachPod(topo, tc.node, tc.podNS, netip.MustParseAddr(tc.ip)); err == nil {
				t.Errorf("PlanAttachPod succeeded")
			}
		})
	}

	steps, err = PlanDetachPod(topo, "b", "x-pod1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"x-b: ip link del " + veth}, render(steps)); diff != "" {
		t.Errorf("detach plan (-want +got):\n%s", diff)
	}
}

func TestUnderlayLinkNames(t *testing.T) {
	for _, tc := range []struct{ node, want string }{
		{"a", "a"},
		{"worker-15-chars", "worker-15-chars"},
		{"lo", "n_" + hash8("lo")},
		{"worker-16-chars-", "n_" + hash8("worker-16-chars-")},
	} {
		if got := underlayLink(tc.node); got != tc.want || len(got) > 15 {
			t.Errorf("underlayLink(%q) = %q, want %q", tc.node, got, tc.want)
		}
	}
}

func TestTeardownRefusesEmptyPrefix(t *testing.T) {
	if err := Teardown(""); err == nil {
		t.Errorf("Teardown(\"\") succeeded")
	}
}

func TestPlanAttachPodWithMTU(t *testing.T) {
	topo := makeTopology(t, nil)
	topo.PodMTU = 1450
	steps, err := PlanAttachPod(topo, "b", "x-pod1", netip.MustParseAddr("10.244.1.7"))
	if err != nil {
		t.Fatal(err)
	}
	veth := PodVeth("x-pod1")
	got := render(steps)[3:6]
	want := []string{
		"x-b: ip link add " + veth + " type veth peer eth0 netns x-pod1",
		"x-b: ip link set " + veth + " mtu 1450",
		"x-pod1: ip link set eth0 mtu 1450",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attach plan with a pod MTU (-want +got):\n%s", diff)
	}
	topo.PodMTU = 100
	if err := topo.Validate(); err == nil || !strings.Contains(err.Error(), "pod MTU 100 must be 0 (the default) or from 576 to 65535") {
		t.Errorf("Validate with MTU 100: %v", err)
	}
}

func TestPlanPrepareNode(t *testing.T) {
	topo := makeTopology(t, nil)
	steps, err := PlanPrepareNode(topo, "b")
	if err != nil {
		t.Fatal(err)
	}
	got := render(steps)
	want := "x-b: ip link show cbr0 || { ip link add cbr0 address 0a:58:0a:f4:01:01 type bridge; ip addr add 10.244.1.1/24 dev cbr0; ip link set cbr0 up; }"
	if got[len(got)-1] != want || got[len(got)-2] != "x-b: ip link set lo up" || got[0] != "x-b: sysctl -w net.ipv4.ip_forward=1" {
		t.Errorf("prepare plan:\n%s", strings.Join(got, "\n"))
	}
	for _, s := range got {
		if strings.Contains(s, "route") || strings.Contains(s, "veth") || strings.Contains(s, "netns add") {
			t.Errorf("prepare plan touches more than the node's own namespace: %s", s)
		}
	}
	if _, err := PlanPrepareNode(topo, "zz"); err == nil {
		t.Error("PlanPrepareNode of an unknown node succeeded")
	}
}
