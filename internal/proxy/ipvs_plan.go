package proxy

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/moby/ipvs"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// IPVSDeviceName is the dummy device the ipvs mode binds service addresses to, so
// that the node accepts packets for them and IPVS (on the input hook) sees them.
const IPVSDeviceName = "kube-ipvs0"

// The ipsets of the ipvs mode, named as kube-proxy names them so that people who know
// its ipvs mode recognise them. ipvs.md explains each.
const (
	ipsetClusterIP           = "KUBE-CLUSTER-IP"
	ipsetExternalIP          = "KUBE-EXTERNAL-IP"
	ipsetExternalIPLocal     = "KUBE-EXTERNAL-IP-LOCAL"
	ipsetLoadBalancer        = "KUBE-LOAD-BALANCER"
	ipsetLoadBalancerLocal   = "KUBE-LOAD-BALANCER-LOCAL"
	ipsetLoadBalancerFW      = "KUBE-LOAD-BALANCER-FW"
	ipsetLoadBalancerSrcCIDR = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	ipsetNodePortTCP         = "KUBE-NODE-PORT-TCP"
	ipsetNodePortLocalTCP    = "KUBE-NODE-PORT-LOCAL-TCP"
	ipsetNodePortUDP         = "KUBE-NODE-PORT-UDP"
	ipsetNodePortLocalUDP    = "KUBE-NODE-PORT-LOCAL-UDP"
	ipsetNodePortSCTP        = "KUBE-NODE-PORT-SCTP-HASH"
	ipsetNodePortLocalSCTP   = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	ipsetHealthCheckNodePort = "KUBE-HEALTH-CHECK-NODE-PORT"
	ipsetLoopBack            = "KUBE-LOOP-BACK"
	ipsetIPVSIPs             = "KUBE-IPVS-IPS"
)

// ipvsIPSets is every set with its ipset type, in the order they are written.
var ipvsIPSets = []struct{ name, typ string }{
	{ipsetLoopBack, "hash:ip,port,ip"},
	{ipsetClusterIP, "hash:ip,port"},
	{ipsetExternalIP, "hash:ip,port"},
	{ipsetExternalIPLocal, "hash:ip,port"},
	{ipsetLoadBalancer, "hash:ip,port"},
	{ipsetLoadBalancerLocal, "hash:ip,port"},
	{ipsetLoadBalancerFW, "hash:ip,port"},
	{ipsetLoadBalancerSrcCIDR, "hash:ip,port,net"},
	{ipsetNodePortTCP, "bitmap:port"},
	{ipsetNodePortLocalTCP, "bitmap:port"},
	{ipsetNodePortUDP, "bitmap:port"},
	{ipsetNodePortLocalUDP, "bitmap:port"},
	{ipsetNodePortSCTP, "hash:ip,port"},
	{ipsetNodePortLocalSCTP, "hash:ip,port"},
	{ipsetHealthCheckNodePort, "bitmap:port"},
	{ipsetIPVSIPs, "hash:ip"},
}

// ipvsVirtual is one desired virtual server with its real servers (weight 1 each).
type ipvsVirtual struct {
	key     vsKey
	sched   string
	timeout uint32 // persistence in seconds, 0 for none
	dests   []rsKey
}

// service returns the virtual server as moby/ipvs takes it.
func (v *ipvsVirtual) service() *ipvs.Service {
	s := &ipvs.Service{Address: v.key.addr.AsSlice(), Protocol: v.key.proto, Port: v.key.port,
		SchedName: v.sched, AddressFamily: syscall.AF_INET, Netmask: 0xffffffff}
	if v.timeout > 0 {
		s.Flags, s.Timeout = ipvsFlagPersistent, v.timeout
	}
	return s
}

// ipvsServicePlan is what one Service asks of the ipvs mode.
type ipvsServicePlan struct {
	virtuals []*ipvsVirtual
	// bind are the addresses the service needs on kube-ipvs0.
	bind []netip.Addr
	// members are ipset members by set name.
	members map[string][]string
	// noLocal lists the ports whose Local policy finds no local endpoint while others
	// exist elsewhere: nftables drops those packets, IPVS refuses them (see ipvs.md).
	noLocal []string
	serviceOutcome
}

func (pl *ipvsServicePlan) outcome() *serviceOutcome {
	if pl == nil {
		return nil
	}
	return &pl.serviceOutcome
}

func ipvsProto(p v1.Protocol) uint16 {
	switch p {
	case v1.ProtocolUDP:
		return syscall.IPPROTO_UDP
	case v1.ProtocolSCTP:
		return syscall.IPPROTO_SCTP
	}
	return syscall.IPPROTO_TCP
}

// planIPVSService computes a Service's virtual servers, bound addresses and ipset
// members from the change trackers' model; it is pure.
func planIPVSService(cfg Config, opts IPVSOptions, ports map[ServicePortName]*ServicePort, eps map[ServicePortName][]Endpoint) *ipvsServicePlan {
	pl := &ipvsServicePlan{members: map[string][]string{}}
	bind := map[netip.Addr]bool{}
	names := slices.SortedFunc(maps.Keys(ports), func(a, b ServicePortName) int { return strings.Compare(a.String(), b.String()) })
	for _, spn := range names {
		sp := ports[spn]
		sets := categorize(sp, eps[spn], cfg.NodeName, cfg.Zone)
		internal, external := sets.cluster, sets.cluster
		if sp.InternalPolicyLocal {
			internal = sets.local
		}
		if sp.ExternalPolicyLocal {
			external = sets.local
		}
		noLocalInternal := sets.hasAny && sp.InternalPolicyLocal && len(internal) == 0
		noLocalExternal := sets.hasAny && sp.ExternalPolicyLocal && sp.externallyAccessible() && len(external) == 0
		if noLocalInternal || noLocalExternal {
			pl.noLocal = append(pl.noLocal, spn.Port+"/"+string(spn.Protocol))
		}
		if noLocalInternal {
			pl.noLocalInternal++
		}
		if noLocalExternal {
			pl.noLocalExternal++
		}
		if spn.Protocol == v1.ProtocolUDP {
			pl.addFrontends(sp, internal, external)
		}
		proto := ipvsProto(spn.Protocol)
		p := protoName(spn.Protocol)
		add := func(addr netip.Addr, port int32, use []Endpoint) {
			v := &ipvsVirtual{key: vsKey{proto, addr, uint16(port)}, sched: opts.Scheduler, timeout: uint32(sp.AffinityTimeout.Seconds())}
			for _, e := range use {
				v.dests = append(v.dests, netip.AddrPortFrom(e.IP, uint16(e.Port)))
			}
			slices.SortFunc(v.dests, netip.AddrPort.Compare)
			v.dests = slices.Compact(v.dests)
			pl.virtuals = append(pl.virtuals, v)
		}
		ipPort := func(a netip.Addr, port int32) string { return a.String() + "," + p + ":" + strconv.Itoa(int(port)) }
		member := func(set, m string) { pl.members[set] = append(pl.members[set], m) }

		add(sp.ClusterIP, sp.Port, internal)
		bind[sp.ClusterIP] = true
		member(ipsetClusterIP, ipPort(sp.ClusterIP, sp.Port))
		for _, a := range sp.ExternalIPs {
			add(a, sp.Port, external)
			bind[a] = true
			member(ipsetExternalIP, ipPort(a, sp.Port))
			if sp.ExternalPolicyLocal {
				member(ipsetExternalIPLocal, ipPort(a, sp.Port))
			}
		}
		for _, a := range sp.LoadBalancerIPs {
			add(a, sp.Port, external)
			bind[a] = true
			member(ipsetLoadBalancer, ipPort(a, sp.Port))
			if sp.ExternalPolicyLocal {
				member(ipsetLoadBalancerLocal, ipPort(a, sp.Port))
			}
			if len(sp.SourceRanges) > 0 {
				member(ipsetLoadBalancerFW, ipPort(a, sp.Port))
				// kube-proxy keeps the load balancer IP admitted as a source (a range
				// holding the node's address) in a set of its own; here it is one more
				// member of the source-range set, with the same effect.
				for _, r := range firewallSources(cfg, sp) {
					member(ipsetLoadBalancerSrcCIDR, ipPort(a, sp.Port)+","+r.String())
				}
			}
		}
		if sp.NodePort != 0 {
			for _, a := range opts.NodeAddresses {
				add(a, sp.NodePort, external)
			}
			switch spn.Protocol {
			case v1.ProtocolSCTP:
				for _, a := range opts.NodeAddresses {
					member(ipsetNodePortSCTP, ipPort(a, sp.NodePort))
					if sp.ExternalPolicyLocal {
						member(ipsetNodePortLocalSCTP, ipPort(a, sp.NodePort))
					}
				}
			default:
				all, local := ipsetNodePortTCP, ipsetNodePortLocalTCP
				if spn.Protocol == v1.ProtocolUDP {
					all, local = ipsetNodePortUDP, ipsetNodePortLocalUDP
				}
				member(all, strconv.Itoa(int(sp.NodePort)))
				if sp.ExternalPolicyLocal {
					member(local, strconv.Itoa(int(sp.NodePort)))
				}
			}
		}
		if sp.HealthCheckNodePort != 0 {
			member(ipsetHealthCheckNodePort, strconv.Itoa(int(sp.HealthCheckNodePort)))
		}
		// An endpoint of this node reaching its own service is masqueraded, or its
		// reply would never come back through IPVS to be un-NATed.
		for _, e := range slices.Concat(internal, external) {
			if e.NodeName == cfg.NodeName {
				member(ipsetLoopBack, e.IP.String()+","+p+":"+strconv.Itoa(int(e.Port))+","+e.IP.String())
			}
		}
	}
	for a := range bind {
		member := a.String()
		pl.members[ipsetIPVSIPs] = append(pl.members[ipsetIPVSIPs], member)
		pl.bind = append(pl.bind, a)
	}
	slices.SortFunc(pl.bind, netip.Addr.Compare)
	for k, m := range pl.members {
		slices.Sort(m)
		pl.members[k] = slices.Compact(m)
	}
	return pl
}

// kernelVS is the copy of one virtual server as the kernel last reported or was told.
type kernelVS struct {
	svc   ipvs.Service
	dests map[rsKey]*ipvs.Destination
}

// ipvsOp is one netlink call.
type ipvsOp struct {
	verb string // add, edit or delete
	svc  *ipvs.Service
	dest *ipvs.Destination // nil for a virtual server operation
}

func (o ipvsOp) String() string {
	s := o.verb + " " + vsKeyOf(o.svc).String()
	if o.dest != nil {
		s += fmt.Sprintf(" -> %s w%d", rsKeyOf(o.dest), o.dest.Weight)
	}
	return s
}

func ipvsDest(k rsKey, weight int) *ipvs.Destination {
	return &ipvs.Destination{Address: k.Addr().AsSlice(), Port: k.Port(), Weight: weight,
		ConnectionFlags: ipvs.ConnFwdMasq, AddressFamily: syscall.AF_INET}
}

// diffVirtual returns the calls that turn cur into want (either may be nil), and
// whether real servers are left draining. A real server no longer wanted is kept at
// weight 0 while a TCP virtual server still counts connections to it, and deleted once
// it has none (UDP and SCTP have no connection to drain, as upstream decides).
func diffVirtual(want *ipvsVirtual, cur *kernelVS) (ops []ipvsOp, draining bool) {
	if want == nil {
		if cur != nil {
			ops = append(ops, ipvsOp{verb: "delete", svc: &cur.svc})
		}
		return ops, false
	}
	svc := want.service()
	if cur == nil {
		ops = append(ops, ipvsOp{verb: "add", svc: svc})
		for _, d := range want.dests {
			ops = append(ops, ipvsOp{verb: "add", svc: svc, dest: ipvsDest(d, 1)})
		}
		return ops, false
	}
	if cur.svc.SchedName != svc.SchedName || cur.svc.Flags&^ipvsFlagHashed != svc.Flags || cur.svc.Timeout != svc.Timeout ||
		(svc.Flags&ipvsFlagPersistent != 0 && cur.svc.Netmask != svc.Netmask) {
		ops = append(ops, ipvsOp{verb: "edit", svc: svc})
	}
	for _, d := range want.dests {
		switch c := cur.dests[d]; {
		case c == nil:
			ops = append(ops, ipvsOp{verb: "add", svc: svc, dest: ipvsDest(d, 1)})
		case c.Weight != 1 || c.ConnectionFlags&ipvs.ConnFwdMask != ipvs.ConnFwdMasq:
			ops = append(ops, ipvsOp{verb: "edit", svc: svc, dest: ipvsDest(d, 1)})
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(cur.dests), netip.AddrPort.Compare) {
		if _, ok := slices.BinarySearchFunc(want.dests, k, netip.AddrPort.Compare); ok {
			continue
		}
		c := cur.dests[k]
		if want.key.proto == syscall.IPPROTO_TCP && c.ActiveConnections+c.InactiveConnections > 0 {
			draining = true
			if c.Weight != 0 {
				ops = append(ops, ipvsOp{verb: "edit", svc: svc, dest: ipvsDest(k, 0)})
			}
			continue
		}
		ops = append(ops, ipvsOp{verb: "delete", svc: svc, dest: ipvsDest(k, c.Weight)})
	}
	return ops, draining
}

// ipvsIPSetText renders every set as `ipset -exist restore` input: each set created
// when missing, flushed and refilled, so that one restore leaves exactly these members.
func ipvsIPSetText(members map[string][]string) string {
	var b strings.Builder
	for _, s := range ipvsIPSets {
		switch s.typ {
		case "bitmap:port":
			fmt.Fprintf(&b, "create %s %s range 0-65535\n", s.name, s.typ)
		default:
			fmt.Fprintf(&b, "create %s %s family inet hashsize 1024 maxelem 65536\n", s.name, s.typ)
		}
		fmt.Fprintf(&b, "flush %s\n", s.name)
		for _, m := range members[s.name] {
			fmt.Fprintf(&b, "add %s %s\n", s.name, m)
		}
	}
	return b.String()
}

// IPVSJump is a rule in a built-in chain that jumps to one of the mode's chains.
type IPVSJump struct {
	Table, Chain, Target, Comment string
}

// ipvsJumps are the jumps from the built-in chains into the mode's chains.
var ipvsJumps = []IPVSJump{
	{"nat", "PREROUTING", "KUBE-SERVICES", "kubernetes service portals"},
	{"nat", "OUTPUT", "KUBE-SERVICES", "kubernetes service portals"},
	{"nat", "POSTROUTING", "KUBE-POSTROUTING", "kubernetes postrouting rules"},
	{"filter", "INPUT", "KUBE-NODE-PORT", "kubernetes health check rules"},
	{"filter", "INPUT", "KUBE-PROXY-FIREWALL", "kube-proxy firewall rules"},
	{"filter", "INPUT", "KUBE-IPVS-FILTER", "kubernetes ipvs access filter"},
	{"filter", "FORWARD", "KUBE-PROXY-FIREWALL", "kube-proxy firewall rules"},
	{"filter", "FORWARD", "KUBE-FORWARD", "kubernetes forwarding rules"},
	{"filter", "OUTPUT", "KUBE-PROXY-FIREWALL", "kube-proxy firewall rules"},
}

// ipvsIPTablesText is the fixed rule set the ipvs mode keeps beside IPVS, as
// `iptables-restore --noflush` input: the chains it declares are rewritten whole, no
// other chain is touched. Its size does not depend on the number of services: every
// per-service decision is an ipset member.
func ipvsIPTablesText(cfg Config) string {
	cidr := cfg.ClusterCIDR.String()
	masq := "0x" + strings.TrimPrefix(masqueradeMark, "0x")
	lines := []string{
		"*nat",
		":KUBE-SERVICES - [0:0]",
		":KUBE-POSTROUTING - [0:0]",
		":KUBE-MARK-MASQ - [0:0]",
		":KUBE-NODE-PORT - [0:0]",
		":KUBE-LOAD-BALANCER - [0:0]",
		`-A KUBE-SERVICES -m comment --comment "cluster IPs reached from outside the pod network" -m set --match-set ` + ipsetClusterIP + " dst,dst ! -s " + cidr + " -j KUBE-MARK-MASQ",
		`-A KUBE-SERVICES -m comment --comment "external IPs" -m set --match-set ` + ipsetExternalIPLocal + " dst,dst -j RETURN",
		`-A KUBE-SERVICES -m comment --comment "external IPs" -m set --match-set ` + ipsetExternalIP + " dst,dst -j KUBE-MARK-MASQ",
		`-A KUBE-SERVICES -m comment --comment "load balancer IPs" -m set --match-set ` + ipsetLoadBalancer + " dst,dst -j KUBE-LOAD-BALANCER",
		"-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT",
		"-A KUBE-LOAD-BALANCER -m set --match-set " + ipsetLoadBalancerLocal + " dst,dst -j RETURN",
		"-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ",
		"-A KUBE-NODE-PORT -p tcp -m set --match-set " + ipsetNodePortLocalTCP + " dst -j RETURN",
		"-A KUBE-NODE-PORT -p tcp -m set --match-set " + ipsetNodePortTCP + " dst -j KUBE-MARK-MASQ",
		"-A KUBE-NODE-PORT -p udp -m set --match-set " + ipsetNodePortLocalUDP + " dst -j RETURN",
		"-A KUBE-NODE-PORT -p udp -m set --match-set " + ipsetNodePortUDP + " dst -j KUBE-MARK-MASQ",
		"-A KUBE-NODE-PORT -p sctp -m set --match-set " + ipsetNodePortLocalSCTP + " dst,dst -j RETURN",
		"-A KUBE-NODE-PORT -p sctp -m set --match-set " + ipsetNodePortSCTP + " dst,dst -j KUBE-MARK-MASQ",
		"-A KUBE-MARK-MASQ -j MARK --or-mark " + masq,
		`-A KUBE-POSTROUTING -m comment --comment "an endpoint reaching itself through its service" -m set --match-set ` + ipsetLoopBack + " dst,dst,src -j MASQUERADE",
		"-A KUBE-POSTROUTING -m mark ! --mark " + masq + "/" + masq + " -j RETURN",
		"-A KUBE-POSTROUTING -j MARK --xor-mark " + masq,
		"-A KUBE-POSTROUTING -j MASQUERADE --random-fully",
		"COMMIT",
		"*filter",
		":KUBE-FORWARD - [0:0]",
		":KUBE-NODE-PORT - [0:0]",
		":KUBE-PROXY-FIREWALL - [0:0]",
		":KUBE-SOURCE-RANGES-FIREWALL - [0:0]",
		":KUBE-IPVS-FILTER - [0:0]",
		`-A KUBE-PROXY-FIREWALL -m comment --comment "load balancer source ranges" -m set --match-set ` + ipsetLoadBalancerFW + " dst,dst -j KUBE-SOURCE-RANGES-FIREWALL",
		"-A KUBE-SOURCE-RANGES-FIREWALL -m set --match-set " + ipsetLoadBalancerSrcCIDR + " dst,dst,src -j RETURN",
		"-A KUBE-SOURCE-RANGES-FIREWALL -j DROP",
		"-A KUBE-FORWARD -m mark --mark " + masq + "/" + masq + " -j ACCEPT",
		"-A KUBE-FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		`-A KUBE-NODE-PORT -m comment --comment "health check node ports" -m set --match-set ` + ipsetHealthCheckNodePort + " dst -j ACCEPT",
		"-A KUBE-IPVS-FILTER -m set --match-set " + ipsetLoadBalancer + " dst,dst -j RETURN",
		"-A KUBE-IPVS-FILTER -m set --match-set " + ipsetClusterIP + " dst,dst -j RETURN",
		"-A KUBE-IPVS-FILTER -m set --match-set " + ipsetExternalIP + " dst,dst -j RETURN",
		"-A KUBE-IPVS-FILTER -m set --match-set " + ipsetHealthCheckNodePort + " dst -j RETURN",
		`-A KUBE-IPVS-FILTER -m comment --comment "other ports of addresses bound on ` + IPVSDeviceName + `" -m conntrack --ctstate NEW -m set --match-set ` + ipsetIPVSIPs + " dst -j REJECT",
		"COMMIT",
	}
	return strings.Join(lines, "\n") + "\n"
}

// ipvsServiceNames sorts names for deterministic output.
func ipvsServiceNames(m map[types.NamespacedName]*ipvsServicePlan) []types.NamespacedName {
	return slices.SortedFunc(maps.Keys(m), compareNames)
}
