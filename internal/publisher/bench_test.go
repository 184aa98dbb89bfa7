package publisher

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tranche/tranche/internal/netns"
)

// runBench starts a publisher over client with the given dialer until b ends.
func runBench(b *testing.B, client *fake.Clientset, dial dialFunc) {
	b.Helper()
	p := New(Config{Client: client, Dial: dial})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		<-done
	})
}

// BenchmarkFollow measures how long a change takes to reach the host: a NodePort
// Service created through the client until its listener accepts, and deleted until
// the port refuses. The limit is the 100 ms (fake clientset: the API
// server's own watch latency is not in the figure).
func BenchmarkFollow(b *testing.B) {
	client := fake.NewClientset(readyNode("n0", "10.240.0.10"))
	runBench(b, client, func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, fmt.Errorf("no backend in this benchmark")
	})
	time.Sleep(200 * time.Millisecond) // let the informers' watches start (fake clientset)
	ctx := context.Background()
	var up, down time.Duration
	for i := 0; i < b.N; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		name := fmt.Sprintf("svc-%d", i)
		svc := makeService(name, i, func(s *v1.Service) { s.Spec.Ports[0].NodePort = int32(port) })
		start := time.Now()
		if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		waitDial(b, addr, true)
		up += time.Since(start)
		start = time.Now()
		if err := client.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		waitDial(b, addr, false)
		down += time.Since(start)
	}
	limit := float64(100 * time.Millisecond)
	b.ReportMetric(float64(up)/float64(b.N)/1e6, "ms-to-publish")
	b.ReportMetric(float64(down)/float64(b.N)/1e6, "ms-to-unpublish")
	b.ReportMetric(float64(up)/float64(b.N)/limit, "publish/limit")
	b.ReportMetric(float64(down)/float64(b.N)/limit, "unpublish/limit")
}

// waitDial polls addr until a connection succeeds (open) or is refused (!open).
func waitDial(b *testing.B, addr string, open bool) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		if (err == nil) == open {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
	b.Fatalf("%s: open=%v not reached in 5s", addr, open)
}

// BenchmarkForwardTCP compares one short connection (connect, one line each way,
// close) through the publisher with the same connection made directly to the
// backend, in the same run: first with a plain dialer, then with the real one,
// netns.Dial into a network namespace (as root), where each dial runs on a fresh OS
// thread that joins the namespace.
func BenchmarkForwardTCP(b *testing.B) {
	b.Run("plain-dial", func(b *testing.B) {
		backend := tcpBackend(b, "b")
		var d net.Dialer
		benchForward(b, backend, func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, backend)
		})
	})
	b.Run("netns-dial", func(b *testing.B) {
		if os.Geteuid() != 0 {
			b.Fatal("needs root to create a network namespace")
		}
		name := fmt.Sprintf("tbench%d", os.Getpid())
		if err := netns.Create(name); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = netns.Delete(name) })
		links, err := netns.OpenLinks(name)
		if err != nil {
			b.Fatal(err)
		}
		err = links.LoUp()
		links.Close()
		if err != nil {
			b.Fatal(err)
		}
		ln, err := netns.Listen(name, "tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ln.Close() })
		go serveLines(ln, "b")
		backend := ln.Addr().String()
		// The direct peer must reach the backend too: it dials from inside as well,
		// so the comparison isolates what the publisher adds.
		benchForward(b, "", func(_ context.Context, network, _ string) (net.Conn, error) {
			return netns.Dial(name, network, backend, dialTimeout)
		})
	})
}

func serveLines(ln net.Listener, name string) {
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
}

// benchForward times b.N connections through a publisher and, as the peer, b.N
// connections with dial itself (direct is the backend's address when it is
// reachable from here, else "" to use dial).
func benchForward(b *testing.B, direct string, dial dialFunc) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	svc := makeService("web", 1, func(s *v1.Service) { s.Spec.Ports[0].NodePort = int32(port) })
	client := fake.NewClientset(readyNode("n0", "10.240.0.10"), svc)
	runBench(b, client, dial)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitDial(b, addr, true)
	once := func(c net.Conn, err error) {
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "hi\n"); err != nil {
			b.Fatal(err)
		}
		if got, err := io.ReadAll(c); err != nil || string(got) != "b hi\n" {
			b.Fatalf("answer %q, %v", got, err)
		}
	}
	b.ResetTimer()
	var via, peer time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		once(net.Dial("tcp", addr))
		via += time.Since(start)
		start = time.Now()
		if direct != "" {
			once(net.Dial("tcp", direct))
		} else {
			once(dial(context.Background(), "tcp", ""))
		}
		peer += time.Since(start)
	}
	b.ReportMetric(float64(via.Microseconds())/float64(b.N), "µs/conn-via-publisher")
	b.ReportMetric(float64(peer.Microseconds())/float64(b.N), "µs/conn-direct")
	b.ReportMetric(float64(via)/float64(peer), "via/direct")
}
