package dns

import (
	"context"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestInformerCache: the production cache indexes what the API holds as the fake does,
// keeps pods stripped, and reports synced once its informers listed.
func TestInformerCache(t *testing.T) {
	client := fake.NewClientset(
		makeNamespace("demo"),
		makeService("demo", "api-svc", func(s *v1.Service) { s.Spec.ClusterIP = "10.96.0.20" }),
		makeSlice("demo", "api-svc", "api-svc-x1", func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = []discoveryv1.Endpoint{ep("10.244.1.5", true, "")}
		}),
		makePod("demo", "client", "10.244.1.9", func(p *v1.Pod) {
			p.Labels = map[string]string{"big": "label"}
			p.Spec.Containers = []v1.Container{{Name: "c", Image: "busybox"}}
		}),
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := NewInformerCache(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !c.Synced() {
		if time.Now().After(deadline) {
			t.Fatal("informer cache not synced after 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if svcs := c.ServicesByIP(netip.MustParseAddr("10.96.0.20")); len(svcs) != 1 || svcs[0].Name != "api-svc" {
		t.Fatalf("ServicesByIP: %v", svcs)
	}
	if s := c.EndpointSlices("demo", "api-svc"); len(s) != 1 {
		t.Fatalf("EndpointSlices: %v", s)
	}
	if s := c.EndpointSlicesByIP(netip.MustParseAddr("10.244.1.5")); len(s) != 1 {
		t.Fatalf("EndpointSlicesByIP: %v", s)
	}
	if p, ok := c.PodByIP(netip.MustParseAddr("10.244.1.9")); !ok || p != (PodInfo{Namespace: "demo", Name: "client", StandardSearch: true}) {
		t.Fatalf("PodByIP: %+v %v", p, ok)
	}
	if !c.NamespaceExists("demo") || c.NamespaceExists("nope") || !c.HasServices("demo") || c.HasServices("nope") {
		t.Fatal("namespace lookups")
	}
	objs := c.(*stores).pods.List()
	if len(objs) != 1 || len(objs[0].(*v1.Pod).Spec.Containers) != 0 || objs[0].(*v1.Pod).Labels != nil {
		t.Fatalf("pods are not stripped: %+v", objs)
	}
}
