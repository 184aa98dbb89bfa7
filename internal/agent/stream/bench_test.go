package stream

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// BenchmarkPortForwardEndpoint measures the endpoint alone: 64 MiB read through
// client-go's port-forward (SPDY, and SPDY in a WebSocket) from a loopback server,
// beside the same read straight from that server.
func BenchmarkPortForwardEndpoint(b *testing.B) {
	const size = 64 << 20
	src, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	chunk := make([]byte, 1<<20)
	go func() {
		for {
			c, err := src.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for range size / len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
		}
	}()
	read := func(addr string) float64 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		n, err := io.Copy(io.Discard, c)
		if err != nil || n != size {
			b.Fatalf("read %d bytes, %v", n, err)
		}
		return float64(n) / (1 << 20) / time.Since(start).Seconds()
	}
	srv, _ := New(Config{Runtime: &fakeRuntime{running: true}, DialPod: func(string, uint16) (net.Conn, error) {
		return net.Dial("tcp", src.Addr().String())
	}})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	u, _ := url.Parse(ts.URL + "/portForward/ns/pod/uid")
	cfg := &rest.Config{Host: ts.URL}
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	tunnel, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	if err != nil {
		b.Fatal(err)
	}
	direct := read(src.Addr().String())
	for _, d := range []struct {
		name   string
		dialer httpstream.Dialer
	}{{"spdy", spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u)}, {"websocket", tunnel}} {
		stop, ready := make(chan struct{}), make(chan struct{})
		pf, err := portforward.New(d.dialer, []string{"0:80"}, stop, ready, io.Discard, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		go func() { _ = pf.ForwardPorts() }()
		<-ready
		ports, _ := pf.GetPorts()
		var best float64
		for range 3 {
			best = max(best, read(fmt.Sprintf("127.0.0.1:%d", ports[0].Local)))
		}
		close(stop)
		b.ReportMetric(best, d.name+"-MB/s")
		fmt.Printf("port-forward endpoint (%s, client-go, no TLS): %.0f MB/s, direct %.0f MB/s, ratio %.2f\n", d.name, best, direct, best/direct)
	}
}
