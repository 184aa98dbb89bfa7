package netpol

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/tranche/tranche/internal/proxy"
	"github.com/tranche/tranche/internal/proxy/tracer"
)

// proxyTable returns node's service proxy table with Service y/web (ClusterIP
// 10.96.0.50, port 80 → 8080) whose endpoints are y/b and y/c.
func proxyTable(t *testing.T, node string) *knftables.Fake {
	t.Helper()
	fake := knftables.NewFake(knftables.IPv4Family, proxy.TableName)
	cfg := proxy.DefaultConfig(node)
	cfg.NodeIP = traceNodes[node]
	p, err := proxy.NewProxier(fake, proxy.ProxierConfig{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	p.OnServiceAdd(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "web"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.50",
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}}})
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "y", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, ep := range []string{"10.244.2.3", "10.244.2.4"} { // y/b, y/c on node-2
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ep}, NodeName: ptr.To("node-2"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}})
	}
	p.OnEndpointSliceAdd(slice)
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return fake
}

// TestTraceServiceThroughPolicies traces a pod's connection to a ClusterIP through a
// node's two tables, the proxy's and the NetworkPolicy table: the proxy DNATs it to
// one of two endpoints (every numgen branch is traced) and the policy table, whose
// forward chains run after prerouting's DNAT, judges the endpoint reached, not the
// ClusterIP.
func TestTraceServiceThroughPolicies(t *testing.T) {
	cases := []struct {
		name string
		pol  *networkingv1.NetworkPolicy
		// node is where the client runs (the endpoints are on node-2).
		node, client string
		// want are the outcomes: a dropped branch still shows the DNAT to the
		// endpoint it was dropped for.
		want     []string
		counters [][]string
	}{
		{
			name: "egress of the client allows only y/c",
			pol: egressPolicy("x", "e", podA, networkingv1.NetworkPolicyEgressRule{
				To:    from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("ns", "y"), PodSelector: sel("pod", "c")}),
				Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromInt32(8080))}}),
			node: "node-1", client: "x/a",
			want:     []string{"accept dnat 10.244.2.4:8080", "drop dnat 10.244.2.3:8080"},
			counters: [][]string{{"allow-eg-x.e-0"}, {"deny-eg-x.a"}},
		},
		{
			name: "ingress of y/b denies everything",
			pol:  ingressPolicy("y", "deny-b", map[string]string{"pod": "b"}),
			node: "node-2", client: "z/b",
			want:     []string{"accept dnat 10.244.2.4:8080", "drop dnat 10.244.2.3:8080"},
			counters: [][]string{nil, {"deny-in-y.b"}},
		},
		{
			name: "no policy: both endpoints",
			node: "node-2", client: "z/b",
			want:     []string{"accept dnat 10.244.2.3:8080", "accept dnat 10.244.2.4:8080"},
			counters: [][]string{nil, nil},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var pols []*networkingv1.NetworkPolicy
			if tc.pol != nil {
				pols = append(pols, tc.pol)
			}
			c := newCluster(t, pols)
			client, _ := c.end(t, tc.client)
			tr, err := tracer.NewMulti([]*knftables.Fake{proxyTable(t, tc.node), c.tables[tc.node]}, traceNodes[tc.node])
			if err != nil {
				t.Fatal(err)
			}
			out, err := tr.Trace(tracer.Packet{Src: client.IP, Dst: netip.MustParseAddr("10.96.0.50"), Proto: "tcp", DPort: 80})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			var counters [][]string
			for _, o := range out {
				got, counters = append(got, o.String()), append(counters, o.Counters)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.counters, counters); diff != "" {
				t.Errorf("counters (-want +got):\n%s", diff)
			}
			// The branches are what the client's direct connections to y/b and y/c
			// (port 8080) give, which TestTraceMatchesExplain checks against Explain.
			var branches, direct []string
			for _, o := range out {
				branches = append(branches, strings.Join(append([]string{o.Verdict}, o.Counters...), " "))
			}
			for _, ep := range []string{"y/b", "y/c"} {
				dst, _ := c.end(t, ep)
				d, err := Explain(ExplainInput{Policies: c.pols, Pods: c.pods, Namespaces: c.nss, From: client, To: dst, Port: 8080})
				if err != nil {
					t.Fatal(err)
				}
				direct = append(direct, explained(t, d, client, dst))
			}
			slices.Sort(branches)
			slices.Sort(direct)
			if diff := cmp.Diff(direct, branches); diff != "" {
				t.Errorf("service branches vs Explain of the endpoints (-explain +traced):\n%s", diff)
			}
		})
	}
}
