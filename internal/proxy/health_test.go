package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestHealthServerStaleness(t *testing.T) {
	now := time.Unix(1000, 0)
	h := NewHealthServer(time.Minute, func() time.Time { return now })
	get := func(path string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil && rec.Code != http.StatusNotFound {
			t.Fatalf("%s: %v: %s", path, err, rec.Body)
		}
		return rec.Code, body
	}
	steps := []struct {
		name             string
		do               func()
		healthz, livez   int
		wantNodeEligible bool
	}{
		{"first sync pending, recent", func() {}, 200, 200, true},
		{"first sync pending too long", func() { now = now.Add(61 * time.Second) }, 503, 503, true},
		{"synced", h.Updated, 200, 200, true},
		{"synced long ago, nothing pending", func() { now = now.Add(time.Hour) }, 200, 200, true},
		{"change queued", h.QueuedUpdate, 200, 200, true},
		{"change waited too long", func() { now = now.Add(2 * time.Minute); h.QueuedUpdate() }, 503, 503, true},
		{"synced again", h.Updated, 200, 200, true},
		{"node being deleted", func() { h.SetNodeEligible(false) }, 503, 200, false},
	}
	for _, s := range steps {
		s.do()
		code, body := get("/healthz")
		if code != s.healthz || body["nodeEligible"] != s.wantNodeEligible {
			t.Errorf("%s: /healthz %d %v, want %d nodeEligible=%v", s.name, code, body, s.healthz, s.wantNodeEligible)
		}
		if code, _ := get("/livez"); code != s.livez {
			t.Errorf("%s: /livez %d, want %d", s.name, code, s.livez)
		}
	}
	if code, _ := get("/other"); code != http.StatusNotFound {
		t.Errorf("/other: %d", code)
	}
}

func TestServiceHealthServer(t *testing.T) {
	listeners := map[int32]net.Listener{}
	s := NewServiceHealthServer(func(port int32) (net.Listener, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		listeners[port] = ln
		return ln, err
	}, nil, nil)
	defer s.Close()
	svc := types.NamespacedName{Namespace: "demo", Name: "web"}
	get := func(port int32) (int, string) {
		resp, err := http.Get(fmt.Sprintf("http://%s/", listeners[port].Addr()))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if err := s.Sync(map[types.NamespacedName]ServiceHealth{svc: {Port: 31000, LocalEndpoints: 2}}); err != nil {
		t.Fatal(err)
	}
	if code, body := get(31000); code != 200 || body != `{"localEndpoints":2,"service":{"name":"web","namespace":"demo"},"serviceProxyHealthy":true}`+"\n" {
		t.Errorf("with local endpoints: %d %s", code, body)
	}
	if err := s.Sync(map[types.NamespacedName]ServiceHealth{svc: {Port: 31000}}); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(31000); code != 503 {
		t.Errorf("without local endpoints: %d", code)
	}
	if err := s.Sync(nil); err != nil {
		t.Fatal(err)
	}
	if len(s.Ports()) != 0 {
		t.Errorf("ports left: %v", s.Ports())
	}
	if _, err := http.Get(fmt.Sprintf("http://%s/", listeners[31000].Addr())); err == nil {
		t.Errorf("port still answers after the service went")
	}
}

func TestServiceHealthCounts(t *testing.T) {
	p, _ := newTestProxier(t)
	svc := makeService("demo", "lb", "10.96.0.30", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 30090
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 31090
	})
	p.OnServiceAdd(svc)
	p.OnEndpointSliceAdd(makeSlice("demo", "lb", "lb-1", httpPorts, ready("10.244.1.5", testNode), ready("10.244.1.6", testNode),
		ep{ip: "10.244.1.7", serving: true, terminating: true, node: testNode}, ready("10.244.2.5", "node-b")))
	mustSync(t, p)
	want := ServiceHealth{Port: 31090, LocalEndpoints: 2}
	if got := p.health[types.NamespacedName{Namespace: "demo", Name: "lb"}]; got != want {
		t.Errorf("health %+v, want %+v", got, want)
	}
	p.OnServiceDelete(svc)
	mustSync(t, p)
	if len(p.health) != 0 {
		t.Errorf("health left after the service went: %v", p.health)
	}
}
