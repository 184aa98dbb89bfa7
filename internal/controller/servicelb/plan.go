package servicelb

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// LoadBalancerClass is the spec.loadBalancerClass this controller answers to, besides
// Services that name no class. It is a prefixed name, as Kubernetes requires for
// implementation classes, on the project's domain like the storage provisioner
// (tranche.dev/local) and the ingress controller (tranche.dev/ingress).
const LoadBalancerClass = "tranche.dev/loadbalancer"

// Port is one protocol and port a Service occupies on its address.
type Port struct {
	Protocol v1.Protocol
	Port     int32
}

func (p Port) String() string { return fmt.Sprintf("%s/%d", p.Protocol, p.Port) }

// Assignment is the plan's outcome for one Service.
type Assignment struct {
	// IP is the Service's address; it is not valid while the Service is pending.
	// With NodesPool it is the first of Nodes.
	IP netip.Addr
	// Nodes are the nodes' addresses a Service of NodesPool gets (ComputeNodes).
	Nodes []netip.Addr
	// Ports are the ports the Service occupies, sorted.
	Ports []Port
	// Pending says why the Service has no address; empty when it has one.
	Pending string
	// Left says why the Service left the address its status showed, when another
	// program took it on the host; empty otherwise.
	Left string
}

// Plan maps every Service the controller serves to its assignment.
type Plan map[types.NamespacedName]Assignment

// Eligible reports whether the controller serves svc: a LoadBalancer Service, not
// being deleted, with no loadBalancerClass or LoadBalancerClass. Services of other
// classes belong to other controllers and are never touched.
func Eligible(svc *v1.Service) bool {
	if svc.Spec.Type != v1.ServiceTypeLoadBalancer || svc.DeletionTimestamp != nil {
		return false
	}
	return svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass == LoadBalancerClass
}

// candidate is an eligible Service with what Compute needs to know about it.
type candidate struct {
	svc       *v1.Service
	key       types.NamespacedName
	ports     []Port
	requested netip.Addr // spec.loadBalancerIP, when set
	badReq    string     // why spec.loadBalancerIP is unusable
	current   netip.Addr // the pool address its status shows, when any
	left      string     // why it leaves the address its status shows (taken on the host)
	tier      int
}

// Order in which candidates are served: a Service never loses its address to one
// that comes after it.
const (
	tierSettled   = iota // holds its address and its ports did not grow since the last plan
	tierHolder           // holds an address (after a restart, or its ports grew)
	tierRequester        // asks for a given address with spec.loadBalancerIP
	tierNew              // takes any free address
)

// Compute assigns addresses of pool to every eligible Service among svcs. The result
// depends only on its arguments and, for a pool with a Host, on which ports other
// programs hold on the host; so the controller can be tested, and restarted, without
// surprises.
//
// Rules, in order:
//   - a Service keeps the pool address its status already shows, unless
//     spec.loadBalancerIP asks for another one, or another program took one of its
//     ports on the host (then it moves, as a new Service would);
//   - a Service with spec.loadBalancerIP gets exactly that address if it is in the pool
//     and none of the Service's ports is taken there, else it stays pending;
//   - any other Service gets the lowest address no Service uses and the host has its
//     ports free; when every such address is used, it shares the lowest address where
//     none of its ports (protocol and port) is taken;
//   - when two Services want the same port of one address, the one served first keeps
//     it and the later one stays pending, with a reason naming the other. Served first
//     are holders whose ports did not grow since prev (the previous plan, may be nil),
//     then other holders, then Services asking for an address, each group by creation
//     time and then namespace/name.
func Compute(svcs []*v1.Service, pool Pool, prev Plan) Plan {
	pool = pool.snapshot()
	var cands []candidate
	for _, svc := range svcs {
		if Eligible(svc) {
			cands = append(cands, newCandidate(svc, pool, prev))
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.tier, b.tier),
			a.svc.CreationTimestamp.Time.Compare(b.svc.CreationTimestamp.Time),
			cmp.Compare(a.key.Namespace, b.key.Namespace), cmp.Compare(a.key.Name, b.key.Name))
	})
	plan := Plan{}
	used := map[netip.Addr]map[Port]types.NamespacedName{}
	take := func(c candidate, ip netip.Addr, left string) {
		if used[ip] == nil {
			used[ip] = map[Port]types.NamespacedName{}
		}
		for _, p := range c.ports {
			used[ip][p] = c.key
		}
		plan[c.key] = Assignment{IP: ip, Ports: c.ports, Left: left}
	}
	// collision names the first port of c taken on ip, by a Service of the cluster
	// or by another program on the host, or returns "".
	collision := func(c candidate, ip netip.Addr) string {
		for _, p := range c.ports {
			if owner, ok := used[ip][p]; ok {
				return fmt.Sprintf("port %s of %s is already used by Service %s", p, ip, owner)
			}
		}
		return pool.hostTaken(ip, c.ports)
	}
	for _, c := range cands {
		pending := func(reason string) { plan[c.key] = Assignment{Ports: c.ports, Pending: reason} }
		switch {
		case c.badReq != "":
			pending(c.badReq)
		case c.requested.IsValid():
			if why := collision(c, c.requested); why != "" {
				pending(why + " (spec.loadBalancerIP asks for that address)")
			} else {
				take(c, c.requested, "")
			}
		case c.current.IsValid():
			if why := collision(c, c.current); why != "" {
				pending(why + "; remove the colliding port or change one of the two Services' ports")
			} else {
				take(c, c.current, "")
			}
		default:
			if ip, ok := allocate(c, pool, used, collision); ok {
				take(c, ip, c.left)
			} else if pool.Empty() {
				pending("the load-balancer pool is empty (see the server's --loadbalancer-pool)")
			} else {
				pending(fmt.Sprintf("no address of the load-balancer pool %s has %s free: %s", pool, portList(c.ports), holders(c, pool, collision)))
			}
		}
	}
	return plan
}

// allocate returns the lowest pool address no Service uses and where the host has
// c's ports free, else the lowest used one where none of c's ports is taken.
func allocate(c candidate, pool Pool, used map[netip.Addr]map[Port]types.NamespacedName, collision func(candidate, netip.Addr) string) (netip.Addr, bool) {
	for a := range pool.Addrs() {
		if _, ok := used[a]; !ok && pool.hostTaken(a, c.ports) == "" {
			return a, true
		}
	}
	shared := make([]netip.Addr, 0, len(used))
	for a := range used {
		if pool.Contains(a) {
			shared = append(shared, a)
		}
	}
	slices.SortFunc(shared, netip.Addr.Compare)
	for _, a := range shared {
		if collision(c, a) == "" {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// holders explains an exhausted pool by the collisions on its first addresses.
func holders(c candidate, pool Pool, collision func(candidate, netip.Addr) string) string {
	const shown = 3
	var why []string
	n := 0
	for a := range pool.Addrs() {
		if n < shown {
			why = append(why, collision(c, a))
		}
		n++
	}
	if n > shown {
		why = append(why, fmt.Sprintf("and %d more addresses", n-shown))
	}
	return strings.Join(why, "; ")
}

func newCandidate(svc *v1.Service, pool Pool, prev Plan) candidate {
	c := candidate{svc: svc, key: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, ports: servicePorts(svc), tier: tierNew}
	if s := strings.TrimSpace(svc.Spec.LoadBalancerIP); s != "" {
		ip, err := netip.ParseAddr(s)
		switch {
		case err != nil:
			c.badReq = fmt.Sprintf("spec.loadBalancerIP %q is not an IP address", svc.Spec.LoadBalancerIP)
		case !pool.Contains(ip):
			c.badReq = fmt.Sprintf("spec.loadBalancerIP %s is not in the load-balancer pool %s", ip, pool)
		default:
			c.requested = ip.Unmap()
			c.tier = tierRequester
		}
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ip, err := netip.ParseAddr(ing.IP); err == nil && pool.Contains(ip) {
			c.current = ip.Unmap()
			break
		}
	}
	if c.requested.IsValid() && c.current != c.requested {
		c.current = netip.Addr{}
	}
	if c.current.IsValid() && !c.requested.IsValid() {
		// It competes as a new Service, after every holder kept its address.
		if why := pool.hostTaken(c.current, c.ports); why != "" {
			c.left, c.current = why, netip.Addr{}
		}
	}
	if c.current.IsValid() {
		c.tier = tierHolder
		if p, ok := prev[c.key]; ok && p.IP == c.current && subset(c.ports, p.Ports) {
			c.tier = tierSettled
		}
	}
	return c
}

// servicePorts returns the distinct protocol/port pairs of svc, sorted.
func servicePorts(svc *v1.Service) []Port {
	var ports []Port
	for _, sp := range svc.Spec.Ports {
		proto := sp.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		ports = append(ports, Port{Protocol: proto, Port: sp.Port})
	}
	slices.SortFunc(ports, func(a, b Port) int {
		return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
	})
	return slices.Compact(ports)
}

// subset reports whether every element of a (sorted) is in b (sorted).
func subset(a, b []Port) bool {
	for _, p := range a {
		if !slices.Contains(b, p) {
			return false
		}
	}
	return true
}

func portList(ports []Port) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
