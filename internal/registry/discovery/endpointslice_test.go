package discovery

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// makeSlice returns a valid IPv4 slice with one endpoint and one port, changed by mutate.
func makeSlice(mutate func(*discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-abc12", CreationTimestamp: metav1.NewTime(created)},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.2"}}},
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Protocol: new(corev1.ProtocolTCP), Port: new(int32(80))}},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func endpoints(addrs ...string) []discoveryv1.Endpoint {
	var eps []discoveryv1.Endpoint
	for _, a := range addrs {
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{a}})
	}
	return eps
}

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestValidateEndpointSlice(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*discoveryv1.EndpointSlice)
		want   []string
	}{
		{name: "valid"},
		{name: "valid FQDN", mutate: func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeFQDN
			s.Endpoints = endpoints("db.example.com")
		}},
		{name: "valid IPv6 and nil port", mutate: func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeIPv6
			s.Endpoints = endpoints("fd00::5")
			s.Ports[0].Port = nil
		}},
		{name: "no endpoints and no ports", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints, s.Ports = nil, nil
		}},
		{name: "addressType required", mutate: func(s *discoveryv1.EndpointSlice) { s.AddressType = "" },
			want: []string{"addressType: Required value"}},
		{name: "addressType unsupported", mutate: func(s *discoveryv1.EndpointSlice) { s.AddressType = "IP" },
			want: []string{`addressType: Unsupported value: "IP": supported values: "FQDN", "IPv4", "IPv6"`}},
		{name: "too many endpoints", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = make([]discoveryv1.Endpoint, 1001)
		}, want: []string{"endpoints: Too many: 1001: must have at most 1000 items"}},
		{name: "endpoint without address", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints[0].Addresses = nil
		}, want: []string{"endpoints[0].addresses: Required value: must contain at least 1 address"}},
		{name: "too many addresses", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints[0].Addresses = make([]string, 101)
			for i := range s.Endpoints[0].Addresses {
				s.Endpoints[0].Addresses[i] = "10.0.0.1"
			}
		}, want: []string{"endpoints[0].addresses: Too many: 101: must have at most 100 items"}},
		{name: "not an IP", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints = endpoints("10.0.0") },
			want: []string{`endpoints[0].addresses[0]: Invalid value: "10.0.0": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`}},
		{name: "leading zeros", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints = endpoints("10.0.0.01") },
			want: []string{`endpoints[0].addresses[0]: Invalid value: "10.0.0.01": must not have leading 0s`}},
		{name: "IPv6 address in IPv4 slice", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints = endpoints("fd00::1") },
			want: []string{`endpoints[0].addresses[0]: Invalid value: "fd00::1": must be a valid IPv4 address`}},
		{name: "IPv4 address in IPv6 slice", mutate: func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeIPv6
			s.Endpoints = endpoints("10.0.0.1")
		}, want: []string{`endpoints[0].addresses[0]: Invalid value: "10.0.0.1": must be a valid IPv6 address`}},
		{name: "loopback", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints = endpoints("127.0.0.1") },
			want: []string{`endpoints[0].addresses[0]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`}},
		{name: "unspecified", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints = endpoints("0.0.0.0") },
			want: []string{`endpoints[0].addresses[0]: Invalid value: "0.0.0.0": may not be unspecified (0.0.0.0)`}},
		{name: "link-local", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints = endpoints("169.254.169.254") },
			want: []string{`endpoints[0].addresses[0]: Invalid value: "169.254.169.254": may not be in the link-local range (169.254.0.0/16, fe80::/10)`}},
		{name: "link-local multicast", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints = endpoints("224.0.0.1") },
			want: []string{`endpoints[0].addresses[0]: Invalid value: "224.0.0.1": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)`}},
		{name: "bad FQDN", mutate: func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeFQDN
			s.Endpoints = endpoints("nodots")
		}, want: []string{`endpoints[0].addresses[0]: Invalid value: "nodots": should be a domain with at least two segments separated by dots`}},
		{name: "bad hostname", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Hostname = new("Web_1") },
			want: []string{`endpoints[0].hostname: Invalid value: "Web_1": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`}},
		{name: "bad nodeName", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].NodeName = new("Node_1") },
			want: []string{`endpoints[0].nodeName: Invalid value: "Node_1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{name: "conditions and zone are free-form", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints[0].Conditions = discoveryv1.EndpointConditions{Ready: new(false), Serving: new(true), Terminating: new(true)}
			s.Endpoints[0].Zone = new("zone-a")
		}},
		{name: "duplicate zone hint", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints[0].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "a"}, {Name: "a"}}}
		}, want: []string{`endpoints[0].hints.forZones[1].name: Duplicate value: "a"`}},
		{name: "bad zone hint", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints[0].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "a b"}}}
		}, want: []string{`endpoints[0].hints.forZones[0].name: Invalid value: "a b": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`}},
		{name: "too many zone hints", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints[0].Hints = &discoveryv1.EndpointHints{ForZones: make([]discoveryv1.ForZone, 9)}
		}, want: []string{"endpoints[0].hints.forZones: Too many: 9: must have at most 8 items"}},
		{name: "duplicate node hint", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints[0].Hints = &discoveryv1.EndpointHints{ForNodes: []discoveryv1.ForNode{{Name: "n1"}, {Name: "n1"}}}
		}, want: []string{`endpoints[0].hints.forNodes[1].name: Duplicate value: "n1"`}},
		{name: "bad port name", mutate: func(s *discoveryv1.EndpointSlice) { s.Ports[0].Name = new("HTTP") },
			want: []string{`ports[0].name: Invalid value: "HTTP": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`}},
		{name: "duplicate port name", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: new("http"), Protocol: new(corev1.ProtocolUDP), Port: new(int32(81))})
		}, want: []string{`ports[1].name: Duplicate value: "http"`}},
		{name: "two unnamed ports", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Ports = []discoveryv1.EndpointPort{{Protocol: new(corev1.ProtocolTCP)}, {Protocol: new(corev1.ProtocolUDP)}}
		}, want: []string{`ports[1].name: Duplicate value: ""`}},
		{name: "too many ports", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Ports = make([]discoveryv1.EndpointPort, 20001)
		}, want: []string{"ports: Too many: 20001: must have at most 20000 items"}},
		{name: "protocol required", mutate: func(s *discoveryv1.EndpointSlice) { s.Ports[0].Protocol = nil },
			want: []string{"ports[0].protocol: Required value"}},
		{name: "protocol unsupported", mutate: func(s *discoveryv1.EndpointSlice) { s.Ports[0].Protocol = new(corev1.Protocol("ICMP")) },
			want: []string{`ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`}},
		{name: "port out of range", mutate: func(s *discoveryv1.EndpointSlice) { s.Ports[0].Port = new(int32(65536)) },
			want: []string{"ports[0].port: Invalid value: 65536: must be between 0 and 65535, inclusive"}},
		{name: "bad appProtocol", mutate: func(s *discoveryv1.EndpointSlice) { s.Ports[0].AppProtocol = new("-h2c") },
			want: []string{`ports[0].appProtocol: Invalid value: "-h2c": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`}},
		{name: "good appProtocol", mutate: func(s *discoveryv1.EndpointSlice) { s.Ports[0].AppProtocol = new("kubernetes.io/h2c") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(ValidateEndpointSlice(makeSlice(tc.mutate)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateEndpointSliceUpdate(t *testing.T) {
	old := makeSlice(nil)
	got := errStrings(ValidateEndpointSliceUpdate(makeSlice(func(s *discoveryv1.EndpointSlice) {
		s.AddressType = discoveryv1.AddressTypeFQDN
		s.Endpoints = endpoints("a.example.com")
	}), old))
	want := []string{`addressType: Invalid value: "FQDN": field is immutable`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if errs := ValidateEndpointSliceUpdate(makeSlice(nil), old); len(errs) != 0 {
		t.Errorf("unchanged slice: %v", errs)
	}
}

func TestDefaultEndpointSlice(t *testing.T) {
	s := makeSlice(func(s *discoveryv1.EndpointSlice) {
		s.Ports = []discoveryv1.EndpointPort{{Port: new(int32(53))}, {Name: new("dns"), Protocol: new(corev1.ProtocolUDP)}}
	})
	EndpointSliceResource().Default(s)
	want := []discoveryv1.EndpointPort{
		{Name: new(""), Protocol: new(corev1.ProtocolTCP), Port: new(int32(53))},
		{Name: new("dns"), Protocol: new(corev1.ProtocolUDP)},
	}
	if diff := cmp.Diff(want, s.Ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
}

func TestPrepareDropsDeprecatedTopology(t *testing.T) {
	r := EndpointSliceResource()
	withTopology := func(s *discoveryv1.EndpointSlice) {
		s.Endpoints[0].DeprecatedTopology = map[string]string{"kubernetes.io/hostname": "n1"}
	}
	created := makeSlice(withTopology)
	r.PrepareForCreate(created)
	if created.Endpoints[0].DeprecatedTopology != nil {
		t.Errorf("create kept deprecatedTopology")
	}
	unchanged := makeSlice(withTopology)
	r.PrepareForUpdate(unchanged, makeSlice(withTopology))
	if unchanged.Endpoints[0].DeprecatedTopology == nil {
		t.Errorf("update with unchanged endpoints dropped deprecatedTopology")
	}
	changed := makeSlice(func(s *discoveryv1.EndpointSlice) { withTopology(s); s.Endpoints[0].Addresses = []string{"10.0.0.9"} })
	r.PrepareForUpdate(changed, makeSlice(withTopology))
	if changed.Endpoints[0].DeprecatedTopology != nil {
		t.Errorf("update with changed endpoints kept deprecatedTopology")
	}
}

func TestEndpointSliceRow(t *testing.T) {
	now := created.Add(90 * time.Second)
	tcp := new(corev1.ProtocolTCP)
	tests := []struct {
		name   string
		mutate func(*discoveryv1.EndpointSlice)
		want   []interface{}
	}{
		{name: "no endpoints", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints = nil },
			want: []interface{}{"web-abc12", "IPv4", "80", "<unset>", "90s"}},
		{name: "one endpoint",
			want: []interface{}{"web-abc12", "IPv4", "80", "10.244.1.2", "90s"}},
		{name: "three endpoints", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = endpoints("10.244.1.2", "10.244.1.3", "10.244.2.2")
		}, want: []interface{}{"web-abc12", "IPv4", "80", "10.244.1.2,10.244.1.3,10.244.2.2", "90s"}},
		{name: "five endpoints", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = endpoints("10.244.1.2", "10.244.1.3", "10.244.2.2", "10.244.2.3", "10.244.3.2")
		}, want: []interface{}{"web-abc12", "IPv4", "80", "10.244.1.2,10.244.1.3,10.244.2.2 + 2 more...", "90s"}},
		{name: "addresses counted across endpoints", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1", "10.0.0.2"}}, {Addresses: []string{"10.0.0.3", "10.0.0.4"}}}
		}, want: []interface{}{"web-abc12", "IPv4", "80", "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...", "90s"}},
		{name: "no ports", mutate: func(s *discoveryv1.EndpointSlice) { s.Ports = nil },
			want: []interface{}{"web-abc12", "IPv4", "<unset>", "10.244.1.2", "90s"}},
		{name: "nil port with a name", mutate: func(s *discoveryv1.EndpointSlice) { s.Ports[0].Port = nil },
			want: []interface{}{"web-abc12", "IPv4", "http", "10.244.1.2", "90s"}},
		{name: "nil port without a name", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Ports = []discoveryv1.EndpointPort{{Protocol: tcp}}
		}, want: []interface{}{"web-abc12", "IPv4", "*", "10.244.1.2", "90s"}},
		{name: "two ports", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: new("https"), Protocol: tcp, Port: new(int32(443))})
		}, want: []interface{}{"web-abc12", "IPv4", "80,443", "10.244.1.2", "90s"}},
		{name: "five ports", mutate: func(s *discoveryv1.EndpointSlice) {
			s.Ports = nil
			for _, p := range []int32{80, 443, 8080, 8443, 9090} {
				s.Ports = append(s.Ports, discoveryv1.EndpointPort{Protocol: tcp, Port: new(p)})
			}
		}, want: []interface{}{"web-abc12", "IPv4", "80,443,8080 + 2 more...", "10.244.1.2", "90s"}},
	}
	r := EndpointSliceResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Row(makeSlice(tc.mutate), now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
			if len(got) != len(r.Columns) {
				t.Errorf("row has %d cells for %d columns", len(got), len(r.Columns))
			}
		})
	}
}

func TestEndpointSliceColumns(t *testing.T) {
	var names []string
	for _, c := range EndpointSliceResource().Columns {
		names = append(names, strings.ToUpper(c.Name))
	}
	if diff := cmp.Diff([]string{"NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
}

func TestHooksTolerateForeignObjects(t *testing.T) {
	r := EndpointSliceResource()
	var nilSlice *discoveryv1.EndpointSlice
	r.PrepareForCreate(nilSlice)
	r.PrepareForUpdate(nilSlice, nilSlice)
	r.Default(nilSlice)
	if errs := r.Validate(nilSlice); errs != nil {
		t.Errorf("Validate(nil) = %v", errs)
	}
	if errs := r.ValidateUpdate(nilSlice, nilSlice); errs != nil {
		t.Errorf("ValidateUpdate(nil) = %v", errs)
	}
	if row := r.Row(&corev1.Pod{}, created); row != nil {
		t.Errorf("Row(pod) = %v", row)
	}
}
