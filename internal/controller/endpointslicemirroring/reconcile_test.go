package endpointslicemirroring

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const ns = "demo"

func makeService(ns, name string, mutate func(*v1.Service)) *v1.Service {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "uid-svc"}}
	if mutate != nil {
		mutate(svc)
	}
	return svc
}

func makeEndpoints(ns, name string, mutate func(*v1.Endpoints)) *v1.Endpoints {
	ep := &v1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"team": "a"}},
		Subsets: []v1.EndpointSubset{{
			Addresses:         []v1.EndpointAddress{{IP: "192.168.1.10"}},
			NotReadyAddresses: []v1.EndpointAddress{{IP: "192.168.1.11"}},
			Ports:             []v1.EndpointPort{{Name: "db", Port: 5432, Protocol: v1.ProtocolTCP}},
		}},
	}
	if mutate != nil {
		mutate(ep)
	}
	return ep
}

func mirrored(ep *v1.Endpoints, name string, at discovery.AddressType, eps ...discovery.Endpoint) *discovery.EndpointSlice {
	s := newSlice(ep, &desired{at: at, ports: mirrorPorts(ep.Subsets[0].Ports), endpoints: eps})
	if name != "" {
		s.Name, s.GenerateName = name, ""
	}
	return s
}

func ep(ip string, ready bool) discovery.Endpoint {
	return discovery.Endpoint{Addresses: []string{ip}, Conditions: discovery.EndpointConditions{Ready: &ready}}
}

func TestReconcile(t *testing.T) {
	endpoints := makeEndpoints(ns, "db", nil)
	noSelector := makeService(ns, "db", nil)
	want := mirrored(endpoints, "", discovery.AddressTypeIPv4, ep("192.168.1.10", true), ep("192.168.1.11", false))
	tests := []struct {
		name     string
		ep       *v1.Endpoints
		svc      *v1.Service
		existing []*discovery.EndpointSlice
		want     plan
	}{{
		name: "endpoints of a selector-less service are mirrored",
		ep:   endpoints, svc: noSelector,
		want: plan{create: []*discovery.EndpointSlice{want}},
	}, {
		name: "an up-to-date mirror is left alone",
		ep:   endpoints, svc: noSelector,
		existing: []*discovery.EndpointSlice{mirrored(endpoints, "db-x", discovery.AddressTypeIPv4, ep("192.168.1.11", false), ep("192.168.1.10", true))},
	}, {
		name:     "a changed address updates the mirror in place",
		ep:       makeEndpoints(ns, "db", func(e *v1.Endpoints) { e.Subsets[0].NotReadyAddresses = nil }),
		svc:      noSelector,
		existing: []*discovery.EndpointSlice{mirrored(endpoints, "db-x", discovery.AddressTypeIPv4, ep("192.168.1.10", true), ep("192.168.1.11", false))},
		want:     plan{update: []*discovery.EndpointSlice{mirrored(endpoints, "db-x", discovery.AddressTypeIPv4, ep("192.168.1.10", true))}},
	}, {
		name:     "skip-mirror endpoints are not mirrored and lose their mirrors",
		ep:       makeEndpoints(ns, "db", func(e *v1.Endpoints) { e.Labels[discovery.LabelSkipMirror] = "true" }),
		svc:      noSelector,
		existing: []*discovery.EndpointSlice{mirrored(endpoints, "db-x", discovery.AddressTypeIPv4)},
		want:     plan{delete: []*discovery.EndpointSlice{mirrored(endpoints, "db-x", discovery.AddressTypeIPv4)}},
	}, {
		name: "a service with a selector is not mirrored",
		ep:   endpoints,
		svc:  makeService(ns, "db", func(s *v1.Service) { s.Spec.Selector = map[string]string{"app": "db"} }),
	}, {
		name: "no service, no mirror",
		ep:   endpoints,
	}, {
		name: "IPv6 addresses go to their own slice, invalid ones are skipped",
		ep: makeEndpoints(ns, "db", func(e *v1.Endpoints) {
			e.Subsets[0].Addresses = []v1.EndpointAddress{{IP: "fd00::1"}, {IP: "not-an-ip"}}
			e.Subsets[0].NotReadyAddresses = nil
		}),
		svc: noSelector,
		want: plan{
			create:  []*discovery.EndpointSlice{mirrored(endpoints, "", discovery.AddressTypeIPv6, ep("fd00::1", true))},
			invalid: 1, skipped: 1,
		},
	}, {
		name: "slices managed by others are ignored",
		ep:   endpoints, svc: noSelector,
		existing: []*discovery.EndpointSlice{func() *discovery.EndpointSlice {
			s := mirrored(endpoints, "db-other", discovery.AddressTypeIPv4)
			s.Labels[discovery.LabelManagedBy] = "someone-else"
			return s
		}()},
		want: plan{create: []*discovery.EndpointSlice{want}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := reconcile(tc.ep, tc.svc, tc.existing, MaxEndpointsPerSubset)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(plan{}), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReconcileMirrorsAtMost1000PerSubset(t *testing.T) {
	e := makeEndpoints(ns, "db", func(e *v1.Endpoints) {
		e.Subsets[0].NotReadyAddresses = nil
		e.Subsets[0].Addresses = nil
		for i := range 1200 {
			e.Subsets[0].Addresses = append(e.Subsets[0].Addresses, v1.EndpointAddress{IP: fmt.Sprintf("10.1.%d.%d", i/250, i%250)})
		}
	})
	got := reconcile(e, makeService(ns, "db", nil), nil, MaxEndpointsPerSubset)
	if len(got.create) != 1 || len(got.create[0].Endpoints) != 1000 || got.skipped != 200 {
		t.Fatalf("got %d slices, skipped %d", len(got.create), got.skipped)
	}
	ref := got.create[0].OwnerReferences[0]
	if ref.Kind != "Endpoints" || ref.Name != "db" || got.create[0].Labels[discovery.LabelServiceName] != "db" {
		t.Errorf("owner %+v labels %v", ref, got.create[0].Labels)
	}
}
