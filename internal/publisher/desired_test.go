package publisher

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// makeService returns Service default/NAME of type NodePort with port 80 -> node port
// 30080, created age seconds after epoch, changed by mutate.
func makeService(name string, age int, mutate func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Second))},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
			Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}}},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

// loadBalancer makes a Service a LoadBalancer with the given status addresses.
func loadBalancer(ips ...string) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = nil
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
		}
	}
}

func makeNode(name, ip string, mutate func(*v1.Node)) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: v1.NodeStatus{
			Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}, {Type: v1.NodeHostName, Address: name}},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
	if mutate != nil {
		mutate(n)
	}
	return n
}

func notReady(n *v1.Node) { n.Status.Conditions[0].Status = v1.ConditionFalse }

// makeSlice returns an IPv4 slice of Service default/SVC with one port (name, 8080) and
// endpoints given as "ip@node" or "ip@node!" for not ready.
func makeSlice(svc, portName string, proto v1.Protocol, endpoints ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: svc + "-" + portName, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Protocol: ptr.To(proto), Port: ptr.To[int32](8080)}},
	}
	for _, e := range endpoints {
		addr, node, _ := strings.Cut(e, "@")
		ready := !strings.HasSuffix(node, "!")
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: ptr.To(strings.TrimSuffix(node, "!")),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}})
	}
	return s
}

func threeNodes() []*v1.Node {
	return []*v1.Node{makeNode("n0", "10.240.0.10", nil), makeNode("n1", "10.240.0.11", nil), makeNode("n2", "10.240.0.12", nil)}
}

// render shows listeners as "listener" -> "ns/svc port -> backends [ranges]".
func render(m map[Listener]Target) map[string]string {
	out := map[string]string{}
	for l, t := range m {
		var b []string
		for _, a := range t.Backends {
			b = append(b, a.String())
		}
		s := fmt.Sprintf("%s %s -> %s", t.Service, t.Port, strings.Join(b, ","))
		if len(t.SourceRanges) > 0 {
			s += fmt.Sprintf(" %v", t.SourceRanges)
		}
		out[l.String()] = s
	}
	return out
}

func TestDesired(t *testing.T) {
	cases := []struct {
		name      string
		svcs      []*v1.Service
		slices    []*discoveryv1.EndpointSlice
		nodes     []*v1.Node
		pool      func(netip.Addr) bool
		want      map[string]string
		conflicts []string
	}{
		{
			name: "seed svc-nodeport goes to every Ready node",
			svcs: []*v1.Service{makeService("svc-nodeport", 1, nil)},
			want: map[string]string{"127.0.0.1:30080/TCP": "default/svc-nodeport 80 -> 10.240.0.10:30080,10.240.0.11:30080,10.240.0.12:30080"},
		},
		{
			name: "ClusterIP and ExternalName Services are not published",
			svcs: []*v1.Service{
				makeService("internal", 1, func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP }),
				makeService("ext", 2, func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName }),
			},
			want: map[string]string{},
		},
		{
			name: "a LoadBalancer is published on its address and its node port",
			svcs: []*v1.Service{makeService("svc-loadbalancer", 1, all(loadBalancer("127.0.10.1"), nodePort(31000)))},
			want: map[string]string{
				"127.0.0.1:31000/TCP": "default/svc-loadbalancer 80 -> 10.240.0.10:31000,10.240.0.11:31000,10.240.0.12:31000",
				"127.0.10.1:80/TCP":   "default/svc-loadbalancer 80 -> 10.240.0.10:31000,10.240.0.11:31000,10.240.0.12:31000",
			},
		},
		{
			name: "a pending LoadBalancer only has its node port",
			svcs: []*v1.Service{makeService("pending", 1, loadBalancer())},
			want: map[string]string{"127.0.0.1:30080/TCP": "default/pending 80 -> 10.240.0.10:30080,10.240.0.11:30080,10.240.0.12:30080"},
		},
		{
			name: "addresses outside the publishable set are someone else's",
			svcs: []*v1.Service{makeService("cloud", 1, loadBalancer("203.0.113.7", "127.0.10.3"))},
			pool: func(a netip.Addr) bool { return a == netip.MustParseAddr("203.0.113.7") },
			want: map[string]string{
				"127.0.0.1:30080/TCP": "default/cloud 80 -> 10.240.0.10:30080,10.240.0.11:30080,10.240.0.12:30080",
				"203.0.113.7:80/TCP":  "default/cloud 80 -> 10.240.0.10:30080,10.240.0.11:30080,10.240.0.12:30080",
			},
		},
		{
			name: "by default only loopback addresses are published",
			svcs: []*v1.Service{makeService("cloud", 1, all(loadBalancer("203.0.113.7"), nodePort(0)))},
			want: map[string]string{},
		},
		{
			name: "externalTrafficPolicy Local keeps the nodes with a ready endpoint",
			svcs: []*v1.Service{makeService("local", 1, all(loadBalancer("127.0.10.1"), local))},
			slices: []*discoveryv1.EndpointSlice{
				makeSlice("local", "", v1.ProtocolTCP, "10.244.1.5@n1", "10.244.2.5@n2!"),
				makeSlice("other", "", v1.ProtocolTCP, "10.244.0.5@n0"),
			},
			want: map[string]string{
				"127.0.0.1:30080/TCP": "default/local 80 -> 10.240.0.11:30080",
				"127.0.10.1:80/TCP":   "default/local 80 -> 10.240.0.11:30080",
			},
		},
		{
			name: "Local without a ready endpoint refuses",
			svcs: []*v1.Service{makeService("local", 1, local)},
			want: map[string]string{"127.0.0.1:30080/TCP": "default/local 80 -> "},
		},
		{
			name: "nodes that are not Ready, being deleted or without an IPv4 InternalIP are left out",
			svcs: []*v1.Service{makeService("web", 1, nil)},
			nodes: []*v1.Node{
				makeNode("n0", "10.240.0.10", nil),
				makeNode("down", "10.240.0.11", notReady),
				makeNode("going", "10.240.0.12", func(n *v1.Node) { n.DeletionTimestamp = &metav1.Time{Time: epoch} }),
				makeNode("v6", "fd00::1", nil),
				makeNode("nameless", "", nil),
			},
			want: map[string]string{"127.0.0.1:30080/TCP": "default/web 80 -> 10.240.0.10:30080"},
		},
		{
			name: "a node excluded from external load balancers still serves the node port",
			svcs: []*v1.Service{makeService("web", 1, loadBalancer("127.0.10.1"))},
			nodes: []*v1.Node{makeNode("n0", "10.240.0.10", nil),
				makeNode("n1", "10.240.0.11", func(n *v1.Node) { n.Labels = map[string]string{LabelExcludeFromExternalLoadBalancers: ""} })},
			want: map[string]string{
				"127.0.0.1:30080/TCP": "default/web 80 -> 10.240.0.10:30080,10.240.0.11:30080",
				"127.0.10.1:80/TCP":   "default/web 80 -> 10.240.0.10:30080",
			},
		},
		{
			name: "UDP is published, SCTP is not",
			svcs: []*v1.Service{makeService("dns", 1, func(s *v1.Service) {
				s.Spec.Ports = []v1.ServicePort{
					{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053},
					{Name: "dns-tcp", Protocol: v1.ProtocolTCP, Port: 53, NodePort: 30053},
					{Name: "sig", Protocol: v1.ProtocolSCTP, Port: 99, NodePort: 30099},
				}
			})},
			nodes: []*v1.Node{makeNode("n0", "10.240.0.10", nil)},
			want: map[string]string{
				"127.0.0.1:30053/UDP": "default/dns dns -> 10.240.0.10:30053",
				"127.0.0.1:30053/TCP": "default/dns dns-tcp -> 10.240.0.10:30053",
			},
		},
		{
			name: "without node ports a load balancer goes to the ready endpoints",
			svcs: []*v1.Service{makeService("direct", 1, all(loadBalancer("127.0.10.2"), nodePort(0), func(s *v1.Service) {
				s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
				s.Spec.Ports[0].Name = "http"
			}))},
			slices: []*discoveryv1.EndpointSlice{
				makeSlice("direct", "http", v1.ProtocolTCP, "10.244.1.5@n1", "10.244.2.5@n2!", "10.244.0.7@n0"),
				makeSlice("direct", "http", v1.ProtocolUDP, "10.244.0.9@n0"),
			},
			want: map[string]string{"127.0.10.2:80/TCP": "default/direct http -> 10.244.0.7:8080,10.244.1.5:8080"},
		},
		{
			name: "loadBalancerSourceRanges travel with the load-balancer listener only",
			svcs: []*v1.Service{makeService("ranged", 1, all(loadBalancer("127.0.10.1"), func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"127.0.0.0/8", " 10.1.2.3/16", "junk"}
			}))},
			nodes: []*v1.Node{makeNode("n0", "10.240.0.10", nil)},
			want: map[string]string{
				"127.0.0.1:30080/TCP": "default/ranged 80 -> 10.240.0.10:30080",
				"127.0.10.1:80/TCP":   "default/ranged 80 -> 10.240.0.10:30080 [127.0.0.0/8 10.1.0.0/16]",
			},
		},
		{
			name: "two Services on one address and port: the older keeps it",
			svcs: []*v1.Service{
				makeService("newer", 2, all(loadBalancer("127.0.10.1"), nodePort(30002))),
				makeService("older", 1, all(loadBalancer("127.0.10.1"), nodePort(30001))),
			},
			nodes: []*v1.Node{makeNode("n0", "10.240.0.10", nil)},
			want: map[string]string{
				"127.0.0.1:30001/TCP": "default/older 80 -> 10.240.0.10:30001",
				"127.0.0.1:30002/TCP": "default/newer 80 -> 10.240.0.10:30002",
				"127.0.10.1:80/TCP":   "default/older 80 -> 10.240.0.10:30001",
			},
			conflicts: []string{"127.0.10.1:80/TCP default/older default/newer"},
		},
		{
			name: "a Service being deleted is unpublished at once",
			svcs: []*v1.Service{makeService("going", 1, func(s *v1.Service) { s.DeletionTimestamp = &metav1.Time{Time: epoch} })},
			want: map[string]string{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes := tc.nodes
			if nodes == nil {
				nodes = threeNodes()
			}
			got, conflicts := Desired(Input{Services: tc.svcs, Slices: tc.slices, Nodes: nodes,
				NodePortAddress: netip.MustParseAddr("127.0.0.1"), Publishable: tc.pool})
			if diff := cmp.Diff(tc.want, render(got)); diff != "" {
				t.Errorf("listeners (-want +got):\n%s", diff)
			}
			var gotConflicts []string
			for _, c := range conflicts {
				gotConflicts = append(gotConflicts, fmt.Sprintf("%s %s %s", c.Listener, c.Winner, c.Loser))
			}
			if diff := cmp.Diff(tc.conflicts, gotConflicts); diff != "" {
				t.Errorf("conflicts (-want +got):\n%s", diff)
			}
		})
	}
}

func nodePort(p int32) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.Ports[0].NodePort = p }
}

func local(s *v1.Service) { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal }

func all(fs ...func(*v1.Service)) func(*v1.Service) {
	return func(s *v1.Service) {
		for _, f := range fs {
			f(s)
		}
	}
}

func TestUnpublished(t *testing.T) {
	sctp := func(name string, port int32) v1.ServicePort {
		return v1.ServicePort{Name: name, Protocol: v1.ProtocolSCTP, Port: port, NodePort: 30000 + port}
	}
	svcs := []*v1.Service{
		makeService("mixed", 1, all(loadBalancer("127.0.10.1"), func(s *v1.Service) { s.Spec.Ports = append(s.Spec.Ports, sctp("assoc", 9999)) })),
		makeService("nodeport", 2, func(s *v1.Service) { s.Spec.Ports = []v1.ServicePort{sctp("", 7777)} }),
		makeService("internal", 3, func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeClusterIP
			s.Spec.Ports = []v1.ServicePort{sctp("", 1)}
		}),
		makeService("going", 4, func(s *v1.Service) {
			s.DeletionTimestamp = &metav1.Time{Time: epoch}
			s.Spec.Ports = []v1.ServicePort{sctp("", 1)}
		}),
	}
	want := []Skipped{
		{Service: types.NamespacedName{Namespace: "default", Name: "mixed"}, UID: "uid-mixed", Port: "assoc", Protocol: v1.ProtocolSCTP, Number: 9999},
		{Service: types.NamespacedName{Namespace: "default", Name: "nodeport"}, UID: "uid-nodeport", Port: "7777", Protocol: v1.ProtocolSCTP, Number: 7777},
	}
	if diff := cmp.Diff(want, Unpublished(svcs)); diff != "" {
		t.Fatalf("unpublished ports (-want +got):\n%s", diff)
	}
}
