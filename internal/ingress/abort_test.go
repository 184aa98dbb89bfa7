package ingress

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/utils/ptr"
)

// silentBackend accepts connections and reads requests without ever answering: got
// receives once per connection when a request head arrived, eof when the connection
// ended (the proxy closed it).
type silentBackend struct {
	ln       net.Listener
	got, eof chan struct{}
}

func newSilentBackend(t *testing.T) *silentBackend {
	b := &silentBackend{got: make(chan struct{}, 16), eof: make(chan struct{}, 16)}
	b.ln = acceptEach(t, func(c net.Conn) {
		defer c.Close()
		var seen []byte
		buf := make([]byte, 64<<10)
		told := false
		for {
			n, err := c.Read(buf)
			if seen = append(seen, buf[:n]...); !told && bytes.Contains(seen, crlfcrlf) {
				told = true
				b.got <- struct{}{}
			}
			if err != nil {
				b.eof <- struct{}{}
				return
			}
		}
	})
	return b
}

// acceptEach listens on a loopback port until t ends and runs handle on each connection
// in a goroutine of its own.
func acceptEach(t *testing.T, handle func(net.Conn)) net.Listener {
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
			go handle(c)
		}
	}()
	return ln
}

// within waits for ch until a deadline; false when it passed.
func within(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// proxyTo serves every request through Serve to backend, with an access log and metrics.
func proxyTo(t *testing.T, backend string) (*Proxy, addrs, *syncBuffer, *prometheus.Registry) {
	f := NewFake(defaultClass(), makeIngress("default", "i", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.DefaultBackend = ptr.To(svcBackend("s", 80))
	}))
	serviceFor(t, f, "default", "s", backend)
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	log, flushed := NewAccessLogger(ctx, out)
	t.Cleanup(func() { cancel(); <-flushed })
	reg := prometheus.NewRegistry()
	p := NewProxy(ProxyConfig{MaxBodyBytes: 1 << 20, Attempts: 1, AccessLog: true, AccessLogger: log, Metrics: NewMetrics(reg)})
	p.SetTable(Build(f))
	return p, startServe(t, p, 0), out, reg
}

// requestsWithCode is what tranche_ingress_requests_total counts for code.
func requestsWithCode(t *testing.T, reg *prometheus.Registry, code string) float64 {
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == code {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// TestClientAbort: a client that closes its connection while the backend has not
// answered makes the proxy close the backend connection (the backend sees EOF), and the
// request is logged and counted with status 499; on the lean path, and on the general
// one for a request handed to net/http.
func TestClientAbort(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
		req  string
	}{
		{"GET", false, "GET /poll HTTP/1.1\r\nHost: h.test\r\n\r\n"},
		{"POST with Content-Length", false, "POST /poll HTTP/1.1\r\nHost: h.test\r\nContent-Length: 5\r\n\r\nhello"},
		{"POST chunked", false, "POST /poll HTTP/1.1\r\nHost: h.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{"POST with a body too large to keep", false, "POST /poll HTTP/1.1\r\nHost: h.test\r\nContent-Length: 100000\r\n\r\n" + bigBody(100000)},
		{"GET over TLS", true, "GET /poll HTTP/1.1\r\nHost: h.test\r\n\r\n"},
		{"POST over TLS", true, "POST /poll HTTP/1.1\r\nHost: h.test\r\nContent-Length: 5\r\n\r\nhello"},
		{"HTTP/1.0, handed to net/http", false, "GET /poll HTTP/1.0\r\nHost: h.test\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backend := newSilentBackend(t)
			_, a, log, reg := proxyTo(t, "http://"+backend.ln.Addr().String())
			var c net.Conn
			var err error
			if tc.tls {
				c, err = tls.Dial("tcp", a.https, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
			} else {
				c, err = net.Dial("tcp", a.http)
			}
			if err != nil {
				t.Fatal(err)
			}
			rc := dialRaw(t, c)
			rc.send(tc.req)
			if !within(backend.got, 10*time.Second) {
				t.Fatal("the backend did not get the request")
			}
			c.Close()
			if !within(backend.eof, 10*time.Second) {
				t.Fatal("the backend connection is still open 10 s after the client left")
			}
			for deadline := time.Now().Add(10 * time.Second); ; {
				logged := strings.Contains(log.String(), "status=499")
				counted := requestsWithCode(t, reg, "499")
				if logged && counted == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("access log has status=499: %v, requests counted with code 499: %v; log:\n%s", logged, counted, log.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestLeanPipelinedWhileWatched: requests pipelined behind one the backend is slow to
// answer are not taken for a client that left, even when the client then shuts its
// sending side; every answer comes, in order.
func TestLeanPipelinedWhileWatched(t *testing.T) {
	got := make(chan struct{}, 1)
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			got <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "answer to "+r.URL.Path)
	}))
	t.Cleanup(backend.Close)
	t.Cleanup(func() { close(release) })
	p, a, _, _ := proxyTo(t, backend.URL)
	for _, tc := range []struct {
		name      string
		tls       bool
		halfClose bool
	}{
		{"pipelined", false, false},
		{"pipelined, then the client shuts its sending side", false, true},
		{"pipelined over TLS", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c net.Conn
			var err error
			if tc.tls {
				c, err = tls.Dial("tcp", a.https, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
			} else {
				c, err = net.Dial("tcp", a.http)
			}
			if err != nil {
				t.Fatal(err)
			}
			rc := dialRaw(t, c)
			rc.send("GET /slow HTTP/1.1\r\nHost: h.test\r\n\r\n")
			if !within(got, 10*time.Second) {
				t.Fatal("the backend did not get the slow request")
			}
			// The proxy is not reading now: these stay unread on the socket while the
			// front checks the client.
			rc.send("GET /a HTTP/1.1\r\nHost: h.test\r\n\r\nGET /b HTTP/1.1\r\nHost: h.test\r\n\r\n")
			if tc.halfClose {
				if err := c.(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
			}
			// Two more checks: one of them began after the requests were sent.
			for base, deadline := p.clientChecks.Load(), time.Now().Add(10*time.Second); p.clientChecks.Load() < base+2; {
				if time.Now().After(deadline) {
					t.Fatal("the front did not check the connection")
				}
				time.Sleep(10 * time.Millisecond)
			}
			release <- struct{}{}
			for _, want := range []string{"answer to /slow", "answer to /a", "answer to /b"} {
				if got := rc.read("GET"); got.status != 200 || got.body != want {
					t.Fatalf("got %d %q, want 200 %q", got.status, got.body, want)
				}
			}
		})
	}
}
