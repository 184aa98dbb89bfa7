package core

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// makeEndpoints returns a valid Endpoints "web" with one address and one port, after
// mutate.
func makeEndpoints(mutate func(*v1.Endpoints)) *v1.Endpoints {
	ep := &v1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", CreationTimestamp: svcTestCreated},
		Subsets: []v1.EndpointSubset{{
			Addresses: []v1.EndpointAddress{{IP: "10.244.1.5"}},
			Ports:     []v1.EndpointPort{{Port: 8080, Protocol: v1.ProtocolTCP}},
		}},
	}
	if mutate != nil {
		mutate(ep)
	}
	return ep
}

func epAddrs(ips ...string) []v1.EndpointAddress {
	var out []v1.EndpointAddress
	for _, ip := range ips {
		out = append(out, v1.EndpointAddress{IP: ip})
	}
	return out
}

func TestValidateEndpoints(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.Endpoints)
		want   []string
	}{
		{name: "valid", want: []string{}},
		{name: "no subsets", mutate: func(ep *v1.Endpoints) { ep.Subsets = nil }, want: []string{}},
		{name: "subset without addresses", mutate: func(ep *v1.Endpoints) { ep.Subsets[0].Addresses = nil },
			want: []string{"subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`"}},
		{name: "bad address", mutate: func(ep *v1.Endpoints) { ep.Subsets[0].NotReadyAddresses = epAddrs("10.244.1") },
			want: []string{
				`subsets[0].notReadyAddresses[0].ip: Invalid value: "10.244.1": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`,
				`subsets[0].notReadyAddresses[0].ip: Invalid value: "10.244.1": must be a valid IP address`,
			}},
		{name: "special addresses", mutate: func(ep *v1.Endpoints) { ep.Subsets[0].Addresses = epAddrs("127.0.0.1", "169.254.1.1") },
			want: []string{
				`subsets[0].addresses[0].ip: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`,
				`subsets[0].addresses[1].ip: Invalid value: "169.254.1.1": may not be in the link-local range (169.254.0.0/16, fe80::/10)`,
			}},
		{name: "hostname", mutate: func(ep *v1.Endpoints) { ep.Subsets[0].Addresses[0].Hostname = "Web_0" },
			want: []string{`subsets[0].addresses[0].hostname: Invalid value: "Web_0": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`}},
		{name: "ports need names when several", mutate: func(ep *v1.Endpoints) {
			ep.Subsets[0].Ports = []v1.EndpointPort{{Name: "http", Port: 80, Protocol: "TCP"}, {Port: 0, Protocol: "ICMP"}}
		}, want: []string{
			"subsets[0].ports[1].name: Required value",
			"subsets[0].ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive",
			`subsets[0].ports[1].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`,
		}},
		{name: "headless subsets have no ports", mutate: func(ep *v1.Endpoints) { ep.Subsets[0].Ports = nil }, want: []string{}},
	}
	r := EndpointsResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ep := makeEndpoints(tc.mutate)
			if diff := cmp.Diff(tc.want, svcErrs(r.Validate(ep))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, svcErrs(r.ValidateUpdate(ep, makeEndpoints(nil)))); diff != "" {
				t.Errorf("update errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEndpointsDefault(t *testing.T) {
	ep := makeEndpoints(func(ep *v1.Endpoints) { ep.Subsets[0].Ports[0].Protocol = "" })
	EndpointsResource().Default(ep)
	if got := ep.Subsets[0].Ports[0].Protocol; got != v1.ProtocolTCP {
		t.Errorf("protocol = %q, want TCP", got)
	}
}

func TestEndpointsRow(t *testing.T) {
	tests := []struct {
		name string
		ep   *v1.Endpoints
		want string
	}{
		{"none", makeEndpoints(func(ep *v1.Endpoints) { ep.Subsets = nil }), "<none>"},
		{"one", makeEndpoints(nil), "10.244.1.5:8080"},
		{"more than three", makeEndpoints(func(ep *v1.Endpoints) {
			ep.Subsets[0].Addresses = epAddrs("10.244.1.5", "10.244.2.3")
			ep.Subsets = append(ep.Subsets, v1.EndpointSubset{Addresses: epAddrs("10.244.3.1", "10.244.3.2"), Ports: []v1.EndpointPort{{Port: 8080}}})
		}), "10.244.1.5:8080,10.244.2.3:8080,10.244.3.1:8080 + 1 more..."},
		{"several ports", makeEndpoints(func(ep *v1.Endpoints) {
			ep.Subsets[0].Ports = []v1.EndpointPort{{Name: "a", Port: 80}, {Name: "b", Port: 443}}
		}), "10.244.1.5:80,10.244.1.5:443"},
		{"headless without ports", makeEndpoints(func(ep *v1.Endpoints) { ep.Subsets[0].Ports = nil }), "10.244.1.5"},
		{"IPv6", makeEndpoints(func(ep *v1.Endpoints) { ep.Subsets[0].Addresses = epAddrs("fd00::5") }), "[fd00::5]:8080"},
		{"only not-ready addresses", makeEndpoints(func(ep *v1.Endpoints) {
			ep.Subsets[0].NotReadyAddresses, ep.Subsets[0].Addresses = ep.Subsets[0].Addresses, nil
		}), ""},
	}
	r := EndpointsResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := []interface{}{"web", tc.want, "5m"}
			if diff := cmp.Diff(want, r.Row(tc.ep, svcTestNow)); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
}
