package core

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// svcTestNow is the fixed clock of every table test; objects are created 5 minutes before.
var (
	svcTestNow     = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	svcTestCreated = metav1.NewTime(svcTestNow.Add(-5 * time.Minute))
)

func svcPtr[T any](v T) *T { return &v }

// svcErrs renders errors the way the API server reports them, in order.
func svcErrs(errs field.ErrorList) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// makeService returns a valid, defaulted ClusterIP service "web" with one port, after
// mutate.
func makeService(mutate func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", CreationTimestamp: svcTestCreated},
		Spec: v1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	DefaultService(s)
	if mutate != nil {
		mutate(s)
	}
	return s
}

// svcWithType changes the type and fills what that type needs, like a defaulted object.
func svcWithType(t v1.ServiceType) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.Type = t
		DefaultService(s)
	}
}

func TestDefaultService(t *testing.T) {
	tests := []struct {
		name string
		in   v1.ServiceSpec
		want v1.ServiceSpec
	}{{
		name: "cluster IP",
		in:   v1.ServiceSpec{Ports: []v1.ServicePort{{Port: 80}, {Name: "b", Port: 81, TargetPort: intstr.FromString("http"), Protocol: v1.ProtocolUDP}}},
		want: v1.ServiceSpec{
			Ports: []v1.ServicePort{
				{Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(80)},
				{Name: "b", Port: 81, TargetPort: intstr.FromString("http"), Protocol: v1.ProtocolUDP},
			},
			Type:                  v1.ServiceTypeClusterIP,
			SessionAffinity:       v1.ServiceAffinityNone,
			InternalTrafficPolicy: svcPtr(v1.ServiceInternalTrafficPolicyCluster),
			IPFamilyPolicy:        svcPtr(v1.IPFamilyPolicySingleStack),
			IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
		},
	}, {
		name: "client IP affinity gets a timeout",
		in:   v1.ServiceSpec{SessionAffinity: v1.ServiceAffinityClientIP},
		want: v1.ServiceSpec{
			Type:                  v1.ServiceTypeClusterIP,
			SessionAffinity:       v1.ServiceAffinityClientIP,
			SessionAffinityConfig: &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: svcPtr(int32(10800))}},
			InternalTrafficPolicy: svcPtr(v1.ServiceInternalTrafficPolicyCluster),
			IPFamilyPolicy:        svcPtr(v1.IPFamilyPolicySingleStack),
			IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
		},
	}, {
		name: "affinity None drops the config",
		in:   v1.ServiceSpec{SessionAffinityConfig: &v1.SessionAffinityConfig{}},
		want: v1.ServiceSpec{
			Type:                  v1.ServiceTypeClusterIP,
			SessionAffinity:       v1.ServiceAffinityNone,
			InternalTrafficPolicy: svcPtr(v1.ServiceInternalTrafficPolicyCluster),
			IPFamilyPolicy:        svcPtr(v1.IPFamilyPolicySingleStack),
			IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
		},
	}, {
		name: "node port",
		in:   v1.ServiceSpec{Type: v1.ServiceTypeNodePort},
		want: v1.ServiceSpec{
			Type:                  v1.ServiceTypeNodePort,
			SessionAffinity:       v1.ServiceAffinityNone,
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
			InternalTrafficPolicy: svcPtr(v1.ServiceInternalTrafficPolicyCluster),
			IPFamilyPolicy:        svcPtr(v1.IPFamilyPolicySingleStack),
			IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
		},
	}, {
		name: "load balancer",
		in:   v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer},
		want: v1.ServiceSpec{
			Type:                          v1.ServiceTypeLoadBalancer,
			SessionAffinity:               v1.ServiceAffinityNone,
			ExternalTrafficPolicy:         v1.ServiceExternalTrafficPolicyCluster,
			InternalTrafficPolicy:         svcPtr(v1.ServiceInternalTrafficPolicyCluster),
			AllocateLoadBalancerNodePorts: svcPtr(true),
			IPFamilyPolicy:                svcPtr(v1.IPFamilyPolicySingleStack),
			IPFamilies:                    []v1.IPFamily{v1.IPv4Protocol},
		},
	}, {
		name: "cluster IP with external IPs is externally accessible",
		in:   v1.ServiceSpec{ExternalIPs: []string{"192.0.2.1"}},
		want: v1.ServiceSpec{
			Type:                  v1.ServiceTypeClusterIP,
			ExternalIPs:           []string{"192.0.2.1"},
			SessionAffinity:       v1.ServiceAffinityNone,
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
			InternalTrafficPolicy: svcPtr(v1.ServiceInternalTrafficPolicyCluster),
			IPFamilyPolicy:        svcPtr(v1.IPFamilyPolicySingleStack),
			IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
		},
	}, {
		name: "external name gets no traffic policy or families",
		in:   v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "example.com"},
		want: v1.ServiceSpec{
			Type:            v1.ServiceTypeExternalName,
			ExternalName:    "example.com",
			SessionAffinity: v1.ServiceAffinityNone,
		},
	}, {
		name: "headless without selector is dual-stack",
		in:   v1.ServiceSpec{ClusterIP: "None", ClusterIPs: []string{"None"}},
		want: v1.ServiceSpec{
			ClusterIP:             "None",
			ClusterIPs:            []string{"None"},
			Type:                  v1.ServiceTypeClusterIP,
			SessionAffinity:       v1.ServiceAffinityNone,
			InternalTrafficPolicy: svcPtr(v1.ServiceInternalTrafficPolicyCluster),
			IPFamilyPolicy:        svcPtr(v1.IPFamilyPolicyRequireDualStack),
			IPFamilies:            []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol},
		},
	}, {
		name: "headless with selector is single-stack",
		in:   v1.ServiceSpec{ClusterIP: "None", ClusterIPs: []string{"None"}, Selector: map[string]string{"a": "b"}},
		want: v1.ServiceSpec{
			ClusterIP:             "None",
			ClusterIPs:            []string{"None"},
			Selector:              map[string]string{"a": "b"},
			Type:                  v1.ServiceTypeClusterIP,
			SessionAffinity:       v1.ServiceAffinityNone,
			InternalTrafficPolicy: svcPtr(v1.ServiceInternalTrafficPolicyCluster),
			IPFamilyPolicy:        svcPtr(v1.IPFamilyPolicySingleStack),
			IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
		},
	}, {
		name: "family inferred from a given IPv6 cluster IP",
		in:   v1.ServiceSpec{ClusterIP: "fd00::10", ClusterIPs: []string{"fd00::10"}},
		want: v1.ServiceSpec{
			ClusterIP:             "fd00::10",
			ClusterIPs:            []string{"fd00::10"},
			Type:                  v1.ServiceTypeClusterIP,
			SessionAffinity:       v1.ServiceAffinityNone,
			InternalTrafficPolicy: svcPtr(v1.ServiceInternalTrafficPolicyCluster),
			IPFamilyPolicy:        svcPtr(v1.IPFamilyPolicySingleStack),
			IPFamilies:            []v1.IPFamily{v1.IPv6Protocol},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &v1.Service{Spec: tc.in}
			DefaultService(s)
			if diff := cmp.Diff(tc.want, s.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			again := s.DeepCopy()
			DefaultService(again)
			if diff := cmp.Diff(s, again); diff != "" {
				t.Errorf("defaulting is not idempotent (-once +twice):\n%s", diff)
			}
		})
	}
}

func TestDefaultServiceIPMode(t *testing.T) {
	s := makeService(svcWithType(v1.ServiceTypeLoadBalancer))
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "127.0.10.1"}, {Hostname: "lb.example.com"}}
	DefaultService(s)
	want := []v1.LoadBalancerIngress{{IP: "127.0.10.1", IPMode: svcPtr(v1.LoadBalancerIPModeVIP)}, {Hostname: "lb.example.com"}}
	if diff := cmp.Diff(want, s.Status.LoadBalancer.Ingress); diff != "" {
		t.Errorf("ingress (-want +got):\n%s", diff)
	}
}

func TestServicePrepareForCreate(t *testing.T) {
	s := &v1.Service{Spec: v1.ServiceSpec{ClusterIP: "10.96.0.20"}, Status: v1.ServiceStatus{
		LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "1.2.3.4"}}}}}
	ServiceResource().PrepareForCreate(s)
	if diff := cmp.Diff([]string{"10.96.0.20"}, s.Spec.ClusterIPs); diff != "" {
		t.Errorf("clusterIPs (-want +got):\n%s", diff)
	}
	if len(s.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("status not cleared: %+v", s.Status)
	}
}

func TestValidateService(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.Service)
		want   []string
	}{
		{name: "valid cluster IP", mutate: nil, want: []string{}},
		{name: "valid node port", mutate: svcWithType(v1.ServiceTypeNodePort), want: []string{}},
		{name: "valid load balancer", mutate: svcWithType(v1.ServiceTypeLoadBalancer), want: []string{}},
		{name: "valid headless", mutate: func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"} }, want: []string{}},
		{name: "valid external name", mutate: func(s *v1.Service) {
			*s = *makeService(func(s *v1.Service) {})
			s.Spec = v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "db.example.com.", SessionAffinity: v1.ServiceAffinityNone}
		}, want: []string{}},
		{name: "ports required", mutate: func(s *v1.Service) { s.Spec.Ports = nil }, want: []string{"spec.ports: Required value"}},
		{name: "port out of range", mutate: func(s *v1.Service) { s.Spec.Ports[0].Port = 0; s.Spec.Ports[0].TargetPort = intstr.FromInt32(1) },
			want: []string{"spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"}},
		{name: "second port needs a name", mutate: func(s *v1.Service) {
			s.Spec.Ports = []v1.ServicePort{{Name: "a", Port: 80, Protocol: "TCP", TargetPort: intstr.FromInt32(80)}, {Port: 81, Protocol: "TCP", TargetPort: intstr.FromInt32(81)}}
		}, want: []string{"spec.ports[1].name: Required value"}},
		{name: "port names unique and DNS labels", mutate: func(s *v1.Service) {
			s.Spec.Ports = []v1.ServicePort{
				{Name: "http", Port: 80, Protocol: "TCP", TargetPort: intstr.FromInt32(80)},
				{Name: "http", Port: 81, Protocol: "TCP", TargetPort: intstr.FromInt32(81)},
				{Name: "Bad_Name", Port: 82, Protocol: "TCP", TargetPort: intstr.FromInt32(82)},
			}
		}, want: []string{
			`spec.ports[1].name: Duplicate value: "http"`,
			`spec.ports[2].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
		}},
		{name: "protocol", mutate: func(s *v1.Service) { s.Spec.Ports[0].Protocol = "HTTP" },
			want: []string{`spec.ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"`}},
		{name: "target port number", mutate: func(s *v1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(70000) },
			want: []string{"spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive"}},
		{name: "target port name", mutate: func(s *v1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("no_such-") },
			want: []string{
				`spec.ports[0].targetPort: Invalid value: "no_such-": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)`,
				`spec.ports[0].targetPort: Invalid value: "no_such-": must not begin or end with a hyphen`,
			}},
		{name: "named target port", mutate: func(s *v1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("http") }, want: []string{}},
		{name: "same port twice with different protocols", mutate: func(s *v1.Service) {
			s.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: 53, Protocol: "UDP", TargetPort: intstr.FromInt32(53)}, {Name: "dns-tcp", Port: 53, Protocol: "TCP", TargetPort: intstr.FromInt32(53)}}
		}, want: []string{}},
		{name: "same port and protocol twice", mutate: func(s *v1.Service) {
			s.Spec.Ports = []v1.ServicePort{{Name: "a", Port: 53, Protocol: "UDP", TargetPort: intstr.FromInt32(53)}, {Name: "b", Port: 53, Protocol: "UDP", TargetPort: intstr.FromInt32(54)}}
		}, want: []string{`spec.ports[1]: Duplicate value: {"Name":"","Protocol":"UDP","AppProtocol":null,"Port":53,"TargetPort":0,"NodePort":0}`}},
		{name: "node port on cluster IP", mutate: func(s *v1.Service) { s.Spec.Ports[0].NodePort = 30080 },
			want: []string{"spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"}},
		{name: "node port out of range", mutate: func(s *v1.Service) { svcWithType(v1.ServiceTypeNodePort)(s); s.Spec.Ports[0].NodePort = 70000 },
			want: []string{"spec.ports[0].nodePort: Invalid value: 70000: must be between 1 and 65535, inclusive"}},
		{name: "duplicate node port", mutate: func(s *v1.Service) {
			svcWithType(v1.ServiceTypeNodePort)(s)
			s.Spec.Ports = []v1.ServicePort{{Name: "a", Port: 80, Protocol: "TCP", TargetPort: intstr.FromInt32(80), NodePort: 30080}, {Name: "b", Port: 81, Protocol: "TCP", TargetPort: intstr.FromInt32(81), NodePort: 30080}}
		}, want: []string{"spec.ports[1].nodePort: Duplicate value: 30080"}},
		{name: "type", mutate: func(s *v1.Service) { s.Spec.Type = "Magic" },
			want: []string{`spec.type: Unsupported value: "Magic": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"`}},
		{name: "external name required", mutate: func(s *v1.Service) {
			s.Spec = v1.ServiceSpec{Type: v1.ServiceTypeExternalName, SessionAffinity: v1.ServiceAffinityNone}
		}, want: []string{"spec.externalName: Required value"}},
		{name: "external name must be lowercase DNS", mutate: func(s *v1.Service) {
			s.Spec = v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "Example.COM", SessionAffinity: v1.ServiceAffinityNone}
		}, want: []string{`spec.externalName: Invalid value: "Example.COM": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{name: "external name forbids cluster IPs and families", mutate: func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com"
			s.Spec.InternalTrafficPolicy = nil
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"}
		}, want: []string{
			"spec.clusterIPs: Forbidden: may not be set for ExternalName services",
			"spec.ipFamilies: Forbidden: may not be set for ExternalName services",
			"spec.ipFamilyPolicy: Forbidden: may not be set for ExternalName services",
		}},
		{name: "cluster IP must be an IP", mutate: func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.300", []string{"10.96.0.300"} },
			want: []string{`spec.clusterIPs[0]: Invalid value: "10.96.0.300": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`}},
		{name: "clusterIPs[0] must match clusterIP", mutate: func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.5", []string{"10.96.0.6"} },
			want: []string{`spec.clusterIPs: Invalid value: ["10.96.0.6"]: first value must match ` + "`clusterIP`"}},
		{name: "clusterIPs without clusterIP", mutate: func(s *v1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.6"} },
			want: []string{`spec.clusterIPs: Invalid value: ["10.96.0.6"]: must be empty when ` + "`clusterIP`" + ` is not specified`}},
		{name: "None for node port", mutate: func(s *v1.Service) {
			svcWithType(v1.ServiceTypeNodePort)(s)
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"}
		},
			want: []string{`spec.clusterIPs[0]: Invalid value: "None": may not be set to 'None' for NodePort services`}},
		{name: "None for load balancer", mutate: func(s *v1.Service) {
			svcWithType(v1.ServiceTypeLoadBalancer)(s)
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"}
		}, want: []string{`spec.clusterIPs[0]: Invalid value: "None": may not be set to 'None' for LoadBalancer services`}},
		{name: "session affinity value", mutate: func(s *v1.Service) { s.Spec.SessionAffinity = "Sticky" },
			want: []string{`spec.sessionAffinity: Unsupported value: "Sticky": supported values: "ClientIP", "None"`}},
		{name: "affinity timeout range", mutate: func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: svcPtr(int32(86401))}}
		}, want: []string{"spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 86401: must be greater than 0 and less than 86400"}},
		{name: "affinity config with None", mutate: func(s *v1.Service) { s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{} },
			want: []string{"spec.sessionAffinityConfig: Forbidden: must not be set when session affinity is None"}},
		{name: "source ranges", mutate: func(s *v1.Service) {
			svcWithType(v1.ServiceTypeLoadBalancer)(s)
			s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8", " 192.168.0.0/16 ", "nope"}
		}, want: []string{`spec.LoadBalancerSourceRanges[2]: Invalid value: "nope": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`}},
		{name: "source ranges only for load balancers", mutate: func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} },
			want: []string{"spec.LoadBalancerSourceRanges: Forbidden: may only be used when `type` is 'LoadBalancer'"}},
		{name: "external traffic policy on cluster IP", mutate: func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal },
			want: []string{`spec.externalTrafficPolicy: Invalid value: "Local": may only be set for externally-accessible services`}},
		{name: "external traffic policy value", mutate: func(s *v1.Service) { svcWithType(v1.ServiceTypeNodePort)(s); s.Spec.ExternalTrafficPolicy = "Global" },
			want: []string{`spec.externalTrafficPolicy: Unsupported value: "Global": supported values: "Cluster", "Local"`}},
		{name: "internal traffic policy value", mutate: func(s *v1.Service) { s.Spec.InternalTrafficPolicy = svcPtr(v1.ServiceInternalTrafficPolicy("Node")) },
			want: []string{`spec.internalTrafficPolicy: Unsupported value: "Node": supported values: "Cluster", "Local"`}},
		{name: "internal traffic policy required", mutate: func(s *v1.Service) { s.Spec.InternalTrafficPolicy = nil },
			want: []string{"spec.internalTrafficPolicy: Required value"}},
		{name: "health check node port without Local", mutate: func(s *v1.Service) { svcWithType(v1.ServiceTypeLoadBalancer)(s); s.Spec.HealthCheckNodePort = 30100 },
			want: []string{"spec.healthCheckNodePort: Invalid value: 30100: may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"}},
		{name: "health check node port with Local", mutate: func(s *v1.Service) {
			svcWithType(v1.ServiceTypeLoadBalancer)(s)
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 30100
		}, want: []string{}},
		{name: "allocateLoadBalancerNodePorts only for load balancers", mutate: func(s *v1.Service) { s.Spec.AllocateLoadBalancerNodePorts = svcPtr(false) },
			want: []string{"spec.allocateLoadBalancerNodePorts: Forbidden: may only be used when `type` is 'LoadBalancer'"}},
		{name: "selector", mutate: func(s *v1.Service) { s.Spec.Selector = map[string]string{"app": "a b"} },
			want: []string{`spec.selector: Invalid value: "a b": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`}},
		{name: "external IPs", mutate: func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"192.0.2.1", "127.0.0.1", "x"}
			s.Spec.ExternalTrafficPolicy = "Cluster"
		},
			want: []string{
				`spec.externalIPs[1]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`,
				`spec.externalIPs[2]: Invalid value: "x": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`,
			}},
		{name: "traffic distribution", mutate: func(s *v1.Service) { s.Spec.TrafficDistribution = svcPtr("Anywhere") },
			want: []string{`spec.trafficDistribution: Unsupported value: "Anywhere": supported values: "PreferClose", "PreferSameNode", "PreferSameZone"`}},
		{name: "traffic distribution values", mutate: func(s *v1.Service) { s.Spec.TrafficDistribution = svcPtr("PreferSameNode") }, want: []string{}},
		{name: "ip families", mutate: func(s *v1.Service) {
			s.Spec.IPFamilies = []v1.IPFamily{"IPv4", "IPv4"}
			s.Spec.IPFamilyPolicy = svcPtr(v1.IPFamilyPolicy("Both"))
		},
			want: []string{
				`spec.ipFamilies[1]: Duplicate value: "IPv4"`,
				`spec.ipFamilyPolicy: Unsupported value: "Both": supported values: "PreferDualStack", "RequireDualStack", "SingleStack"`,
			}},
		{name: "cluster IP family mismatch", mutate: func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "fd00::1", []string{"fd00::1"} },
			want: []string{"spec.clusterIPs[0]: Invalid value: \"fd00::1\": expected an IPv4 value as indicated by `ipFamilies[0]`"}},
		{name: "load balancer class only for load balancers", mutate: func(s *v1.Service) { s.Spec.LoadBalancerClass = svcPtr("example.com/lb") },
			want: []string{"spec.loadBalancerClass: Forbidden: may only be used when `type` is 'LoadBalancer'"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := svcErrs(ValidateService(makeService(tc.mutate)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceStatusValidation(t *testing.T) {
	tests := []struct {
		name    string
		svcType v1.ServiceType
		ingress []v1.LoadBalancerIngress
		want    []string
	}{
		{name: "valid", svcType: v1.ServiceTypeLoadBalancer, ingress: []v1.LoadBalancerIngress{{IP: "127.0.10.1", IPMode: svcPtr(v1.LoadBalancerIPModeProxy)}, {Hostname: "lb.example.com"}}, want: []string{}},
		{name: "bad IP", svcType: v1.ServiceTypeLoadBalancer, ingress: []v1.LoadBalancerIngress{{IP: "1.2.3", IPMode: svcPtr(v1.LoadBalancerIPModeVIP)}},
			want: []string{`status.loadBalancer.ingress[0].ip: Invalid value: "1.2.3": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`}},
		{name: "ipMode value", svcType: v1.ServiceTypeLoadBalancer, ingress: []v1.LoadBalancerIngress{{IP: "1.2.3.4", IPMode: svcPtr(v1.LoadBalancerIPMode("Direct"))}},
			want: []string{`status.loadBalancer.ingress[0].ipMode: Unsupported value: "Direct": supported values: "Proxy", "VIP"`}},
		{name: "ipMode required with ip", svcType: v1.ServiceTypeLoadBalancer, ingress: []v1.LoadBalancerIngress{{IP: "1.2.3.4"}},
			want: []string{"status.loadBalancer.ingress[0].ipMode: Required value: must be specified when `ip` is set"}},
		{name: "ipMode without ip", svcType: v1.ServiceTypeLoadBalancer, ingress: []v1.LoadBalancerIngress{{Hostname: "a.example", IPMode: svcPtr(v1.LoadBalancerIPModeVIP)}},
			want: []string{"status.loadBalancer.ingress[0].ipMode: Forbidden: may not be specified when `ip` is not set"}},
		{name: "hostname must not be an IP", svcType: v1.ServiceTypeLoadBalancer, ingress: []v1.LoadBalancerIngress{{Hostname: "1.2.3.4"}},
			want: []string{`status.loadBalancer.ingress[0].hostname: Invalid value: "1.2.3.4": must be a DNS name, not an IP address`}},
		{name: "ingress only for load balancers", svcType: v1.ServiceTypeClusterIP, ingress: []v1.LoadBalancerIngress{{IP: "1.2.3.4"}},
			want: []string{"status.loadBalancer.ingress: Forbidden: may only be used when `spec.type` is 'LoadBalancer'"}},
	}
	r := ServiceResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := makeService(svcWithType(tc.svcType))
			s.Status.LoadBalancer.Ingress = tc.ingress
			got := svcErrs(r.Status.ValidateUpdate(s, makeService(svcWithType(tc.svcType))))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	// kube-apiserver validates no status condition of a Service; the conformance spec
	// "should complete a service status lifecycle" writes this one (no
	// lastTransitionTime), which must be stored.
	t.Run("conditions as the conformance spec writes them", func(t *testing.T) {
		s := makeService(nil)
		s.Status.Conditions = []metav1.Condition{{Type: "StatusUpdate", Status: metav1.ConditionTrue, Reason: "E2E", Message: "Set from e2e test"}}
		if got := svcErrs(r.Status.ValidateUpdate(s, makeService(nil))); len(got) != 0 {
			t.Errorf("errors %q, want none", got)
		}
	})
}

// allocated returns a service as the allocator leaves it: cluster IP 10.96.0.20 and
// node ports from 30080 when its type has them.
func svcAllocated(t v1.ServiceType, mutate func(*v1.Service)) *v1.Service {
	return makeService(func(s *v1.Service) {
		if t == v1.ServiceTypeExternalName {
			s.Spec = v1.ServiceSpec{Type: t, ExternalName: "db.example.com", SessionAffinity: v1.ServiceAffinityNone,
				Ports: []v1.ServicePort{{Port: 80, Protocol: "TCP", TargetPort: intstr.FromInt32(80)}}}
		} else {
			svcWithType(t)(s)
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.20", []string{"10.96.0.20"}
			if t == v1.ServiceTypeNodePort || t == v1.ServiceTypeLoadBalancer {
				s.Spec.Ports[0].NodePort = 30080
			}
		}
		if mutate != nil {
			mutate(s)
		}
	})
}

// TestServiceTypeTransitions walks every type change through PrepareForUpdate, Default
// and ValidateUpdate, the order the handlers use, starting from what a client sends
// (the old object with only spec.type and the type's own fields edited).
func TestServiceTypeTransitions(t *testing.T) {
	tests := []struct {
		name     string
		old      *v1.Service
		edit     func(*v1.Service)
		wantSpec func(*v1.Service)
		wantErrs []string
	}{{
		name: "ClusterIP to ExternalName releases the cluster IP and families",
		old:  svcAllocated(v1.ServiceTypeClusterIP, nil),
		edit: func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName; s.Spec.ExternalName = "db.example.com" },
		wantSpec: func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeExternalName
			s.Spec.ExternalName = "db.example.com"
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
			s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = nil, nil
		},
		wantErrs: []string{},
	}, {
		name: "ExternalName to ClusterIP may be given a cluster IP",
		old:  svcAllocated(v1.ServiceTypeExternalName, nil),
		edit: func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP; s.Spec.ExternalName = "" },
		wantSpec: func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeClusterIP
			s.Spec.ExternalName = ""
			s.Spec.InternalTrafficPolicy = svcPtr(v1.ServiceInternalTrafficPolicyCluster)
			s.Spec.IPFamilyPolicy = svcPtr(v1.IPFamilyPolicySingleStack)
			s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol}
		},
		wantErrs: []string{},
	}, {
		name: "ClusterIP to NodePort keeps the cluster IP and gains a traffic policy",
		old:  svcAllocated(v1.ServiceTypeClusterIP, nil),
		edit: func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort },
		wantSpec: func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
		},
		wantErrs: []string{},
	}, {
		name: "NodePort to ClusterIP releases node ports and the traffic policy",
		old:  svcAllocated(v1.ServiceTypeNodePort, nil),
		edit: func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP },
		wantSpec: func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeClusterIP
			s.Spec.Ports[0].NodePort = 0
			s.Spec.ExternalTrafficPolicy = ""
		},
		wantErrs: []string{},
	}, {
		name: "NodePort to ClusterIP with a new node port is refused",
		old:  svcAllocated(v1.ServiceTypeNodePort, nil),
		edit: func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP; s.Spec.Ports[0].NodePort = 30999 },
		wantSpec: func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeClusterIP
			s.Spec.Ports[0].NodePort = 30999
			s.Spec.ExternalTrafficPolicy = ""
		},
		wantErrs: []string{"spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"},
	}, {
		name: "NodePort to LoadBalancer keeps node ports",
		old:  svcAllocated(v1.ServiceTypeNodePort, nil),
		edit: func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeLoadBalancer; s.Spec.Ports[0].NodePort = 0 },
		wantSpec: func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeLoadBalancer
			s.Spec.AllocateLoadBalancerNodePorts = svcPtr(true)
		},
		wantErrs: []string{},
	}, {
		name: "LoadBalancer to NodePort drops load-balancer fields and status",
		old: svcAllocated(v1.ServiceTypeLoadBalancer, func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 30100
			s.Spec.LoadBalancerClass = svcPtr("example.com/lb")
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "127.0.10.1", IPMode: svcPtr(v1.LoadBalancerIPModeVIP)}}
		}),
		edit: func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort },
		wantSpec: func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.AllocateLoadBalancerNodePorts = nil
			s.Spec.LoadBalancerClass = nil
			s.Spec.HealthCheckNodePort = 0
			s.Status = v1.ServiceStatus{}
		},
		wantErrs: []string{},
	}, {
		name: "LoadBalancer to ClusterIP releases everything external",
		old:  svcAllocated(v1.ServiceTypeLoadBalancer, nil),
		edit: func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP },
		wantSpec: func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeClusterIP
			s.Spec.AllocateLoadBalancerNodePorts = nil
			s.Spec.ExternalTrafficPolicy = ""
			s.Spec.Ports[0].NodePort = 0
		},
		wantErrs: []string{},
	}, {
		name: "LoadBalancer to ExternalName",
		old:  svcAllocated(v1.ServiceTypeLoadBalancer, nil),
		edit: func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeExternalName
			s.Spec.ExternalName = "db.example.com"
		},
		wantSpec: func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeExternalName
			s.Spec.ExternalName = "db.example.com"
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
			s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = nil, nil
			s.Spec.AllocateLoadBalancerNodePorts = nil
			s.Spec.ExternalTrafficPolicy = ""
			s.Spec.Ports[0].NodePort = 0
		},
		wantErrs: []string{},
	}, {
		name: "ExternalName to LoadBalancer",
		old:  svcAllocated(v1.ServiceTypeExternalName, nil),
		edit: func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeLoadBalancer; s.Spec.ExternalName = "" },
		wantSpec: func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeLoadBalancer
			s.Spec.ExternalName = ""
			DefaultService(s)
		},
		wantErrs: []string{},
	}, {
		name: "changing the cluster IP is refused",
		old:  svcAllocated(v1.ServiceTypeClusterIP, nil),
		edit: func(s *v1.Service) { s.Spec.ClusterIP = "10.96.0.21" },
		wantSpec: func(s *v1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.21", []string{"10.96.0.21"}
		},
		wantErrs: []string{`spec.clusterIPs[0]: Invalid value: ["10.96.0.21"]: may not change once set`},
	}, {
		name: "an update without cluster IPs or node ports keeps the allocated ones",
		old:  svcAllocated(v1.ServiceTypeNodePort, nil),
		edit: func(s *v1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
			s.Spec.Ports[0].NodePort = 0
			s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = nil, nil
		},
		wantSpec: func(s *v1.Service) {},
		wantErrs: []string{},
	}, {
		name: "changing the health check node port is refused",
		old: svcAllocated(v1.ServiceTypeLoadBalancer, func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 30100
		}),
		edit:     func(s *v1.Service) { s.Spec.HealthCheckNodePort = 30101 },
		wantSpec: func(s *v1.Service) { s.Spec.HealthCheckNodePort = 30101 },
		wantErrs: []string{"spec.healthCheckNodePort: Forbidden: field is immutable"},
	}, {
		name: "changing the load balancer class is refused",
		old:  svcAllocated(v1.ServiceTypeLoadBalancer, func(s *v1.Service) { s.Spec.LoadBalancerClass = svcPtr("example.com/a") }),
		edit: func(s *v1.Service) { s.Spec.LoadBalancerClass = svcPtr("example.com/b") },
		wantSpec: func(s *v1.Service) {
			s.Spec.LoadBalancerClass = svcPtr("example.com/b")
		},
		wantErrs: []string{`spec.loadBalancerClass: Invalid value: "example.com/b": may not change once set`},
	}}
	r := ServiceResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.old.DeepCopy()
			tc.edit(obj)
			r.PrepareForUpdate(obj, tc.old)
			r.Default(obj)
			want := tc.old.DeepCopy()
			tc.wantSpec(want)
			if diff := cmp.Diff(want, obj); diff != "" {
				t.Errorf("prepared object (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErrs, svcErrs(r.ValidateUpdate(obj, tc.old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceNeeds(t *testing.T) {
	tests := []struct {
		name                       string
		svc                        *v1.Service
		clusterIP, nodePorts, hcNP bool
	}{
		{"cluster IP", makeService(nil), true, false, false},
		{"headless", makeService(func(s *v1.Service) { s.Spec.ClusterIP = "None" }), false, false, false},
		{"external name", svcAllocated(v1.ServiceTypeExternalName, nil), false, false, false},
		{"node port", makeService(svcWithType(v1.ServiceTypeNodePort)), true, true, false},
		{"load balancer", makeService(svcWithType(v1.ServiceTypeLoadBalancer)), true, true, false},
		{"load balancer without node ports", makeService(func(s *v1.Service) {
			svcWithType(v1.ServiceTypeLoadBalancer)(s)
			s.Spec.AllocateLoadBalancerNodePorts = svcPtr(false)
		}), true, false, false},
		{"load balancer local", makeService(func(s *v1.Service) {
			svcWithType(v1.ServiceTypeLoadBalancer)(s)
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}), true, true, true},
		{"nil", nil, false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := [3]bool{ServiceNeedsClusterIP(tc.svc), ServiceNeedsNodePorts(tc.svc), ServiceNeedsHealthCheckNodePort(tc.svc)}
			if want := [3]bool{tc.clusterIP, tc.nodePorts, tc.hcNP}; got != want {
				t.Errorf("needs (clusterIP, nodePorts, healthCheck) = %v, want %v", got, want)
			}
		})
	}
}

func TestServiceWarnings(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.Service)
		want   []string
	}{
		{name: "none", want: nil},
		{name: "external IPs", mutate: func(s *v1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.1"} },
			want: []string{"spec.externalIPs is deprecated and may no longer be implemented in some clusters"}},
		{name: "PreferClose", mutate: func(s *v1.Service) { s.Spec.TrafficDistribution = svcPtr("PreferClose") },
			want: []string{`spec.trafficDistribution: "PreferClose" is deprecated; use "PreferSameZone"`}},
		{name: "headless ignores external IPs", mutate: func(s *v1.Service) {
			s.Spec.ClusterIP = "None"
			s.Spec.ExternalIPs = []string{"192.0.2.1"}
		}, want: []string{"spec.externalIPs is ignored for headless services"}},
		{name: "externalName on a cluster IP service", mutate: func(s *v1.Service) { s.Spec.ExternalName = "x.example" },
			want: []string{`spec.externalName is ignored when spec.type is not "ExternalName"`}},
		{name: "non-canonical cluster IP", mutate: func(s *v1.Service) { s.Spec.ClusterIPs = []string{"fd00:0::1"} },
			want: []string{`spec.clusterIPs[0]: IPv6 address "fd00:0::1" should be in RFC 5952 canonical format ("fd00::1")`}},
	}
	r := ServiceResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, r.Warnings(makeService(tc.mutate), nil)); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceRow(t *testing.T) {
	tests := []struct {
		name string
		svc  *v1.Service
		want []interface{}
	}{{
		name: "cluster IP",
		svc:  svcAllocated(v1.ServiceTypeClusterIP, nil),
		want: []interface{}{"web", "ClusterIP", "10.96.0.20", "<none>", "80/TCP", "5m", "app=web"},
	}, {
		name: "node port, several ports, external IPs",
		svc: svcAllocated(v1.ServiceTypeNodePort, func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"192.0.2.1", "192.0.2.2"}
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "dns", Port: 53, Protocol: "UDP", NodePort: 30053})
		}),
		want: []interface{}{"web", "NodePort", "10.96.0.20", "192.0.2.1,192.0.2.2", "80:30080/TCP,53:30053/UDP", "5m", "app=web"},
	}, {
		name: "pending load balancer",
		svc:  svcAllocated(v1.ServiceTypeLoadBalancer, nil),
		want: []interface{}{"web", "LoadBalancer", "10.96.0.20", "<pending>", "80:30080/TCP", "5m", "app=web"},
	}, {
		name: "load balancer with ingress and external IPs",
		svc: svcAllocated(v1.ServiceTypeLoadBalancer, func(s *v1.Service) {
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "127.0.10.2"}, {Hostname: "lb.example.com"}, {IP: "127.0.10.1"}}
			s.Spec.ExternalIPs = []string{"192.0.2.9"}
		}),
		want: []interface{}{"web", "LoadBalancer", "10.96.0.20", "127.0.10.1,127.0.10.2,lb.example.com,192.0.2.9", "80:30080/TCP", "5m", "app=web"},
	}, {
		name: "external name without selector or ports",
		svc: svcAllocated(v1.ServiceTypeExternalName, func(s *v1.Service) {
			s.Spec.Ports = nil
			s.Spec.Selector = nil
		}),
		want: []interface{}{"web", "ExternalName", "<none>", "db.example.com", "<none>", "5m", "<none>"},
	}, {
		name: "headless",
		svc:  makeService(func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"} }),
		want: []interface{}{"web", "ClusterIP", "None", "<none>", "80/TCP", "5m", "app=web"},
	}}
	r := ServiceResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Row(tc.svc, svcTestNow)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
			if len(got) != len(r.Columns) {
				t.Errorf("row has %d cells for %d columns", len(got), len(r.Columns))
			}
		})
	}
}

func TestServiceResourceIdentity(t *testing.T) {
	r := ServiceResource()
	var names []string
	for _, c := range r.Columns {
		if c.Priority == 0 {
			names = append(names, strings.ToUpper(c.Name))
		}
	}
	if diff := cmp.Diff([]string{"NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"}, names); diff != "" {
		t.Errorf("default columns (-want +got):\n%s", diff)
	}
	if got := r.Fields(svcAllocated(v1.ServiceTypeNodePort, nil)); !cmp.Equal(got, fields.Set{"spec.clusterIP": "10.96.0.20", "spec.type": "NodePort"}) {
		t.Errorf("fields = %v", got)
	}
	if msgs := r.NameValidation("Web", false); len(msgs) == 0 {
		t.Error("service names must be DNS-1035 labels")
	}
	if msgs := r.NameValidation("1web", false); len(msgs) == 0 {
		t.Error("service names must start with a letter")
	}
	if r.GVR().Resource != "services" || r.ShortNames[0] != "svc" || r.Categories[0] != "all" || r.Status == nil {
		t.Errorf("identity: %+v", r)
	}
}
