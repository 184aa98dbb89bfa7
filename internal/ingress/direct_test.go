package ingress

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/utils/ptr"
)

// TestBackendConnections: the proxy keeps one connection to a backend for sequential
// requests, and a kept connection the backend closed meanwhile costs no failure.
func TestBackendConnections(t *testing.T) {
	var conns atomic.Int32
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	backend.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	backend.Start()
	t.Cleanup(backend.Close)
	f := NewFake(defaultClass(), makeIngress("default", "i", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.DefaultBackend = ptr.To(svcBackend("s", 80))
	}))
	serviceFor(t, f, "default", "s", backend.URL)
	p := NewProxy(ProxyConfig{})
	p.SetTable(Build(f))
	front := httptest.NewServer(p)
	defer front.Close()

	for range 10 {
		if code, body := get(t, front.Client(), front.URL+"/", "x", nil); code != 200 || body != "ok" {
			t.Fatalf("got %d %q", code, body)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d backend connections for 10 sequential requests, want 1", n)
	}
	backend.CloseClientConnections()
	for range 3 {
		if code, body := get(t, front.Client(), front.URL+"/", "x", nil); code != 200 || body != "ok" {
			t.Fatalf("after the backend closed the kept connection: %d %q", code, body)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d backend connections, want 2 (one more after the close)", n)
	}
}

// TestIdleSweep: connections to an endpoint nobody asks for again are closed once they
// idled longer than the idle time.
func TestIdleSweep(t *testing.T) {
	tr := &directTransport{maxIdle: 4, idleTime: time.Minute}
	old, _ := net.Pipe()
	now := time.Now()
	tr.idle = map[string][]*backendConn{"10.0.0.1:80": {{conn: old, used: now.Add(-2 * time.Minute)}}}
	fresh, _ := net.Pipe()
	tr.put("10.0.0.2:80", &backendConn{conn: fresh})
	if _, ok := tr.idle["10.0.0.1:80"]; ok {
		t.Errorf("the stale endpoint's connection is still pooled: %v", tr.idle)
	}
	if _, err := old.Write([]byte("x")); err == nil {
		t.Error("the stale connection was not closed")
	}
	if len(tr.idle["10.0.0.2:80"]) != 1 {
		t.Errorf("the fresh connection was not pooled: %v", tr.idle)
	}
}
