package overlay

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/tranche/tranche/internal/netns"
)

// machine is a test namespace standing for a machine: eth0 on a shared veth link with
// address ip, and a dummy-like bridge holding its pod gateway.
type machine struct {
	name, ns string
	ip       netip.Addr
	podCIDR  netip.Prefix
	dp       *Netlink
	o        *Overlay
}

// TestNetlinkVXLANBetweenNamespaces runs the real dataplane in two namespaces joined by a
// veth, as two machines on one link: a packet from one pod subnet reaches the other
// through the VXLAN tunnel, a second sync writes nothing, and a removed node's entries go.
func TestNetlinkVXLANBetweenNamespaces(t *testing.T) {
	ms := twoMachines(t, "ovt")
	for _, m := range ms {
		if got := m.o.PodMTU(); got != 1450 {
			t.Errorf("%s: pod MTU %d, want 1450", m.name, got)
		}
	}
	nodes := connect(t, ms)
	ln, err := netns.Listen(ms[1].ns, "tcp", "10.244.1.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	conn, err := netns.Dial(ms[0].ns, "tcp", "10.244.1.1:8080", 5*time.Second)
	if err != nil {
		t.Fatalf("connecting across the tunnel: %v\n%s", err, ipShow(ms[0].ns))
	}
	got, err := io.ReadAll(conn)
	conn.Close()
	if string(got) != "hello" {
		t.Fatalf("read %q, %v across the tunnel", got, err)
	}
	st, err := ms[0].dp.State()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Desired(BackendVXLAN, ms[0].o.local, peers(t, nodes[1]))
	if c := Diff(st, want); !c.Empty() {
		t.Errorf("kernel state differs from the desired one: %+v\n%s", c, ipShow(ms[0].ns))
	}
	// Prepare again (an agent restart): the device is kept, nothing is rewritten.
	o2, err := Prepare(Config{Backend: BackendVXLAN, NodeName: "a", PublicIP: ms[0].ip, PodCIDR: ms[0].podCIDR, Dataplane: ms[0].dp, NFT: fakeNFT()})
	if err != nil {
		t.Fatal(err)
	}
	if o2.local.VtepMAC.String() != ms[0].o.local.VtepMAC.String() {
		t.Errorf("restart changed the VTEP MAC: %s, was %s", o2.local.VtepMAC, ms[0].o.local.VtepMAC)
	}
	// Node b goes: its route, ARP and FDB entries go.
	if err := o2.Sync(nodes[:1]); err != nil {
		t.Fatal(err)
	}
	if st, err = ms[0].dp.State(); err != nil {
		t.Fatal(err)
	}
	if len(st.Routes)+len(st.Neighs)+len(st.FDB) != 0 {
		t.Errorf("entries left after node b was removed: %+v\n%s", st, ipShow(ms[0].ns))
	}
	if show := ipShow(ms[0].ns); strings.Contains(show, "10.244.1.0/24") {
		t.Errorf("route to b's pod subnet left:\n%s", show)
	}
}

func ipShow(ns string) string {
	var b strings.Builder
	for _, args := range [][]string{{"-d", "link", "show", VXLANDevice}, {"route"}, {"neigh", "show", "dev", VXLANDevice}} {
		out, _ := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
		b.Write(out)
	}
	out, _ := exec.Command("ip", "netns", "exec", ns, "bridge", "fdb", "show", "dev", VXLANDevice).CombinedOutput()
	b.Write(out)
	return b.String()
}

// twoMachines makes two namespaces joined by a veth (192.168.77.1 and .2), each with a
// bridge holding its pod gateway (10.244.0.1, 10.244.1.1) and a prepared vxlan overlay;
// they are removed when tb ends.
func twoMachines(t testing.TB, tag string) []*machine {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	prefix := fmt.Sprintf("%s%d-", tag, os.Getpid()%100000)
	ms := []*machine{
		{name: "a", ip: netip.MustParseAddr("192.168.77.1"), podCIDR: netip.MustParsePrefix("10.244.0.0/24")},
		{name: "b", ip: netip.MustParseAddr("192.168.77.2"), podCIDR: netip.MustParsePrefix("10.244.1.0/24")},
	}
	for _, m := range ms {
		m.ns = prefix + m.name
		if err := netns.Create(m.ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := netns.Delete(m.ns); err != nil {
				t.Error(err)
			}
		})
	}
	la, err := netns.OpenLinks(ms[0].ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(la.Close)
	if err := la.AddVeth("eth0", "eth0", ms[1].ns); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		l, err := netns.OpenLinks(m.ns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		if err := l.LoUp(); err != nil {
			t.Fatal(err)
		}
		if err := l.AddAddr("eth0", netip.PrefixFrom(m.ip, 24)); err != nil {
			t.Fatal(err)
		}
		if err := l.SetUp("eth0"); err != nil {
			t.Fatal(err)
		}
		if err := l.AddBridge("cbr0", netip.PrefixFrom(m.podCIDR.Addr().Next(), 24), nil); err != nil {
			t.Fatal(err)
		}
		if m.dp, err = OpenNetlink(m.ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.dp.Close)
		if m.o, err = Prepare(Config{Backend: BackendVXLAN, NodeName: m.name, PublicIP: m.ip, PodCIDR: m.podCIDR, Dataplane: m.dp, NFT: fakeNFT()}); err != nil {
			t.Fatal(err)
		}
	}
	return ms
}

// connect gives each machine the other's Node (with its annotations) and syncs both.
func connect(t testing.TB, ms []*machine) []*v1.Node {
	var nodes []*v1.Node
	for _, m := range ms {
		nodes = append(nodes, makeNode(m.name, m.podCIDR.String(), m.ip.String(), func(n *v1.Node) { n.Annotations = m.o.Annotations() }))
	}
	for _, m := range ms {
		if err := m.o.Sync(nodes); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}
