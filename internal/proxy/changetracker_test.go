package proxy

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestServiceChangeTracker(t *testing.T) {
	tests := []struct {
		name    string
		prev    *v1.Service
		cur     *v1.Service
		changed bool
	}{
		{"add", nil, makeService("ns", "a", "10.96.0.1", nil), true},
		{"headless", nil, makeService("ns", "a", "None", nil), false},
		{"other proxy", nil, makeService("ns", "a", "10.96.0.1", func(s *v1.Service) {
			s.Labels = map[string]string{LabelServiceProxyName: "other"}
		}), false},
		{"external name", nil, makeService("ns", "a", "", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName }), false},
		{"label only", makeService("ns", "a", "10.96.0.1", nil), makeService("ns", "a", "10.96.0.1", func(s *v1.Service) {
			s.Labels = map[string]string{"x": "y"}
		}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewServiceChangeTracker()
			if tc.prev != nil {
				tr.Update(nil, tc.prev)
				tr.Drain()
			}
			got := tr.Update(tc.prev, tc.cur)
			if drained := tr.Drain().Len() > 0; got != tc.changed || drained != tc.changed {
				t.Errorf("Update = %v, drained %v, want %v", got, drained, tc.changed)
			}
		})
	}
	t.Run("undone before drain", func(t *testing.T) {
		tr := NewServiceChangeTracker()
		a := makeService("ns", "a", "10.96.0.1", nil)
		tr.Update(nil, a)
		tr.Update(a, nil)
		if n := tr.Drain().Len(); n != 0 {
			t.Errorf("add then delete left %d changes", n)
		}
	})
}

func TestEndpointsChangeTracker(t *testing.T) {
	tr := NewEndpointsChangeTracker(DefaultConfig(testNode).ServiceCIDR)
	name := types.NamespacedName{Namespace: "ns", Name: "a"}
	s1 := makeSlice("ns", "a", "a-1", httpPorts, ep{ip: "10.244.1.1", node: testNode}, ready("10.244.1.2", testNode))
	s2 := makeSlice("ns", "a", "a-2", httpPorts, ready("10.244.1.1", testNode))
	if !tr.Update(s1, false) || !tr.Update(s2, false) {
		t.Fatal("adds reported no change")
	}
	changed, _ := tr.Drain()
	if !changed.Has(name) {
		t.Fatalf("drained %v", changed)
	}
	got := fmt.Sprint(tr.Endpoints(name))
	want := fmt.Sprint(map[ServicePortName][]Endpoint{{NamespacedName: name, Port: "http", Protocol: v1.ProtocolTCP}: {
		{IP: mustAddr("10.244.1.1"), Port: 8080, Ready: true, Serving: true, NodeName: testNode},
		{IP: mustAddr("10.244.1.2"), Port: 8080, Ready: true, Serving: true, NodeName: testNode},
	}})
	if got != want {
		t.Errorf("merged endpoints:\n got %s\nwant %s", got, want)
	}
	if tr.Update(s2, false) {
		t.Error("re-adding the same slice reported a change")
	}
	if !tr.Update(s2, true) {
		t.Error("deleting the slice that made 10.244.1.1 ready reported no change")
	}
	if tr.Update(makeSlice("ns", "", "orphan", httpPorts), false) {
		t.Error("a slice without a service label was tracked")
	}
}
