package servicelb

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// makeNode returns a Node with the given Ready status and addresses ("InternalIP=a").
func makeNode(name string, ready v1.ConditionStatus, addrs ...v1.NodeAddress) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: v1.NodeStatus{Addresses: addrs, Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: ready}}}}
}

func labelled(n *v1.Node, enablelb string) *v1.Node {
	n.Labels = map[string]string{LabelEnableLB: enablelb}
	return n
}

func internalIP(a string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeInternalIP, Address: a} }
func externalIP(a string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeExternalIP, Address: a} }

// nodesSummary renders a plan as name -> "addresses" or "pending: reason".
func nodesSummary(p Plan) map[string]string {
	out := map[string]string{}
	for k, a := range p {
		if a.Pending != "" {
			out[k.Name] = "pending: " + a.Pending
			continue
		}
		out[k.Name] = addrList(a.Nodes)
	}
	return out
}

func TestComputeNodes(t *testing.T) {
	nodes := []*v1.Node{
		makeNode("c", v1.ConditionTrue, internalIP("10.240.0.103")),
		makeNode("a", v1.ConditionTrue, internalIP("10.240.0.101"), v1.NodeAddress{Type: v1.NodeHostName, Address: "a"}),
		makeNode("b", v1.ConditionTrue, internalIP("10.240.0.102"), externalIP("192.0.2.2")),
		makeNode("unknown", v1.ConditionUnknown, internalIP("10.240.0.104")),
		makeNode("v6", v1.ConditionTrue, internalIP("fd00::5")),
	}
	held := Plan{{Namespace: "default", Name: "young"}: {Nodes: []netip.Addr{netip.MustParseAddr("10.240.0.101")}}}
	for _, tc := range []struct {
		name  string
		svcs  []*v1.Service
		nodes []*v1.Node
		prev  Plan
		want  map[string]string
	}{
		{name: "Ready nodes, ExternalIP before InternalIP, sorted",
			svcs: []*v1.Service{makeService("web", 0, nil)}, nodes: nodes,
			want: map[string]string{"web": "10.240.0.101, 10.240.0.103, 192.0.2.2"}},
		{name: "not LoadBalancer or another class: left alone",
			svcs: []*v1.Service{makeService("np", 0, func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort }),
				makeService("other", 1, withClass("example.com/lb"))}, nodes: nodes,
			want: map[string]string{}},
		{name: "same port: the older one holds it",
			svcs:  []*v1.Service{makeService("young", 5, nil), makeService("old", 1, nil), makeService("udp", 6, withPorts(udp(80)))},
			nodes: nodes[:1],
			want: map[string]string{"old": "10.240.0.103", "udp": "10.240.0.103",
				"young": "pending: port TCP/80 of the nodes' addresses is already used by Service default/old"}},
		{name: "same port: the holder keeps it",
			svcs:  []*v1.Service{makeService("young", 5, nil), makeService("old", 1, nil)},
			nodes: nodes[:1], prev: held,
			want: map[string]string{"young": "10.240.0.103",
				"old": "pending: port TCP/80 of the nodes' addresses is already used by Service default/young"}},
		{name: "only the nodes labelled enablelb=true when any is",
			svcs: []*v1.Service{makeService("web", 0, nil)},
			nodes: append([]*v1.Node{labelled(makeNode("d", v1.ConditionTrue, internalIP("10.240.0.109")), "true"),
				labelled(makeNode("e", v1.ConditionTrue, internalIP("10.240.0.110")), "false")}, nodes...),
			want: map[string]string{"web": "10.240.0.109"}},
		{name: "no Ready node",
			svcs: []*v1.Service{makeService("web", 0, nil)}, nodes: nodes[3:4],
			want: map[string]string{"web": "pending: no Ready node has an IPv4 address to offer (--loadbalancer-pool nodes)"}},
		{name: "spec.loadBalancerIP",
			svcs: []*v1.Service{makeService("web", 0, withRequest("10.240.0.101"))}, nodes: nodes,
			want: map[string]string{"web": "pending: spec.loadBalancerIP 10.240.0.101 cannot be chosen: the load-balancer addresses are the nodes' own (--loadbalancer-pool nodes)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, nodesSummary(ComputeNodes(tc.svcs, tc.nodes, tc.prev))); d != "" {
				t.Errorf("plan (-want +got):\n%s", d)
			}
		})
	}
}

// TestNodesIngress: the nodes' addresses are written with ipMode VIP, since each
// node's proxy takes their traffic itself.
func TestNodesIngress(t *testing.T) {
	vip := v1.LoadBalancerIPModeVIP
	a := Assignment{IP: netip.MustParseAddr("10.0.0.1"), Nodes: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")}}
	want := []v1.LoadBalancerIngress{{IP: "10.0.0.1", IPMode: &vip}, {IP: "10.0.0.2", IPMode: &vip}}
	if d := cmp.Diff(want, Ingress(a)); d != "" {
		t.Errorf("ingress (-want +got):\n%s", d)
	}
}

func TestParseNodesPool(t *testing.T) {
	p, err := ParsePool(" nodes ")
	if err != nil || !p.Nodes() || p.Empty() || p.String() != "nodes" || p.Contains(netip.MustParseAddr("10.0.0.1")) {
		t.Fatalf("ParsePool(nodes) = %+v, %v: want the nodes' pool, not empty, holding no address", p, err)
	}
	if p, _ := ParsePool("127.0.10.0/24"); p.Nodes() {
		t.Fatal("a CIDR pool says it is the nodes'")
	}
}

// TestControllerGivesTheNodesAddresses: with NodesPool the controller writes the Ready
// nodes' addresses (ipMode VIP) in one write, with an Event, and writes again when a
// node stops being Ready.
func TestControllerGivesTheNodesAddresses(t *testing.T) {
	f := start(t, NodesPool, makeService("web", 0, nil),
		makeNode("a", v1.ConditionTrue, internalIP("10.240.0.101")), makeNode("b", v1.ConditionTrue, internalIP("10.240.0.102")))
	f.waitWrites(t, "web 10.240.0.101/VIP")
	f.waitEvent(t, "Normal AddressAssigned Assigned the nodes' addresses 10.240.0.101, 10.240.0.102")
	svc, err := f.client.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ingressIPs(svc); got != "10.240.0.101 10.240.0.102" {
		t.Fatalf("ingress %q, want both nodes' addresses", got)
	}
	f.waitCached(t, "web", "10.240.0.101")
	a, err := f.client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.Status.Conditions[0].Status = v1.ConditionUnknown
	if _, err := f.client.CoreV1().Nodes().UpdateStatus(context.Background(), a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitWrites(t, "web 10.240.0.101/VIP", "web 10.240.0.102/VIP")
}

func ingressIPs(svc *v1.Service) string {
	var ips []string
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		ips = append(ips, ing.IP)
	}
	return strings.Join(ips, " ")
}
