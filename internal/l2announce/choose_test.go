package l2announce

import (
	"fmt"
	"maps"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/overlay"
)

func node(name string, ready bool, addr string) *v1.Node {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{overlay.AnnotationPublicIP: addr}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: st}},
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: addr}}},
	}
}

func lbService(name string, local bool, ips ...string) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster}}
	if local {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
	}
	return s
}

// TestChooseRendezvous: every node computes the same announcer whatever the order of
// the candidates; a node leaving moves only the addresses it announced; addresses spread
// over the nodes.
func TestChooseRendezvous(t *testing.T) {
	all := []string{"m1", "m2", "m3"}
	if got := Choose(netip.MustParseAddr("10.0.0.1"), nil); got != "" {
		t.Errorf("no candidates: chose %q", got)
	}
	count := map[string]int{}
	for i := range 60 {
		ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})
		a := Choose(ip, all)
		if b := Choose(ip, []string{"m3", "m1", "m2"}); a != b {
			t.Fatalf("%s: %q, %q in another order", ip, a, b)
		}
		count[a]++
		for _, gone := range all {
			var rest []string
			for _, n := range all {
				if n != gone {
					rest = append(rest, n)
				}
			}
			if b := Choose(ip, rest); a != gone && b != a {
				t.Errorf("%s: %s left and the address moved from %s to %s", ip, gone, a, b)
			}
		}
	}
	for _, n := range all {
		if count[n] == 0 {
			t.Errorf("%s announces none of 60 addresses: %v", n, count)
		}
	}
}

// TestCandidates: only Ready nodes of the pod network across machines, not excluded nor
// being deleted, announce.
func TestCandidates(t *testing.T) {
	upNode := node("up", true, "10.240.0.10")
	delete(upNode.Annotations, overlay.AnnotationPublicIP)
	excluded := node("ex", true, "10.240.0.13")
	excluded.Labels = map[string]string{ExcludeLabel: ""}
	deleting := node("del", true, "10.240.0.14")
	deleting.DeletionTimestamp = &metav1.Time{}
	got := Candidates([]*v1.Node{node("m1", true, "10.240.0.11"), node("m2", false, "10.240.0.12"), upNode, excluded, deleting, node("m3", true, "10.240.0.15")})
	if fmt.Sprint(got) != "[m1 m3]" {
		t.Errorf("candidates %v, want [m1 m3]", got)
	}
}

// TestDesired: a node announces the LAN pool addresses chosen to it; not another
// Service type's, nor an address off the LAN, nor a node's own (ServiceLB's node
// addresses); with externalTrafficPolicy Local only nodes with a ready endpoint;
// Services sharing an address are announced by one node.
func TestDesired(t *testing.T) {
	lan := netip.MustParsePrefix("10.240.0.0/24")
	nodes := []*v1.Node{node("m1", true, "10.240.0.11"), node("m2", true, "10.240.0.12")}
	clusterIP := lbService("cip", false, "10.240.0.202")
	clusterIP.Spec.Type = v1.ServiceTypeClusterIP
	svcs := []*v1.Service{lbService("web", false, "10.240.0.200"), lbService("web-udp", false, "10.240.0.200"), lbService("off", false, "192.0.2.1"),
		lbService("nodes", false, "10.240.0.11"), clusterIP, lbService("local", true, "10.240.0.201")}
	ready, notReady := true, false
	m1, m2 := "m1", "m2"
	slices := []*discovery.EndpointSlice{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "local-x", Labels: map[string]string{discovery.LabelServiceName: "local"}},
		Endpoints: []discovery.Endpoint{{NodeName: &m2, Conditions: discovery.EndpointConditions{Ready: &ready}},
			{NodeName: &m1, Conditions: discovery.EndpointConditions{Ready: &notReady}}},
	}}
	union := map[netip.Addr]string{}
	for _, me := range []string{"m1", "m2"} {
		got := Desired(me, lan, nodes, svcs, slices)
		for ip, key := range got {
			if _, dup := union[ip]; dup {
				t.Errorf("%s announced by two nodes", ip)
			}
			union[ip] = key
		}
		if key, ok := got[netip.MustParseAddr("10.240.0.201")]; ok && me != "m2" {
			t.Errorf("%s announces %s of %s, whose only ready endpoint is on m2", me, "10.240.0.201", key)
		}
	}
	want := map[netip.Addr]string{netip.MustParseAddr("10.240.0.200"): "default/web", netip.MustParseAddr("10.240.0.201"): "default/local"}
	if !maps.Equal(union, want) {
		t.Errorf("announced %v, want %v", union, want)
	}
	// No ready endpoint anywhere: nobody announces the Local Service.
	slices[0].Endpoints[0].Conditions.Ready = &notReady
	for _, me := range []string{"m1", "m2"} {
		if _, ok := Desired(me, lan, nodes, svcs, slices)[netip.MustParseAddr("10.240.0.201")]; ok {
			t.Errorf("%s announces a Local Service without a ready endpoint", me)
		}
	}
}
