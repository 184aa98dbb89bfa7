package main

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
)

func explainPod(ns, name, ip string, lbls map[string]string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Ports: []v1.ContainerPort{
			{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP},
		}}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: ip, PodIPs: []v1.PodIP{{IP: ip}}},
	}
}

func explainNamespace(name string) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/metadata.name": name}}}
}

// hostPod is selected by y/allow-from-x, but policies do not apply on the host network.
var hostPod = func() *v1.Pod {
	p := explainPod("y", "h", "192.168.0.2", map[string]string{"app": "b"})
	p.Spec.HostNetwork = true
	return p
}()

// explainCluster has x/a and y/b, and in y a default deny of ingress plus a policy
// letting namespace x reach b on TCP 8080.
func explainCluster() []runtime.Object {
	return []runtime.Object{
		explainNamespace("x"), explainNamespace("y"),
		explainPod("x", "a", "10.244.1.2", map[string]string{"app": "a"}),
		explainPod("y", "b", "10.244.2.3", map[string]string{"app": "b"}),
		explainPod("y", "c", "10.244.2.4", map[string]string{"app": "c"}),
		hostPod,
		// Service y/web (10.96.0.50:80 -> 8080) in front of y/b and y/c.
		&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "web"},
			Spec: v1.ServiceSpec{ClusterIP: "10.96.0.50", ClusterIPs: []string{"10.96.0.50"},
				Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Protocol: new(v1.ProtocolTCP), Port: new(int32(8080))}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.244.2.3"}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)}, TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: "y", Name: "b"}},
				{Addresses: []string{"10.244.2.4"}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)}, TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: "y", Name: "c"}},
			}},
		// Service y/empty has no endpoint.
		&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "empty"},
			Spec: v1.ServiceSpec{ClusterIP: "10.96.0.51", ClusterIPs: []string{"10.96.0.51"},
				Ports: []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP}}}},
		&networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "deny-all"},
			Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		},
		&networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "allow-from-x"},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
						MatchLabels: map[string]string{"kubernetes.io/metadata.name": "x"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: new(v1.ProtocolTCP), Port: new(intstr.FromInt32(8080))}},
				}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			},
		},
	}
}

func TestExplainAccess(t *testing.T) {
	tests := []struct {
		name, ns, from, to string
		allowed            bool
		want               []string
	}{
		{name: "allowed by a rule", ns: "default", from: "x/a", to: "y/b:8080", allowed: true, want: []string{
			"x/a -> y/b:8080/TCP: ALLOWED",
			"  egress  (x/a): not isolated (no policy selects it for egress): allowed",
			"  ingress (y/b): isolated by y/allow-from-x, y/deny-all; allowed by y/allow-from-x spec.ingress[0]",
		}},
		{name: "named port, pod in -n", ns: "y", from: "x/a", to: "b:http", allowed: true, want: []string{
			"x/a -> y/b:8080/TCP: ALLOWED",
			"  egress  (x/a): not isolated (no policy selects it for egress): allowed",
			"  ingress (y/b): isolated by y/allow-from-x, y/deny-all; allowed by y/allow-from-x spec.ingress[0]",
		}},
		{name: "other port denied", ns: "default", from: "x/a", to: "y/b:80", want: []string{
			"x/a -> y/b:80/TCP: DENIED",
			"  egress  (x/a): not isolated (no policy selects it for egress): allowed",
			"  ingress (y/b): isolated by y/allow-from-x, y/deny-all; no rule allows it: denied",
		}},
		{name: "UDP denied", ns: "default", from: "x/a", to: "y/b:8080/udp", want: []string{
			"x/a -> y/b:8080/UDP: DENIED",
			"  egress  (x/a): not isolated (no policy selects it for egress): allowed",
			"  ingress (y/b): isolated by y/allow-from-x, y/deny-all; no rule allows it: denied",
		}},
		{name: "from an IP", ns: "default", from: "192.0.2.1", to: "y/c:80", want: []string{
			"192.0.2.1 -> y/c:80/TCP: DENIED",
			"  egress  (192.0.2.1): not a pod, so no policy applies: allowed",
			"  ingress (y/c): isolated by y/deny-all; no rule allows it: denied",
		}},
		{name: "to a pod's IP", ns: "default", from: "x/a", to: "10.244.2.3:80", want: []string{
			"x/a -> y/b:80/TCP: DENIED",
			"  egress  (x/a): not isolated (no policy selects it for egress): allowed",
			"  ingress (y/b at 10.244.2.3): isolated by y/allow-from-x, y/deny-all; no rule allows it: denied",
		}},
		{name: "to a host-network pod", ns: "y", from: "x/a", to: "h:80", allowed: true, want: []string{
			"x/a -> y/h:80/TCP: ALLOWED",
			"  egress  (x/a): not isolated (no policy selects it for egress): allowed",
			"  ingress (y/h): on the host network, where NetworkPolicies do not apply: allowed",
		}},
		{name: "to a ClusterIP: judged at each endpoint", ns: "default", from: "x/a", to: "10.96.0.50:80", want: []string{
			"x/a -> 10.96.0.50:80/TCP is Service y/web: judged at the endpoint each connection reaches (after the proxy's DNAT)",
			"  x/a -> y/b:8080/TCP: ALLOWED",
			"    egress  (x/a): not isolated (no policy selects it for egress): allowed",
			"    ingress (y/b): isolated by y/allow-from-x, y/deny-all; allowed by y/allow-from-x spec.ingress[0]",
			"  x/a -> y/c:8080/TCP: DENIED",
			"    egress  (x/a): not isolated (no policy selects it for egress): allowed",
			"    ingress (y/c): isolated by y/deny-all; no rule allows it: denied",
		}},
		{name: "to a ClusterIP without endpoints", ns: "default", from: "x/a", to: "10.96.0.51:80", want: []string{
			"x/a -> 10.96.0.51:80/TCP is Service y/empty: judged at the endpoint each connection reaches (after the proxy's DNAT)",
			"  no ready endpoint: the connection is refused by the proxy, not by a policy",
		}},
		{name: "to an IP", ns: "y", from: "b", to: "[2001:db8::1]:443", allowed: true, want: []string{
			"y/b -> [2001:db8::1]:443/TCP: ALLOWED",
			"  egress  (y/b): not isolated (no policy selects it for egress): allowed",
			"  ingress (2001:db8::1): not a pod, so no policy applies: allowed",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			allowed, err := explainAccess(context.Background(), fake.NewClientset(explainCluster()...), tc.ns, tc.from, tc.to, &out)
			if err != nil {
				t.Fatal(err)
			}
			if allowed != tc.allowed {
				t.Errorf("allowed = %v, want %v", allowed, tc.allowed)
			}
			if diff := cmp.Diff(tc.want, strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExplainAccessBadInput(t *testing.T) {
	tests := []struct{ from, to, want string }{
		{"x/a", "y/b", `TO "y/b": want TO:PORT[/PROTO], e.g. web:80 or web:53/UDP`},
		{"x/a", "y/b:0", `TO "y/b:0": port 0: must be between 1 and 65535, inclusive`},
		{"x/a", "y/b:70000", `TO "y/b:70000": port 70000: must be between 1 and 65535, inclusive`},
		{"x/a", "y/b:80/ICMP", `TO "y/b:80/ICMP": protocol "ICMP": want TCP, UDP or SCTP`},
		{"x/a", "y/b:Http_Port", `TO "y/b:Http_Port": port "Http_Port" is neither a number nor a port name: must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)`},
		{"x/a", "10.0.0.1:http", `TO "10.0.0.1:http": a named port ("http") needs a pod to look it up in, not an IP address`},
		{"x/a", "y/b:grpc", `TO "y/b:grpc": pod y/b has no TCP container port named "grpc"`},
		{"x/A", "y/b:80", `FROM "x/A": not an IP address, and not a pod name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"x/nope", "y/b:80", `FROM: pod "nope" not found in namespace "x"`},
		{"x/a", "b:80", `TO: pod "b" not found in namespace "default"`},
		{"x/a", "10.96.0.50:81", `TO 10.96.0.50:81/TCP: Service y/web has no TCP port 81`},
	}
	for _, tc := range tests {
		t.Run(tc.from+" "+tc.to, func(t *testing.T) {
			var out strings.Builder
			_, err := explainAccess(context.Background(), fake.NewClientset(explainCluster()...), "default", tc.from, tc.to, &out)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %s", err, tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("printed a decision for bad input: %q", out.String())
			}
		})
	}
}
