package servicelb

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// makeService returns a LoadBalancer Service default/NAME created age seconds after
// epoch, with one TCP port 80, changed by mutate.
func makeService(name string, age int, mutate func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Second))},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30000 + int32(age)}}},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func withPorts(ports ...v1.ServicePort) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.Ports = ports }
}

func tcp(port int32) v1.ServicePort { return v1.ServicePort{Protocol: v1.ProtocolTCP, Port: port} }
func udp(port int32) v1.ServicePort { return v1.ServicePort{Protocol: v1.ProtocolUDP, Port: port} }

func withStatus(ip string) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Status.LoadBalancer.Ingress = Ingress(Assignment{IP: netip.MustParseAddr(ip)})
	}
}

func withRequest(ip string) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.LoadBalancerIP = ip }
}

func withClass(c string) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.LoadBalancerClass = &c }
}

func all(fs ...func(*v1.Service)) func(*v1.Service) {
	return func(s *v1.Service) {
		for _, f := range fs {
			f(s)
		}
	}
}

// summary renders a plan as name -> "IP" or "pending: reason".
func summary(p Plan) map[string]string {
	out := map[string]string{}
	for k, a := range p {
		if a.IP.IsValid() {
			out[k.Name] = a.IP.String()
			if a.Left != "" {
				out[k.Name] += ", left: " + a.Left
			}
		} else {
			out[k.Name] = "pending: " + a.Pending
		}
	}
	return out
}

func TestCompute(t *testing.T) {
	small := MustParsePool("127.0.10.1-127.0.10.2")
	cases := []struct {
		name string
		pool *Pool // nil means DefaultPool
		svcs []*v1.Service
		prev Plan
		// taken are the "PROTO/ip:port" other programs hold on the host; nil means
		// the pool has no Host.
		taken []string
		want  map[string]string
	}{
		{
			name: "each Service gets the lowest unused address",
			svcs: []*v1.Service{makeService("b", 2, nil), makeService("a", 1, nil), makeService("c", 3, nil)},
			want: map[string]string{"a": "127.0.10.1", "b": "127.0.10.2", "c": "127.0.10.3"},
		},
		{
			name: "only LoadBalancer Services of no class or ours take part",
			svcs: []*v1.Service{
				makeService("plain", 1, func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort }),
				makeService("other-class", 2, withClass("example.com/cloud")),
				makeService("ours", 3, withClass(LoadBalancerClass)),
				makeService("gone", 4, func(s *v1.Service) { s.DeletionTimestamp = &metav1.Time{Time: epoch} }),
			},
			want: map[string]string{"ours": "127.0.10.1"},
		},
		{
			name: "a holder keeps its address even when a lower one is free",
			svcs: []*v1.Service{makeService("old", 1, nil), makeService("holder", 2, withStatus("127.0.10.7"))},
			want: map[string]string{"old": "127.0.10.1", "holder": "127.0.10.7"},
		},
		{
			name: "an address outside the pool is replaced",
			svcs: []*v1.Service{makeService("moved", 1, withStatus("127.0.99.1"))},
			want: map[string]string{"moved": "127.0.10.1"},
		},
		{
			name: "an exhausted pool is shared by Services whose ports differ",
			pool: &small,
			svcs: []*v1.Service{
				makeService("a", 1, nil), makeService("b", 2, nil),
				makeService("c", 3, withPorts(tcp(443))),
				makeService("d", 4, withPorts(udp(80))),
			},
			want: map[string]string{"a": "127.0.10.1", "b": "127.0.10.2", "c": "127.0.10.1", "d": "127.0.10.1"},
		},
		{
			name: "when every address has the port, the later Service is pending",
			pool: &small,
			svcs: []*v1.Service{makeService("a", 1, nil), makeService("b", 2, nil), makeService("c", 3, withPorts(tcp(8080), tcp(80)))},
			want: map[string]string{"a": "127.0.10.1", "b": "127.0.10.2",
				"c": "pending: no address of the load-balancer pool 127.0.10.1-127.0.10.2 has TCP/80, TCP/8080 free: " +
					"port TCP/80 of 127.0.10.1 is already used by Service default/a; port TCP/80 of 127.0.10.2 is already used by Service default/b"},
		},
		{
			name: "spec.loadBalancerIP is honoured, also on a shared address",
			svcs: []*v1.Service{
				makeService("web", 1, withStatus("127.0.10.1")),
				makeService("tls", 2, all(withRequest("127.0.10.1"), withPorts(tcp(443)))),
				makeService("free", 3, nil),
			},
			want: map[string]string{"web": "127.0.10.1", "tls": "127.0.10.1", "free": "127.0.10.2"},
		},
		{
			name: "a requested address is kept off the free allocation",
			svcs: []*v1.Service{makeService("older", 1, nil), makeService("asks", 2, withRequest("127.0.10.1"))},
			want: map[string]string{"asks": "127.0.10.1", "older": "127.0.10.2"},
		},
		{
			name: "a requested port collision leaves the later Service pending",
			svcs: []*v1.Service{makeService("first", 1, withStatus("127.0.10.1")), makeService("second", 2, withRequest("127.0.10.1"))},
			want: map[string]string{"first": "127.0.10.1",
				"second": "pending: port TCP/80 of 127.0.10.1 is already used by Service default/first (spec.loadBalancerIP asks for that address)"},
		},
		{
			name: "unusable spec.loadBalancerIP",
			svcs: []*v1.Service{makeService("outside", 1, withRequest("10.0.0.1")), makeService("garbage", 2, withRequest("pizza"))},
			want: map[string]string{
				"outside": "pending: spec.loadBalancerIP 10.0.0.1 is not in the load-balancer pool 127.0.10.0/24",
				"garbage": `pending: spec.loadBalancerIP "pizza" is not an IP address`},
		},
		{
			name: "a changed spec.loadBalancerIP moves the Service",
			svcs: []*v1.Service{makeService("mover", 1, all(withStatus("127.0.10.1"), withRequest("127.0.10.9")))},
			want: map[string]string{"mover": "127.0.10.9"},
		},
		{
			name: "a holder whose ports grew into a neighbour's loses to the settled neighbour",
			svcs: []*v1.Service{
				makeService("grew", 1, all(withStatus("127.0.10.1"), withPorts(tcp(80), tcp(443)))),
				makeService("settled", 2, all(withStatus("127.0.10.1"), withPorts(tcp(443)))),
			},
			prev: Plan{
				{Namespace: "default", Name: "grew"}:    {IP: netip.MustParseAddr("127.0.10.1"), Ports: []Port{{v1.ProtocolTCP, 80}}},
				{Namespace: "default", Name: "settled"}: {IP: netip.MustParseAddr("127.0.10.1"), Ports: []Port{{v1.ProtocolTCP, 443}}},
			},
			want: map[string]string{"settled": "127.0.10.1",
				"grew": "pending: port TCP/443 of 127.0.10.1 is already used by Service default/settled; remove the colliding port or change one of the two Services' ports"},
		},
		{
			name: "without a previous plan the older holder wins",
			svcs: []*v1.Service{
				makeService("older", 1, all(withStatus("127.0.10.1"), withPorts(tcp(80), tcp(443)))),
				makeService("newer", 2, all(withStatus("127.0.10.1"), withPorts(tcp(443)))),
			},
			want: map[string]string{"older": "127.0.10.1",
				"newer": "pending: port TCP/443 of 127.0.10.1 is already used by Service default/older; remove the colliding port or change one of the two Services' ports"},
		},
		{
			name: "an address whose port another program holds on the host is skipped",
			svcs: []*v1.Service{makeService("web", 1, nil), makeService("dns", 2, withPorts(udp(53))),
				makeService("sctp", 3, withPorts(v1.ServicePort{Protocol: v1.ProtocolSCTP, Port: 80}))},
			taken: []string{"TCP/127.0.10.1:80", "TCP/127.0.10.2:80", "SCTP/127.0.10.1:80"},
			want:  map[string]string{"web": "127.0.10.3", "dns": "127.0.10.1", "sctp": "127.0.10.2"},
		},
		{
			name:  "a holder whose port another program took on the host moves",
			svcs:  []*v1.Service{makeService("holder", 1, withStatus("127.0.10.1")), makeService("udp", 2, all(withStatus("127.0.10.1"), withPorts(udp(80))))},
			taken: []string{"TCP/127.0.10.1:80"},
			want: map[string]string{"udp": "127.0.10.1",
				"holder": "127.0.10.2, left: port TCP/80 of 127.0.10.1 is held by another program on the host"},
		},
		{
			name:  "a requested address whose port another program holds stays pending",
			svcs:  []*v1.Service{makeService("asks", 1, withRequest("127.0.10.5"))},
			taken: []string{"TCP/127.0.10.5:80"},
			want: map[string]string{
				"asks": "pending: port TCP/80 of 127.0.10.5 is held by another program on the host (spec.loadBalancerIP asks for that address)"},
		},
		{
			name:  "a pool the host holds entirely leaves Services pending with the reason",
			pool:  &small,
			svcs:  []*v1.Service{makeService("a", 1, nil)},
			taken: []string{"TCP/127.0.10.1:80", "TCP/127.0.10.2:80"},
			want: map[string]string{"a": "pending: no address of the load-balancer pool 127.0.10.1-127.0.10.2 has TCP/80 free: " +
				"port TCP/80 of 127.0.10.1 is held by another program on the host; port TCP/80 of 127.0.10.2 is held by another program on the host"},
		},
		{
			name: "empty pool",
			pool: &Pool{},
			svcs: []*v1.Service{makeService("a", 1, nil)},
			want: map[string]string{"a": "pending: the load-balancer pool is empty (see the server's --loadbalancer-pool)"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := MustParsePool(DefaultPool)
			if tc.pool != nil {
				pool = *tc.pool
			}
			if tc.taken != nil {
				pool = pool.OnHost(newFakeHost(tc.taken...))
			}
			got := summary(Compute(tc.svcs, pool, tc.prev))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestComputeIsStable: the plan of a plan's own statuses is the same plan, so the
// controller converges after one write.
func TestComputeIsStable(t *testing.T) {
	pool := MustParsePool("127.0.10.1-127.0.10.2")
	svcs := []*v1.Service{makeService("a", 1, nil), makeService("b", 2, withPorts(tcp(80), udp(53))),
		makeService("c", 3, withPorts(udp(53))), makeService("d", 4, withRequest("127.0.10.2"))}
	first := Compute(svcs, pool, nil)
	for _, s := range svcs {
		s.Status.LoadBalancer.Ingress = Ingress(first[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}])
	}
	second := Compute(svcs, pool, first)
	if diff := cmp.Diff(summary(first), summary(second)); diff != "" {
		t.Fatalf("second plan differs (-first +second):\n%s", diff)
	}
}

// fakeHost is a Host where other programs hold the listed "PROTO/ip:port".
type fakeHost struct {
	mu      sync.Mutex
	taken   map[string]bool
	changed chan struct{}
}

var _ Host = (*fakeHost)(nil)

func newFakeHost(taken ...string) *fakeHost {
	h := &fakeHost{taken: map[string]bool{}, changed: make(chan struct{}, 1)}
	for _, t := range taken {
		h.taken[t] = true
	}
	return h
}

func (h *fakeHost) Taken(protocol v1.Protocol, addr netip.AddrPort) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.taken[string(protocol)+"/"+addr.String()]
}

func (h *fakeHost) Changed() <-chan struct{} { return h.changed }

// take makes another program hold "PROTO/ip:port" and tells the controller, as the
// publisher does when it cannot listen.
func (h *fakeHost) take(what string) {
	h.mu.Lock()
	h.taken[what] = true
	h.mu.Unlock()
	h.changed <- struct{}{}
}

// flippingHost says a port is free the first time it is asked, taken afterwards: another
// program binding it while a plan is computed.
type flippingHost struct {
	asked map[netip.AddrPort]int
}

func (h *flippingHost) Taken(_ v1.Protocol, addr netip.AddrPort) bool {
	h.asked[addr]++
	return h.asked[addr] > 1
}

func (h *flippingHost) Changed() <-chan struct{} { return nil }

// TestComputeSeesOneStateOfTheHost: a port taken on the host while a plan is computed
// does not leave its holder pending (a status write clearing its address); the plan
// keeps it, and the next plan, which the publisher's signal starts, moves it.
func TestComputeSeesOneStateOfTheHost(t *testing.T) {
	pool := MustParsePool(DefaultPool).OnHost(&flippingHost{asked: map[netip.AddrPort]int{}})
	web := makeService("web", 1, withStatus("127.0.10.1"))
	plan := Compute([]*v1.Service{web}, pool, nil)
	got := plan[types.NamespacedName{Namespace: "default", Name: "web"}]
	if got.IP != netip.MustParseAddr("127.0.10.1") || got.Pending != "" {
		t.Fatalf("web: %+v, want it kept at 127.0.10.1", got)
	}
}
