package overlay

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/knftables"
)

func makeNode(name, podCIDR, ip string, mut func(*v1.Node)) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{PodCIDR: podCIDR},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}}}
	if mut != nil {
		mut(n)
	}
	return n
}

func mac(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// vxlanNode is a node that published vxlan annotations with VTEP MAC m.
func vxlanNode(name, podCIDR, ip, m string) *v1.Node {
	return makeNode(name, podCIDR, ip, func(n *v1.Node) {
		n.Annotations = Annotations(BackendVXLAN, netip.MustParseAddr(ip), mac(m))
	})
}

func hostGWNode(name, podCIDR, ip string) *v1.Node {
	return makeNode(name, podCIDR, ip, func(n *v1.Node) {
		n.Annotations = Annotations(BackendHostGW, netip.MustParseAddr(ip), nil)
	})
}

func TestPeerFromNode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		node    *v1.Node
		want    Peer
		wantErr string
	}{
		{name: "vxlan", node: vxlanNode("b", "10.244.1.0/24", "192.168.50.11", "0a:00:00:00:00:0b"),
			want: Peer{Name: "b", Backend: BackendVXLAN, PodCIDR: netip.MustParsePrefix("10.244.1.0/24"), PublicIP: netip.MustParseAddr("192.168.50.11"), VtepMAC: mac("0a:00:00:00:00:0b")}},
		{name: "no annotations: InternalIP, no backend", node: makeNode("c", "10.244.2.0/24", "192.168.50.12", nil),
			want: Peer{Name: "c", PodCIDR: netip.MustParsePrefix("10.244.2.0/24"), PublicIP: netip.MustParseAddr("192.168.50.12")}},
		{name: "no pod CIDR", node: makeNode("d", "", "192.168.50.13", nil), wantErr: `node "d": spec.podCIDR "" is not an IPv4 CIDR`},
		{name: "bad backend data", node: makeNode("e", "10.244.4.0/24", "192.168.50.14", func(n *v1.Node) {
			n.Annotations = map[string]string{AnnotationBackendType: BackendVXLAN, AnnotationBackendData: `{"VNI":2,"VtepMAC":"0a:00:00:00:00:0e"}`}
		}), wantErr: `node "e": annotation flannel.alpha.coreos.com/backend-data must hold VNI 1 and a VtepMAC, not "{\"VNI\":2,\"VtepMAC\":\"0a:00:00:00:00:0e\"}"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PeerFromNode(tc.node)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func TestAnnotationsAreFlannels(t *testing.T) {
	got := Annotations(BackendVXLAN, netip.MustParseAddr("192.168.50.10"), mac("0a:00:00:00:00:0a"))
	want := map[string]string{
		"flannel.alpha.coreos.com/backend-type": "vxlan",
		"flannel.alpha.coreos.com/backend-data": `{"VNI":1,"VtepMAC":"0a:00:00:00:00:0a"}`,
		"flannel.alpha.coreos.com/public-ip":    "192.168.50.10",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

var self = Local{Name: "a", PodCIDR: netip.MustParsePrefix("10.244.0.0/24"), Uplink: "eth0",
	UplinkPrefix: netip.MustParsePrefix("192.168.50.10/24"), UplinkMTU: 1500}

func peers(t *testing.T, nodes ...*v1.Node) []Peer {
	var ps []Peer
	for _, n := range nodes {
		p, err := PeerFromNode(n)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

func TestDesired(t *testing.T) {
	a := netip.MustParseAddr
	p := netip.MustParsePrefix
	t.Run("vxlan: route onlink via the .0, ARP and FDB per peer", func(t *testing.T) {
		got, skipped := Desired(BackendVXLAN, self, peers(t,
			vxlanNode("a", "10.244.0.0/24", "192.168.50.10", "0a:00:00:00:00:0a"),
			vxlanNode("b", "10.244.1.0/24", "192.168.50.11", "0a:00:00:00:00:0b"),
			vxlanNode("c", "10.244.2.0/24", "10.1.0.12", "0a:00:00:00:00:0c"),
			hostGWNode("d", "10.244.3.0/24", "192.168.50.13"),
		))
		want := State{
			Routes: []Route{{Dst: p("10.244.1.0/24"), Gw: a("10.244.1.0"), Dev: "flannel.1", OnLink: true}, {Dst: p("10.244.2.0/24"), Gw: a("10.244.2.0"), Dev: "flannel.1", OnLink: true}},
			Neighs: []Neigh{{IP: a("10.244.1.0"), MAC: "0a:00:00:00:00:0b", Dev: "flannel.1"}, {IP: a("10.244.2.0"), MAC: "0a:00:00:00:00:0c", Dev: "flannel.1"}},
			FDB:    []FDB{{MAC: "0a:00:00:00:00:0b", Dst: a("192.168.50.11"), Dev: "flannel.1"}, {MAC: "0a:00:00:00:00:0c", Dst: a("10.1.0.12"), Dev: "flannel.1"}},
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(x, y netip.Addr) bool { return x == y }), cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" {
			t.Error(diff)
		}
		if diff := cmp.Diff([]string{`node "d" runs backend "host-gw", not "vxlan"`}, skipped); diff != "" {
			t.Error(diff)
		}
	})
	t.Run("host-gw: routes via the peer's address on the link only", func(t *testing.T) {
		got, skipped := Desired(BackendHostGW, self, peers(t,
			hostGWNode("b", "10.244.1.0/24", "192.168.50.11"),
			hostGWNode("c", "10.244.2.0/24", "10.1.0.12"),
			hostGWNode("x", "10.244.0.0/25", "192.168.50.99"),
		))
		want := State{Routes: []Route{{Dst: p("10.244.1.0/24"), Gw: a("192.168.50.11"), Dev: "eth0"}}}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(x, y netip.Addr) bool { return x == y }), cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" {
			t.Error(diff)
		}
		wantSkipped := []string{
			`node "c": 10.1.0.12 is not on this node's link 192.168.50.0/24 (host-gw needs one link; use vxlan)`,
			`node "x": pod CIDR 10.244.0.0/25 overlaps this node's 10.244.0.0/24`,
		}
		if diff := cmp.Diff(wantSkipped, skipped); diff != "" {
			t.Error(diff)
		}
	})
}

func TestDiff(t *testing.T) {
	a := netip.MustParseAddr
	p := netip.MustParsePrefix
	r1 := Route{Dst: p("10.244.1.0/24"), Gw: a("10.244.1.0"), Dev: "flannel.1", OnLink: true}
	r2 := Route{Dst: p("10.244.2.0/24"), Gw: a("10.244.2.0"), Dev: "flannel.1", OnLink: true}
	r2moved := Route{Dst: p("10.244.2.0/24"), Gw: a("192.168.50.12"), Dev: "eth0"}
	f1 := FDB{MAC: "0a:00:00:00:00:0b", Dst: a("192.168.50.11"), Dev: "flannel.1"}
	f1moved := FDB{MAC: "0a:00:00:00:00:0b", Dst: a("192.168.50.21"), Dev: "flannel.1"}
	got := Diff(State{Routes: []Route{r1, r2}, FDB: []FDB{f1}}, State{Routes: []Route{r2moved}, FDB: []FDB{f1moved}})
	want := Changes{AddRoutes: []Route{r2moved}, DelRoutes: []Route{r1}, AddFDB: []FDB{f1moved}, DelFDB: []FDB{f1}}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(x, y netip.Addr) bool { return x == y }), cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" {
		t.Error(diff)
	}
	if c := Diff(State{Routes: []Route{r1}}, State{Routes: []Route{r1}}); !c.Empty() {
		t.Errorf("same state: %+v, want no change", c)
	}
}

func newFake() *Fake {
	return &Fake{Links: map[string]int{"eth0": 1500}, Addrs: map[string]netip.Prefix{"eth0": netip.MustParsePrefix("192.168.50.10/24")},
		MAC: mac("0a:00:00:00:00:0a")}
}

// fakeNFT is the nftables the unit tests give the overlay: never the kernel's of the
// namespace the test runs in (the host's).
func fakeNFT() knftables.Interface { return knftables.NewFake(knftables.IPv4Family, MasqTable) }

func prepare(t *testing.T, backend string, dp Dataplane) *Overlay {
	t.Helper()
	o, err := Prepare(Config{Backend: backend, NodeName: "a", PublicIP: netip.MustParseAddr("192.168.50.10"),
		PodCIDR: netip.MustParsePrefix("10.244.0.0/24"), Dataplane: dp, NFT: fakeNFT(), Client: fake.NewClientset()})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestSyncFollowsNodes(t *testing.T) {
	dp := newFake()
	o := prepare(t, BackendVXLAN, dp)
	if o.PodMTU() != 1450 || dp.Links[VXLANDevice] != 1450 {
		t.Errorf("pod MTU %d, device MTU %d, want 1450 (1500 - 50)", o.PodMTU(), dp.Links[VXLANDevice])
	}
	me := vxlanNode("a", "10.244.0.0/24", "192.168.50.10", "0a:00:00:00:00:0a")
	b := vxlanNode("b", "10.244.1.0/24", "192.168.50.11", "0a:00:00:00:00:0b")
	c := vxlanNode("c", "10.244.2.0/24", "192.168.50.12", "0a:00:00:00:00:0c")
	sync := func(nodes ...*v1.Node) {
		t.Helper()
		if err := o.Sync(nodes); err != nil {
			t.Fatal(err)
		}
	}
	sync(me, b, c)
	if len(dp.Current.Routes) != 2 || len(dp.Current.Neighs) != 2 || len(dp.Current.FDB) != 2 {
		t.Fatalf("after two peers: %+v", dp.Current)
	}
	writes := dp.Writes
	sync(me, b, c)
	if dp.Writes != writes {
		t.Errorf("a sync with nothing changed wrote %d times", dp.Writes-writes)
	}
	sync(me, b)
	want, _ := Desired(BackendVXLAN, o.local, peers(t, b))
	if diff := cmp.Diff(want, dp.Current, cmp.Comparer(func(x, y netip.Addr) bool { return x == y }), cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" {
		t.Errorf("after node c went (-want +got):\n%s", diff)
	}
	t.Run("restart removes what is stale and keeps the rest", func(t *testing.T) {
		o2 := prepare(t, BackendVXLAN, dp)
		if dp.Creates != 1 {
			t.Errorf("vxlan device created %d times, want once", dp.Creates)
		}
		writes := dp.Writes
		if err := o2.Sync([]*v1.Node{me, b}); err != nil {
			t.Fatal(err)
		}
		if dp.Writes != writes {
			t.Error("a restarted overlay rewrote unchanged entries")
		}
	})
	t.Run("switching to host-gw removes the vxlan device and its entries", func(t *testing.T) {
		o3 := prepare(t, BackendHostGW, dp)
		if _, ok := dp.Links[VXLANDevice]; ok || len(dp.Current.FDB)+len(dp.Current.Neighs)+len(dp.Current.Routes) != 0 {
			t.Fatalf("vxlan state left: %+v", dp.Current)
		}
		if err := o3.Sync([]*v1.Node{hostGWNode("b", "10.244.1.0/24", "192.168.50.11")}); err != nil {
			t.Fatal(err)
		}
		if len(dp.Current.Routes) != 1 || dp.Current.Routes[0].Gw != netip.MustParseAddr("192.168.50.11") {
			t.Errorf("host-gw routes: %+v", dp.Current.Routes)
		}
	})
}

func TestPrepareRejects(t *testing.T) {
	_, err := Prepare(Config{Backend: "udp", Dataplane: newFake()})
	if err == nil || err.Error() != `overlay backend "udp": want vxlan or host-gw` {
		t.Errorf("err = %v", err)
	}
	_, err = Prepare(Config{Backend: BackendVXLAN, NodeName: "a", PublicIP: netip.MustParseAddr("192.168.50.99"),
		PodCIDR: netip.MustParsePrefix("10.244.0.0/24"), Dataplane: newFake()})
	if err == nil || err.Error() != `overlay of node "a": no link holds 192.168.50.99` {
		t.Errorf("err = %v", err)
	}
}

// TestRunFollowsTheInformer runs the overlay against a fake API: it publishes this
// node's annotations, routes a node that appears, and unroutes it when it is deleted.
func TestRunFollowsTheInformer(t *testing.T) {
	me := makeNode("a", "10.244.0.0/24", "192.168.50.10", nil)
	b := vxlanNode("b", "10.244.1.0/24", "192.168.50.11", "0a:00:00:00:00:0b")
	client := fake.NewClientset(me)
	dp := newFake()
	o, err := Prepare(Config{Backend: BackendVXLAN, NodeName: "a", PublicIP: netip.MustParseAddr("192.168.50.10"),
		PodCIDR: netip.MustParsePrefix("10.244.0.0/24"), Dataplane: dp, NFT: fakeNFT(), Client: client})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- o.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("this node's annotations", func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
		return err == nil && n.Annotations[AnnotationBackendData] == `{"VNI":1,"VtepMAC":"0a:00:00:00:00:0a"}` &&
			n.Annotations[AnnotationPublicIP] == "192.168.50.10" && n.Annotations[AnnotationBackendType] == "vxlan"
	})
	routes := func() []Route { s, _ := dp.State(); return s.Routes }
	if _, err := client.CoreV1().Nodes().Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("a route to b's pod subnet", func() bool { r := routes(); return len(r) == 1 && r[0].Dst.String() == "10.244.1.0/24" })
	// c registers first and publishes its annotations later (an update).
	c := makeNode("c", "10.244.2.0/24", "192.168.50.12", nil)
	if _, err := client.CoreV1().Nodes().Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Annotations = Annotations(BackendVXLAN, netip.MustParseAddr("192.168.50.12"), mac("0a:00:00:00:00:0c"))
	if _, err := client.CoreV1().Nodes().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("a route to c's pod subnet once c published its VTEP", func() bool { return len(routes()) == 2 })
	if err := client.CoreV1().Nodes().Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Nodes().Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("b's route gone", func() bool { s, _ := dp.State(); return len(s.Routes)+len(s.Neighs)+len(s.FDB) == 0 })
}
