package clusternet

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche/tranche/internal/netns"
)

// testPrefix is unique per test binary and short: "tc123-" + a node name stays a short
// namespace name, and link names never include it.
var testPrefix = fmt.Sprintf("tc%03d-", os.Getpid()%1000)

// rootState is what the tests must leave exactly as they found it: the root namespace's
// links, addresses and routes, and the namespaces and mounts carrying the test prefix
// (other packages' tests may create their own namespaces meanwhile).
func rootState(t *testing.T) map[string]string {
	t.Helper()
	s := map[string]string{}
	for _, args := range [][]string{
		{"-br", "link"}, {"-br", "addr"}, {"-4", "route"}, {"-6", "route"},
	} {
		s["ip "+strings.Join(args, " ")] = ip(t, args...)
	}
	s["netns"] = strings.Join(lines(ip(t, "netns", "list"), testPrefix), "\n")
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	s["mounts"] = strings.Join(lines(string(mounts), netns.RunDir+"/"+testPrefix), "\n")
	return s
}

func ip(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
	return string(out)
}

func lines(text, substr string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// echo serves one line per connection back with a prefix naming the server, until the
// listener is closed.
func echo(l net.Listener, who string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			line, _ := bufio.NewReader(c).ReadString('\n')
			fmt.Fprintf(c, "%s: %s", who, line)
		}()
	}
}

// listen starts an echo server named who inside namespace ns on addr.
func listen(t *testing.T, ns, addr, who string) string {
	t.Helper()
	l, err := netns.Listen(ns, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go echo(l, who)
	return l.Addr().String()
}

// talk sends one line from namespace ns to addr and checks that server who answered.
func talk(t *testing.T, ns, addr, who string) {
	t.Helper()
	c, err := netns.Dial(ns, "tcp", addr, 3*time.Second)
	if err != nil {
		t.Errorf("from %s to %s: %v", ns, addr, err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	fmt.Fprintf(c, "hello from %s\n", ns)
	reply, err := bufio.NewReader(c).ReadString('\n')
	if want := fmt.Sprintf("%s: hello from %s\n", who, ns); err != nil || reply != want {
		t.Errorf("from %s to %s: reply %q, %v; want %q", ns, addr, reply, err, want)
	}
}

func unreachable(t *testing.T, ns, addr string) {
	t.Helper()
	if c, err := netns.Dial(ns, "tcp", addr, 300*time.Millisecond); err == nil {
		c.Close()
		t.Errorf("from %s, %s is still reachable", ns, addr)
	}
}

func newPod(t *testing.T, topo Topology, node, name, addr string) string {
	t.Helper()
	ns := testPrefix + name
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	veth, err := AttachPod(topo, node, ns, netip.MustParseAddr(addr))
	if err != nil {
		t.Fatal(err)
	}
	if got := lines(ip(t, "-n", topo.NodeNamespace(node), "-d", "link", "show", veth), "hairpin on"); len(got) != 1 {
		t.Errorf("pod veth %s on node %s: hairpin is not on", veth, node)
	}
	n, _ := topo.Node(node)
	gw := n.Gateway().String()
	// Only the gateway is on-link: every other destination, pods of the same node
	// included, is reached through the node.
	want := []string{"default via " + gw + " dev eth0 ", gw + " dev eth0 scope link "}
	if diff := cmp.Diff(want, lines(ip(t, "-n", ns, "-4", "route"), "dev eth0")); diff != "" {
		t.Errorf("routes of pod %s (-want +got):\n%s", name, diff)
	}
	if got := lines(ip(t, "-n", ns, "-4", "addr", "show", "eth0"), "inet "+addr+"/24 "); len(got) != 1 || !strings.Contains(got[0], "noprefixroute") {
		t.Errorf("eth0 of pod %s: %q, want %s/24 noprefixroute", name, got, addr)
	}
	if got, err := netns.Sysctl(ns, "net.ipv4.conf.eth0.accept_redirects"); err != nil || got != "0" {
		t.Errorf("accept_redirects on eth0 of pod %s = %q, %v; want 0", name, got, err)
	}
	return ns
}

// forwarded is how many packets namespace ns has forwarded (IpForwDatagrams).
func forwarded(t *testing.T, ns string) int {
	t.Helper()
	var names, values []string
	for _, l := range lines(ip(t, "netns", "exec", ns, "cat", "/proc/net/snmp"), "Ip: ") {
		if names == nil {
			names = strings.Fields(l)
		} else {
			values = strings.Fields(l)
		}
	}
	for i, n := range names {
		if n == "ForwDatagrams" && i < len(values) {
			v, err := strconv.Atoi(values[i])
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no Ip ForwDatagrams in /proc/net/snmp of %s", ns)
	return 0
}

func TestClusterNetwork(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	// Registered before anything exists: runs last, also after a failure.
	before := rootState(t)
	t.Cleanup(func() {
		if err := Teardown(testPrefix); err != nil {
			t.Error(err)
		}
		if diff := cmp.Diff(before, rootState(t)); diff != "" {
			t.Errorf("root namespace or namespace list changed (-before +after):\n%s", diff)
		}
	})

	topo, err := NewTopology(testPrefix, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := Up(topo); err != nil {
		t.Fatal(err)
	}
	nodeA, nodeB := topo.NodeNamespace("a"), topo.NodeNamespace("b")
	for _, key := range []string{"net.ipv4.ip_forward", "net.ipv4.conf.all.rp_filter", "net.ipv4.conf.default.rp_filter", "net.ipv4.conf.eth0.rp_filter",
		"net.ipv4.conf.all.send_redirects", "net.ipv4.conf.cbr0.send_redirects"} {
		want := "0"
		if key == "net.ipv4.ip_forward" {
			want = "1"
		}
		if got, err := netns.Sysctl(nodeA, key); err != nil || got != want {
			t.Errorf("%s in %s = %q, %v; want %s", key, nodeA, got, err, want)
		}
	}
	// Only where the kernel has br_netfilter (its keys exist in the namespace).
	if got, err := netns.Sysctl(nodeA, "net.bridge.bridge-nf-call-iptables"); err == nil && got != "0" {
		t.Errorf("bridge-nf-call-iptables in %s = %q, want 0", nodeA, got)
	}
	if err := Up(topo); err == nil {
		t.Errorf("a second Up over a running cluster succeeded")
	}

	podA := newPod(t, topo, "a", "pa", "10.244.0.2")
	podB := newPod(t, topo, "b", "pb", "10.244.1.2")

	t.Run("pod to pod across nodes", func(t *testing.T) {
		addr := listen(t, podB, "10.244.1.2:8080", "pb")
		talk(t, podA, addr, "pb")
	})
	t.Run("pod to pod on the same node is routed by the node", func(t *testing.T) {
		podA2 := newPod(t, topo, "a", "pa2", "10.244.0.3")
		addr := listen(t, podA2, "10.244.0.3:8080", "pa2")
		before := forwarded(t, nodeA)
		talk(t, podA, addr, "pa2")
		// Bridged, the exchange would never reach node a's IP layer.
		if n := forwarded(t, nodeA) - before; n < 2 {
			t.Errorf("node a forwarded %d packets of a connection between two of its pods, want both directions", n)
		}
		if err := DetachPod(topo, "a", podA2); err != nil {
			t.Fatal(err)
		}
		if got := lines(ip(t, "-n", nodeA, "link", "show", PodBridge), "link/ether 0a:58:0a:f4:00:01 "); len(got) != 1 {
			t.Errorf("cbr0 of node a changed its MAC when a port went")
		}
		talk(t, podA, listen(t, nodeA, "10.244.0.1:0", "node a"), "node a")
	})
	t.Run("pod to its node bridge", func(t *testing.T) {
		addr := listen(t, nodeA, "10.244.0.1:0", "node a")
		talk(t, podA, addr, "node a")
	})
	t.Run("pod to the API address", func(t *testing.T) {
		addr := listen(t, topo.Underlay(), "10.240.0.1:0", "api")
		talk(t, podB, addr, "api")
	})
	t.Run("node to pod on another node", func(t *testing.T) {
		addr := listen(t, podA, "10.244.0.2:0", "pa")
		talk(t, nodeB, addr, "pa")
	})

	c, err := topo.NextNode("c")
	if err != nil {
		t.Fatal(err)
	}
	if topo, err = AddNode(topo, c); err != nil {
		t.Fatal(err)
	}
	podC := newPod(t, topo, "c", "pc", "10.244.2.9")
	addrC := listen(t, podC, "10.244.2.9:80", "pc")
	t.Run("added node reaches and is reached", func(t *testing.T) {
		talk(t, podA, addrC, "pc")
		talk(t, podC, listen(t, podB, "10.244.1.2:0", "pb"), "pb")
	})

	if topo, err = RemoveNode(topo, "c"); err != nil {
		t.Fatal(err)
	}
	if netns.Exists(topo.NodeNamespace("c")) {
		t.Errorf("namespace of removed node c still exists")
	}
	if got := lines(ip(t, "-n", nodeA, "route"), "10.244.2.0"); len(got) != 0 {
		t.Errorf("node a still routes to removed node c: %q", got)
	}
	if got := lines(ip(t, "-n", topo.Underlay(), "-br", "link"), "c@"); len(got) != 0 {
		t.Errorf("underlay still has node c's veth: %q", got)
	}
	unreachable(t, podA, addrC)
	if err := netns.Delete(podC); err != nil {
		t.Fatal(err)
	}
	if _, err := RemoveNode(topo, "c"); err == nil {
		t.Errorf("removing node c twice succeeded")
	}

	if err := DetachPod(topo, "a", podA); err != nil {
		t.Fatal(err)
	}
	if err := DetachPod(topo, "a", podA); err != nil {
		t.Errorf("second DetachPod: %v", err)
	}
	if got := lines(ip(t, "-n", podA, "-br", "link"), "eth0"); len(got) != 0 {
		t.Errorf("pod a still has eth0 after DetachPod: %q", got)
	}

	if err := Teardown(testPrefix); err != nil {
		t.Fatal(err)
	}
	if left, err := netns.List(testPrefix); err != nil || len(left) != 0 {
		t.Errorf("after Teardown: namespaces %q, %v", left, err)
	}
	if err := Teardown(testPrefix); err != nil {
		t.Errorf("second Teardown: %v", err)
	}
}
