package netpol

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/tranche/tranche/internal/netns"
)

// testNet is a node namespace routing three pod namespaces (10.244.1.2-4, pods x/a,
// x/b and y/a, the way clusternet routes pods: through the node), all made for one
// test and removed after it, also on failure.
type testNet struct {
	node string
	pods map[string]string // "ns/name" → its network namespace
	nft  knftables.Interface
}

var testPods = []struct{ key, ip string }{{"x/a", "10.244.1.2"}, {"x/b", "10.244.1.3"}, {"y/a", "10.244.1.4"}}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func newTestNet(t *testing.T) *testNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces and nft)")
	}
	prefix := fmt.Sprintf("tnp%05d", os.Getpid()%100000)
	n := &testNet{node: prefix + "-node", pods: map[string]string{}}
	var made []string
	t.Cleanup(func() {
		for _, ns := range made {
			if err := netns.Delete(ns); err != nil {
				t.Error(err)
			}
		}
	})
	create := func(name string) {
		if err := netns.Create(name); err != nil {
			t.Fatal(err)
		}
		made = append(made, name)
	}
	create(n.node)
	run(t, "ip", "-n", n.node, "link", "set", "lo", "up")
	if err := netns.SetSysctl(n.node, "net.ipv4.ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	for i, p := range testPods {
		ns := fmt.Sprintf("%s-p%d", prefix, i)
		create(ns)
		n.pods[p.key] = ns
		veth := fmt.Sprintf("veth%d", i)
		run(t, "ip", "-n", n.node, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
		run(t, "ip", "-n", n.node, "addr", "add", "10.244.1.1/32", "dev", veth)
		run(t, "ip", "-n", n.node, "link", "set", veth, "up")
		run(t, "ip", "-n", n.node, "route", "add", p.ip+"/32", "dev", veth)
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
		run(t, "ip", "-n", ns, "addr", "add", p.ip+"/24", "dev", "eth0", "noprefixroute")
		run(t, "ip", "-n", ns, "link", "set", "eth0", "up")
		run(t, "ip", "-n", ns, "route", "add", "10.244.1.1", "dev", "eth0", "scope", "link")
		run(t, "ip", "-n", ns, "route", "add", "default", "via", "10.244.1.1")
	}
	if err := netns.Do(n.node, func() error {
		var err error
		n.nft, err = knftables.New(knftables.IPv4Family, TableName)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// sync runs one sync of s (writing n's table) in the node's namespace.
func (n *testNet) sync(t *testing.T, s *Syncer, m *Model, full bool) {
	t.Helper()
	if err := netns.Do(n.node, func() error { return s.Sync(context.Background(), m, full, nil) }); err != nil {
		t.Fatal(err)
	}
}

// serve listens on TCP port in pod key until the test ends, accepting and closing.
func (n *testNet) serve(t *testing.T, key string, port int) {
	t.Helper()
	ln, err := netns.Listen(n.pods[key], "tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

// connects reports whether a TCP connection from pod key to addr opens.
func (n *testNet) connects(key, addr string) bool {
	c, err := netns.Dial(n.pods[key], "tcp", addr, 700*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func (n *testNet) expect(t *testing.T, what string, cases map[string]bool) {
	t.Helper()
	for k, want := range cases {
		f := strings.SplitN(k, "->", 2)
		if got := n.connects(f[0], f[1]); got != want {
			t.Errorf("%s: %s connects = %v, want %v", what, k, got, want)
		}
	}
}

func kernelPods() ([]*v1.Pod, []*v1.Namespace) {
	var pods []*v1.Pod
	for _, p := range testPods {
		ns, name, _ := strings.Cut(p.key, "/")
		pods = append(pods, makePod(ns, name, "node-1", p.ip, map[string]string{"pod": name}, func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		}))
	}
	return pods, []*v1.Namespace{makeNS("x", nil), makeNS("y", nil)}
}

func TestKernelEnforces(t *testing.T) {
	n := newTestNet(t)
	pods, nss := kernelPods()
	for _, key := range []string{"x/a", "x/b", "y/a"} {
		for _, port := range []int{80, 8080, 9000} {
			n.serve(t, key, port)
		}
	}
	s := NewSyncer(n.nft, nil, nil)
	compile := func(pols ...*networkingv1.NetworkPolicy) *Model {
		return Compile(Snapshot{Policies: pols, Pods: pods, Namespaces: nss, NodeName: "node-1"})
	}
	n.sync(t, s, compile(), true)
	n.expect(t, "no policy", map[string]bool{"x/b->10.244.1.2:80": true, "y/a->10.244.1.2:80": true, "x/a->10.244.1.4:80": true})

	n.sync(t, s, compile(makePolicy("x", "deny", func(np *networkingv1.NetworkPolicy) { np.Spec.PodSelector = *sel("pod", "a") })), false)
	n.expect(t, "default deny ingress of x/a", map[string]bool{"x/b->10.244.1.2:80": false, "y/a->10.244.1.2:80": false, "x/a->10.244.1.4:80": true, "x/a->10.244.1.3:80": true})
	// The node's own traffic (probes) is never filtered.
	if c, err := netns.Dial(n.node, "tcp", "10.244.1.2:80", 700*time.Millisecond); err != nil {
		t.Errorf("the node cannot reach its isolated pod x/a: %v", err)
	} else {
		c.Close()
	}

	allow := makePolicy("x", "allow", func(np *networkingv1.NetworkPolicy) {
		np.Spec.PodSelector = *sel("pod", "a")
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "b")}}, Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("http"))}},
			{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.244.1.0/24", Except: []string{"10.244.1.3/32"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(8000)), EndPort: ptr.To(int32(9000))}}},
		}
	})
	n.sync(t, s, compile(makePolicy("x", "deny", func(np *networkingv1.NetworkPolicy) { np.Spec.PodSelector = *sel("pod", "a") }), allow), false)
	n.expect(t, "named port, ipBlock except, endPort", map[string]bool{
		"x/b->10.244.1.2:8080": true,  // pod selector, named port http
		"x/b->10.244.1.2:80":   false, // not the named port
		"x/b->10.244.1.2:9000": false, // in the range, but x/b is the except
		"y/a->10.244.1.2:9000": true,  // ipBlock, endPort
		"y/a->10.244.1.2:8080": true,  // ipBlock, in the range
		"y/a->10.244.1.2:80":   false,
	})

	egress := makePolicy("y", "egress", func(np *networkingv1.NetworkPolicy) {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("kubernetes.io/metadata.name", "x"), PodSelector: sel("pod", "b")}}}}
	})
	n.sync(t, s, compile(allow, egress), false)
	n.expect(t, "egress of y/a to x/b only", map[string]bool{"y/a->10.244.1.3:80": true, "y/a->10.244.1.2:9000": false, "x/b->10.244.1.4:80": true})

	// A ClusterIP connection is judged by the pod it reaches: DNAT as the proxy does
	// (prerouting, dstnat), with y/a's egress allowing x/b only.
	dnat := "table ip fakeproxy { chain pre { type nat hook prerouting priority dstnat; ip daddr 10.96.0.10 tcp dport 80 dnat to 10.244.1.3:80; ip daddr 10.96.0.11 tcp dport 80 dnat to 10.244.1.2:80; }\n" +
		// hairpin: masqueraded after forward, as the proxy does
		"chain post { type nat hook postrouting priority srcnat; ip saddr 10.244.1.2 ip daddr 10.244.1.2 masquerade; }\n}\n"
	if err := netns.Do(n.node, func() error {
		cmd := exec.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(dnat)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n.expect(t, "ClusterIP", map[string]bool{"y/a->10.96.0.10:80": true, "y/a->10.96.0.11:80": false,
		"x/b->10.96.0.11:80": false, // x/a's ingress: x/b is allowed on http only
		"x/a->10.96.0.11:80": true,  // a pod cannot block access to itself
	})

	n.sync(t, s, compile(), false)
	n.expect(t, "policies gone", map[string]bool{"y/a->10.244.1.2:80": true, "x/b->10.244.1.2:80": true})
	var rest []string
	if err := netns.Do(n.node, func() error {
		var err error
		rest, err = n.nft.List(context.Background(), "chains")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(rest) != len(baseChains) {
		t.Errorf("chains left: %v, want the base chains only", rest)
	}
}
