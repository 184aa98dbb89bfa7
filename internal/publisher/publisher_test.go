package publisher

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// The tests below use real loopback sockets (no root needed) and stand-in nodes: the
// publisher's Dial sends "node address:node port" to a local test server instead.

// lbAddr is a loopback address no cluster uses (their pool is 127.0.10.0/24).
var lbAddr = netip.MustParseAddr("127.0.77.1")

// freePort returns a port that was free on addr a moment ago.
func freePort(t *testing.T, addr netip.Addr) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// tcpBackend answers each connection with "NAME <first line received>".
func tcpBackend(t testing.TB, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "%s %s", name, line)
			}()
		}
	}()
	return ln.Addr().String()
}

// udpBackend answers each datagram with "NAME <datagram>".
func udpBackend(t *testing.T, name string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(name+" "+string(buf[:n])), from)
		}
	}()
	return pc.LocalAddr().String()
}

type fixture struct {
	client   *fake.Clientset
	recorder *record.FakeRecorder
	host     *Host
}

// start runs a publisher whose Dial maps "network addr" to a real address in routes
// (which must not change afterwards).
func start(t *testing.T, routes map[string]string, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	recorder := record.NewFakeRecorder(100)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		real, ok := routes[network+" "+addr]
		if !ok {
			return nil, fmt.Errorf("dial %s %s: connection refused", network, addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, real)
	}
	host := NewHost(nil, nil)
	p := New(Config{Client: client, Dial: dial, Recorder: recorder, RetryInterval: 50 * time.Millisecond, Host: host,
		Publishable: func(a netip.Addr) bool { return a == lbAddr }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	// The fake clientset drops events sent before a watch exists: wait for the three.
	deadline := time.Now().Add(5 * time.Second)
	for {
		watching := map[string]bool{}
		for _, a := range client.Actions() {
			if a.GetVerb() == "watch" {
				watching[a.GetResource().Resource] = true
			}
		}
		if watching["services"] && watching["endpointslices"] && watching["nodes"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("informers not watching: %v", watching)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return &fixture{client: client, recorder: recorder, host: host}
}

// ask sends "hi\n" over TCP to addr and returns the answer, or the error.
func ask(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "hi\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if len(b) == 0 && err == nil {
		err = io.EOF
	}
	return string(b), err
}

// askUDP sends a datagram to addr and returns the answer.
func askUDP(addr string) (string, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := io.WriteString(c, "ping"); err != nil {
		return "", err
	}
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

func answers(t *testing.T, addr, want string) {
	t.Helper()
	testutil.EventuallyState(t, 5*time.Second, addr+" answers "+want, func() (bool, string) {
		got, err := ask(addr)
		return got == want, fmt.Sprintf("%q %v", got, err)
	})
}

func refuses(t *testing.T, addr string) {
	t.Helper()
	testutil.EventuallyState(t, 5*time.Second, addr+" refuses", func() (bool, string) {
		got, err := ask(addr)
		return errors.Is(err, syscall.ECONNREFUSED), fmt.Sprintf("%q %v", got, err)
	})
}

func (f *fixture) waitEvent(t *testing.T, parts ...string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	var seen []string
	for {
		select {
		case e := <-f.recorder.Events:
			seen = append(seen, e)
			all := true
			for _, p := range parts {
				all = all && strings.Contains(e, p)
			}
			if all {
				return
			}
		case <-timeout:
			t.Fatalf("no event with %q; saw %q", parts, seen)
		}
	}
}

func readyNode(name, ip string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{
		Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}},
		Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
	}}
}

func TestPublishesNodePortAndLoadBalancerAndFollowsChanges(t *testing.T) {
	np := freePort(t, netip.MustParseAddr("127.0.0.1"))
	lbPort := freePort(t, lbAddr)
	routes := map[string]string{
		fmt.Sprintf("tcp 10.240.0.10:%d", np): tcpBackend(t, "node0"),
		fmt.Sprintf("tcp 10.240.0.11:%d", np): tcpBackend(t, "node1"),
	}
	f := start(t, routes, readyNode("n0", "10.240.0.10"))
	ctx := context.Background()
	svc := makeService("web", 1, func(s *v1.Service) { s.Spec.Ports[0].NodePort = int32(np) })
	svc, err := f.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodePortAddr := fmt.Sprintf("127.0.0.1:%d", np)
	answers(t, nodePortAddr, "node0 hi\n")
	f.waitEvent(t, "Normal", ReasonPublished, "Listening on "+nodePortAddr+"/TCP on the host, forwarding to node port")

	// It becomes a LoadBalancer with an address: published there too.
	svc.Spec.Type = v1.ServiceTypeLoadBalancer
	svc.Spec.Ports[0].Port = int32(lbPort)
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: lbAddr.String()}}
	if svc, err = f.client.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lb := netip.AddrPortFrom(lbAddr, lbPort).String()
	answers(t, lb, "node0 hi\n")

	// A second node joins; the first one goes NotReady: traffic moves.
	if _, err := f.client.CoreV1().Nodes().Create(ctx, readyNode("n1", "10.240.0.11"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n0 := readyNode("n0", "10.240.0.10")
	n0.Status.Conditions[0].Status = v1.ConditionFalse
	if _, err := f.client.CoreV1().Nodes().Update(ctx, n0, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	answers(t, lb, "node1 hi\n")
	for range 5 {
		if got, err := ask(lb); got != "node1 hi\n" {
			t.Fatalf("after n0 went NotReady: %q %v", got, err)
		}
	}

	// Deleted: both listeners go, and the ports are free again.
	if err := f.client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	refuses(t, lb)
	refuses(t, nodePortAddr)
	for _, a := range []string{lb, nodePortAddr} {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("%s not free after the Service was deleted: %v", a, err)
		}
		ln.Close()
	}
}

func TestPortTakenOnTheHostIsReportedAndRetried(t *testing.T) {
	np := freePort(t, netip.MustParseAddr("127.0.0.1"))
	addr := fmt.Sprintf("127.0.0.1:%d", np)
	squatter, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]string{fmt.Sprintf("tcp 10.240.0.10:%d", np): tcpBackend(t, "node0")}
	svc := makeService("web", 1, func(s *v1.Service) { s.Spec.Ports[0].NodePort = int32(np) })
	f := start(t, routes, readyNode("n0", "10.240.0.10"), svc)
	f.waitEvent(t, "Warning", ReasonPublishFailed, "Cannot listen on "+addr+"/TCP on the host", "address already in use")
	squatter.Close()
	answers(t, addr, "node0 hi\n")
}

func TestNoBackendResetsTheConnection(t *testing.T) {
	np := freePort(t, netip.MustParseAddr("127.0.0.1"))
	svc := makeService("web", 1, func(s *v1.Service) { s.Spec.Ports[0].NodePort = int32(np) })
	start(t, map[string]string{}, readyNode("n0", "10.240.0.10"), svc)
	addr := fmt.Sprintf("127.0.0.1:%d", np)
	testutil.EventuallyState(t, 5*time.Second, addr+" accepts and resets", func() (bool, string) {
		got, err := ask(addr)
		return errors.Is(err, syscall.ECONNRESET), fmt.Sprintf("%q %v", got, err)
	})
}

func TestUDP(t *testing.T) {
	np := freePort(t, netip.MustParseAddr("127.0.0.1"))
	routes := map[string]string{fmt.Sprintf("udp 10.240.0.10:%d", np): udpBackend(t, "node0")}
	svc := makeService("dns", 1, func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, NodePort: int32(np)}}
	})
	start(t, routes, readyNode("n0", "10.240.0.10"), svc)
	addr := fmt.Sprintf("127.0.0.1:%d", np)
	testutil.EventuallyState(t, 5*time.Second, addr+"/UDP answers", func() (bool, string) {
		got, err := askUDP(addr)
		return got == "node0 ping", fmt.Sprintf("%q %v", got, err)
	})
}

// TestSlowDialHoldsUpNothing: a connection stuck dialling its backend does not stop
// the publisher from unpublishing its Service or publishing another one.
func TestSlowDialHoldsUpNothing(t *testing.T) {
	stuck, other := freePort(t, netip.MustParseAddr("127.0.0.1")), freePort(t, netip.MustParseAddr("127.0.0.1"))
	release := make(chan struct{})
	dialing := make(chan struct{}, 1)
	otherBackend := tcpBackend(t, "other")
	client := fake.NewClientset(readyNode("n0", "10.240.0.10"),
		makeService("stuck", 1, func(s *v1.Service) { s.Spec.Ports[0].NodePort = int32(stuck) }))
	p := New(Config{Client: client, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == fmt.Sprintf("10.240.0.10:%d", stuck) {
			dialing <- struct{}{}
			<-release // a dial that cannot be interrupted, like netns.Dial's connect
			return nil, errors.New("gave up")
		}
		var d net.Dialer
		return d.DialContext(ctx, network, otherBackend)
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	t.Cleanup(func() { close(release) }) // before the one above: Run waits for the dial
	stuckAddr := fmt.Sprintf("127.0.0.1:%d", stuck)
	var conn net.Conn
	testutil.EventuallyState(t, 5*time.Second, stuckAddr+" accepts", func() (bool, string) {
		c, err := net.Dial("tcp", stuckAddr)
		conn = c
		return err == nil, fmt.Sprint(err)
	})
	defer conn.Close()
	<-dialing
	if err := client.CoreV1().Services("default").Delete(context.Background(), "stuck", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services("default").Create(context.Background(),
		makeService("other", 2, func(s *v1.Service) { s.Spec.Ports[0].NodePort = int32(other) }), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	answers(t, fmt.Sprintf("127.0.0.1:%d", other), "other hi\n")
	refuses(t, stuckAddr)
}

// TestHostTellsWhoHoldsAPort: Taken says yes only for a port another program holds,
// TCP or UDP; a port the publisher holds itself, or a free one, is not taken.
func TestHostTellsWhoHoldsAPort(t *testing.T) {
	np := freePort(t, netip.MustParseAddr("127.0.0.1"))
	routes := map[string]string{fmt.Sprintf("tcp 10.240.0.10:%d", np): tcpBackend(t, "node0")}
	svc := makeService("web", 1, func(s *v1.Service) { s.Spec.Ports[0].NodePort = int32(np) })
	f := start(t, routes, readyNode("n0", "10.240.0.10"), svc)
	ours := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), np)
	answers(t, ours.String(), "node0 hi\n")

	squatted, err := net.Listen("tcp", netip.AddrPortFrom(lbAddr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer squatted.Close()
	squattedUDP, err := net.ListenPacket("udp", netip.AddrPortFrom(lbAddr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer squattedUDP.Close()
	free := netip.AddrPortFrom(lbAddr, freePort(t, lbAddr))
	cases := []struct {
		name     string
		protocol v1.Protocol
		addr     netip.AddrPort
		want     bool
	}{
		{"held by the publisher", v1.ProtocolTCP, ours, false},
		{"held by another program", v1.ProtocolTCP, netip.MustParseAddrPort(squatted.Addr().String()), true},
		{"UDP held by another program", v1.ProtocolUDP, netip.MustParseAddrPort(squattedUDP.LocalAddr().String()), true},
		{"free", v1.ProtocolTCP, free, false},
		{"not published", v1.ProtocolSCTP, free, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := f.host.Taken(tc.protocol, tc.addr); got != tc.want {
				t.Fatalf("Taken(%s, %s) = %v, want %v", tc.protocol, tc.addr, got, tc.want)
			}
		})
	}
	// A trial leaves the port free for the publisher.
	if _, err := f.client.CoreV1().Services("default").Create(context.Background(), makeService("lb", 2, func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].Port = int32(free.Port())
		s.Spec.Ports[0].NodePort = int32(freePort(t, netip.MustParseAddr("127.0.0.1")))
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: lbAddr.String()}}
	}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitEvent(t, "Normal", ReasonPublished, "Listening on "+free.String()+"/TCP")
	if f.host.Taken(v1.ProtocolTCP, free) {
		t.Fatalf("%s is the publisher's, not another program's", free)
	}
}

// TestLoadBalancerAddressTakenOnTheHostTellsTheController: a load-balancer address
// another program holds signals Changed (the servicelb controller then moves the
// Service); a node port another program holds does not, since no controller can move
// a node port to another address.
func TestLoadBalancerAddressTakenOnTheHostTellsTheController(t *testing.T) {
	np := freePort(t, netip.MustParseAddr("127.0.0.1"))
	npSquatter, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", np))
	if err != nil {
		t.Fatal(err)
	}
	defer npSquatter.Close()
	svc := makeService("web", 1, func(s *v1.Service) { s.Spec.Ports[0].NodePort = int32(np) })
	f := start(t, map[string]string{}, readyNode("n0", "10.240.0.10"), svc)
	f.waitEvent(t, "Warning", ReasonPublishFailed, fmt.Sprintf("127.0.0.1:%d/TCP", np))
	select {
	case <-f.host.Changed():
		t.Fatal("a node port taken on the host signalled the controller")
	default:
	}

	squatter, err := net.Listen("tcp", netip.AddrPortFrom(lbAddr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	taken := netip.MustParseAddrPort(squatter.Addr().String())
	if _, err := f.client.CoreV1().Services("default").Create(context.Background(), makeService("lb", 2, func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].Port = int32(taken.Port())
		s.Spec.Ports[0].NodePort = int32(freePort(t, netip.MustParseAddr("127.0.0.1")))
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: lbAddr.String()}}
	}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitEvent(t, "Warning", ReasonPublishFailed, "Cannot listen on "+taken.String()+"/TCP", "address already in use")
	select {
	case <-f.host.Changed():
	case <-time.After(5 * time.Second):
		t.Fatal("no signal to the controller after the load-balancer address was found taken")
	}
}

// TestSCTPPortGetsAnEvent: an SCTP port of a LoadBalancer Service is not published on
// the host; a Warning Event says so, once, while its TCP port is published.
func TestSCTPPortGetsAnEvent(t *testing.T) {
	svc := makeService("mixed", 1, func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports = []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: int32(freePort(t, netip.MustParseAddr("127.0.0.1")))},
			{Name: "assoc", Protocol: v1.ProtocolSCTP, Port: 9999, NodePort: 30999}}
	})
	f := start(t, map[string]string{}, readyNode("n0", "10.240.0.10"), svc)
	f.waitEvent(t, "Warning", ReasonProtocolNotPublished, "Port assoc (SCTP/9999) is not published on the host: the host publisher forwards TCP and UDP only")
	// Later syncs do not repeat it: publish two more Services one after the other;
	// a repeat by the first one's sync would come before the second one's Event.
	publish := func(name string, age int) string {
		np := freePort(t, netip.MustParseAddr("127.0.0.1"))
		if _, err := f.client.CoreV1().Services("default").Create(context.Background(),
			makeService(name, age, nodePort(int32(np))), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("Listening on 127.0.0.1:%d/TCP", np)
	}
	f.waitEvent(t, "Normal", ReasonPublished, publish("second", 2))
	last := publish("third", 3)
	timeout := time.After(5 * time.Second)
	for {
		select {
		case e := <-f.recorder.Events:
			if strings.Contains(e, ReasonProtocolNotPublished) {
				t.Fatalf("reported twice: %q", e)
			}
			if strings.Contains(e, last) {
				return
			}
		case <-timeout:
			t.Fatalf("no event %q", last)
		}
	}
}
