package proxy

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"
)

// TableName is the one nftables table (family ip) the proxy owns.
const TableName = "tranche"

// Names of the fixed chains, sets and maps of the table.
const (
	servicesChain          = "services"
	firewallCheckChain     = "firewall-check"
	endpointsCheckChain    = "service-endpoints-check"
	nodePortsCheckChain    = "nodeport-endpoints-check"
	clusterIPsCheckChain   = "cluster-ips-check"
	rejectChain            = "reject-chain"
	markMasqChain          = "mark-for-masquerade"
	masqueradingChain      = "masquerading"
	serviceIPsMap          = "service-ips"
	serviceNodePortsMap    = "service-nodeports"
	noEndpointServicesMap  = "no-endpoint-services"
	noEndpointNodePortsMap = "no-endpoint-nodeports"
	firewallIPsSet         = "firewall-ips"
	firewallAllowSet       = "firewall-allow"
	clusterIPsSet          = "cluster-ips"
	hairpinSet             = "hairpin"
)

// masqueradeMark is the packet mark bit that asks the masquerading chain to SNAT.
const masqueradeMark = "0x4000"

// maxNameLen bounds per-service chain and set names; the hash prefix keeps truncated
// names unique, the readable tail is for people reading `nft list table`.
const maxNameLen = 96

// Config is what the rules depend on besides services and endpoints.
type Config struct {
	// NodeName and Zone select local endpoints and topology hints.
	NodeName string
	Zone     string
	// ClusterCIDR is the pod network: traffic from elsewhere to a ClusterIP is
	// masqueraded so that replies come back through this node.
	ClusterCIDR netip.Prefix
	// ServiceCIDR is the ClusterIP range: unallocated addresses in it are dropped.
	ServiceCIDR netip.Prefix
	// NodeIP is the node's primary address. When the node has no route for the service
	// CIDR, the Runner adds one through the interface holding it (ensureServiceRoute).
	// When a load balancer's source ranges
	// contain it, traffic whose source is the load balancer IP itself is admitted too,
	// as kube-proxy does: where the VIP is a local address, a request from the node to
	// it loops back with the VIP as its source.
	NodeIP netip.Addr
}

// firewallSources are the sources a load balancer IP of sp admits: its source ranges,
// and its load balancer IPs when a range contains the node's address (see
// Config.NodeIP).
func firewallSources(cfg Config, sp *ServicePort) []netip.Prefix {
	out := slices.Clone(sp.SourceRanges)
	if cfg.NodeIP.IsValid() && slices.ContainsFunc(sp.SourceRanges, func(p netip.Prefix) bool { return p.Contains(cfg.NodeIP) }) {
		for _, ip := range sp.LoadBalancerIPs {
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
		}
	}
	return out
}

// DefaultConfig returns the cluster's default address plan for a node.
func DefaultConfig(nodeName string) Config {
	return Config{
		NodeName:    nodeName,
		ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"),
		ServiceCIDR: netip.MustParsePrefix("10.96.0.0/12"),
	}
}

// skeletonChain is one fixed chain: a base chain when hook is set.
type skeletonChain struct {
	name     string
	typ      knftables.BaseChainType
	hook     knftables.BaseChainHook
	priority knftables.BaseChainPriority
	rules    []string
}

// skeletonSet is one fixed set or map (isMap) that services fill with elements.
type skeletonSet struct {
	name  string
	isMap bool
	// typ is the key (: value) type, or typeOf its nft expression form.
	typ, typeOf string
	flags       []knftables.SetFlag
}

// skeleton is the fixed part of the table as data: base chains with their hooks and
// priorities, the dispatch chains, and the sets and maps whose elements carry every
// per-service decision. README.md explains each entry.
func skeleton(cfg Config) ([]skeletonChain, []skeletonSet) {
	newJump := func(chain string) string { return "ct state new jump " + chain }
	masquerading := []string{
		"ct status dnat ip saddr . ip daddr @" + hairpinSet + " masquerade fully-random",
		"meta mark & " + masqueradeMark + " == 0 return",
		"meta mark set meta mark xor " + masqueradeMark,
		"masquerade fully-random",
	}
	chains := []skeletonChain{
		{name: "filter-prerouting", typ: knftables.FilterType, hook: knftables.PreroutingHook, priority: "dstnat-10",
			rules: []string{newJump(firewallCheckChain)}},
		{name: "filter-output-pre-dnat", typ: knftables.FilterType, hook: knftables.OutputHook, priority: "-110",
			rules: []string{newJump(firewallCheckChain)}},
		{name: "filter-input", typ: knftables.FilterType, hook: knftables.InputHook, priority: "filter-10",
			rules: []string{newJump(nodePortsCheckChain), newJump(endpointsCheckChain)}},
		{name: "filter-forward", typ: knftables.FilterType, hook: knftables.ForwardHook, priority: "filter-10",
			rules: []string{newJump(endpointsCheckChain), newJump(clusterIPsCheckChain)}},
		{name: "filter-output", typ: knftables.FilterType, hook: knftables.OutputHook, priority: "filter-10",
			rules: []string{newJump(endpointsCheckChain), newJump(clusterIPsCheckChain)}},
		{name: "nat-prerouting", typ: knftables.NATType, hook: knftables.PreroutingHook, priority: "dstnat",
			rules: []string{"jump " + servicesChain}},
		{name: "nat-output", typ: knftables.NATType, hook: knftables.OutputHook, priority: "-100",
			rules: []string{"jump " + servicesChain}},
		{name: "nat-postrouting", typ: knftables.NATType, hook: knftables.PostroutingHook, priority: "srcnat",
			rules: []string{"jump " + masqueradingChain}},
		{name: servicesChain, rules: []string{
			"ip daddr . meta l4proto . th dport vmap @" + serviceIPsMap,
			"fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @" + serviceNodePortsMap,
		}},
		{name: firewallCheckChain, rules: []string{
			"ip daddr . meta l4proto . th dport @" + firewallIPsSet + " ip daddr . meta l4proto . th dport . ip saddr != @" + firewallAllowSet + " drop",
		}},
		{name: endpointsCheckChain, rules: []string{
			"ip daddr . meta l4proto . th dport vmap @" + noEndpointServicesMap,
		}},
		{name: nodePortsCheckChain, rules: []string{
			"fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @" + noEndpointNodePortsMap,
		}},
		{name: clusterIPsCheckChain, rules: []string{
			"ip daddr @" + clusterIPsSet + " meta l4proto != icmp goto " + rejectChain,
			"ip daddr " + cfg.ServiceCIDR.String() + " drop",
		}},
		{name: rejectChain, rules: []string{
			"meta l4proto tcp reject with tcp reset",
			"reject",
		}},
		{name: markMasqChain, rules: []string{
			"meta mark set meta mark or " + masqueradeMark,
		}},
		{name: masqueradingChain, rules: masquerading},
	}
	sets := []skeletonSet{
		{name: serviceIPsMap, isMap: true, typ: "ipv4_addr . inet_proto . inet_service : verdict"},
		{name: serviceNodePortsMap, isMap: true, typ: "inet_proto . inet_service : verdict"},
		{name: noEndpointServicesMap, isMap: true, typ: "ipv4_addr . inet_proto . inet_service : verdict"},
		{name: noEndpointNodePortsMap, isMap: true, typ: "inet_proto . inet_service : verdict"},
		{name: firewallIPsSet, typ: "ipv4_addr . inet_proto . inet_service"},
		{name: firewallAllowSet, typ: "ipv4_addr . inet_proto . inet_service . ipv4_addr", flags: []knftables.SetFlag{knftables.IntervalFlag}},
		{name: clusterIPsSet, typ: "ipv4_addr"},
		{name: hairpinSet, typ: "ipv4_addr . ipv4_addr"},
	}
	// One endpoints map per protocol. Only types matter in these typeofs (the modulus is
	// each picker's own), but the value must name the protocol: nft 1.0.6 cannot read
	// "ip daddr . th dport" back from the kernel, and when it reads "tcp dport" back it
	// makes every rule using the map match TCP only.
	for _, proto := range []string{"tcp", "udp", "sctp"} {
		sets = append(sets, skeletonSet{name: endpointsMapName(proto), isMap: true,
			typeOf: "ip daddr . meta l4proto . th dport . numgen random mod 1 : ip daddr . " + proto + " dport"})
	}
	return chains, sets
}

// isSkeletonMap reports whether a fixed container is a map (elements carry a value).
func isSkeletonMap(name string) bool {
	switch name {
	case serviceIPsMap, serviceNodePortsMap, noEndpointServicesMap, noEndpointNodePortsMap:
		return true
	}
	return strings.HasPrefix(name, endpointsMapPrefix)
}

// objectName returns a per-service object name: prefix, a hash of id, then id itself,
// cut to maxNameLen. The same id always gives the same name.
func objectName(prefix, id string) string {
	sum := sha256.Sum256([]byte(id))
	h := strings.ToLower(base32.StdEncoding.EncodeToString(sum[:5]))
	n := prefix + "-" + h + "-" + id
	if len(n) > maxNameLen {
		n = n[:maxNameLen]
	}
	return n
}

// portID is the readable identity of a service port in object names.
func portID(spn ServicePortName) string {
	return spn.Namespace + "/" + spn.Name + "/" + protoName(spn.Protocol) + "/" + spn.Port
}

func protoName[T ~string](p T) string { return strings.ToLower(string(p)) }

// Per-service object names.
func clusterChainName(spn ServicePortName) string { return objectName("svc", portID(spn)) }
func localChainName(spn ServicePortName) string   { return objectName("local", portID(spn)) }
func externalChainName(spn ServicePortName) string {
	return objectName("ext", portID(spn))
}
func endpointChainName(spn ServicePortName, e Endpoint) string {
	return objectName("ep", portID(spn)+"__"+e.IP.String()+"/"+fmt.Sprint(e.Port))
}
func affinitySetName(spn ServicePortName, e Endpoint) string {
	return objectName("aff", portID(spn)+"__"+e.IP.String()+"/"+fmt.Sprint(e.Port))
}

// elemKey identifies one element of a fixed set or map.
type elemKey struct {
	container string
	key       string
}

// serviceRules is everything one service contributes to the table: its own chains
// (full contents; nil when none), its own affinity sets (name → timeout; nil when
// none), and its elements of the fixed sets and maps (value "" for set elements).
type serviceRules struct {
	chains map[string][]string
	sets   map[string]time.Duration
	// elements are sorted by container and key, each key once.
	elements []elemOp
	// shared are the shared chains the service uses, each once: the endpoint pickers,
	// whose rules depend on their name only.
	shared []picker
	serviceOutcome
}

func (r *serviceRules) outcome() *serviceOutcome {
	if r == nil {
		return nil
	}
	return &r.serviceOutcome
}

// buildService is the pure rule generator for one service: from its ports and merged
// endpoints to the chains, sets and elements that implement it on this node. A service
// with no ports yields empty rules (its objects are then removed).
func buildService(cfg Config, ports map[ServicePortName]*ServicePort, eps map[ServicePortName][]Endpoint) *serviceRules {
	r := &serviceRules{}
	n := 0
	for spn := range ports {
		n += 4 + 2*len(eps[spn])
	}
	r.elements = make([]elemOp, 0, n)
	if len(ports) == 1 {
		for _, sp := range ports {
			r.addPort(cfg, sp, eps[sp.Name])
		}
	} else {
		names := make([]ServicePortName, 0, len(ports))
		for n := range ports {
			names = append(names, n)
		}
		slices.SortFunc(names, func(a, b ServicePortName) int { return strings.Compare(a.String(), b.String()) })
		for _, n := range names {
			r.addPort(cfg, ports[n], eps[n])
		}
	}
	// Sorted, and the last value of a key written twice wins.
	slices.SortStableFunc(r.elements, func(a, b elemOp) int { return compareElemKeys(a.key, b.key) })
	out := r.elements[:0]
	for i, op := range r.elements {
		if i+1 < len(r.elements) && r.elements[i+1].key == op.key {
			continue
		}
		out = append(out, op)
	}
	r.elements = out
	return r
}

func (r *serviceRules) elem(container, key, value string) {
	r.elements = append(r.elements, elemOp{elemKey{container, key}, value})
}

func (r *serviceRules) chain(name string, rules []string) {
	if r.chains == nil {
		r.chains = map[string][]string{}
	}
	r.chains[name] = rules
}

func (r *serviceRules) addPort(cfg Config, sp *ServicePort, eps []Endpoint) {
	spn := sp.Name
	set := categorize(sp, eps, cfg.NodeName, cfg.Zone)
	proto := protoName(spn.Protocol)
	// A ClusterIP-only port without affinity has no chain of its own: skip the hashing.
	var clusterChain, localChain, extChain string
	if sp.AffinityTimeout != 0 || sp.externallyAccessible() {
		clusterChain, localChain, extChain = clusterChainName(spn), localChainName(spn), externalChainName(spn)
	}

	internal, internalChain := set.cluster, clusterChain
	if sp.InternalPolicyLocal {
		internal, internalChain = set.local, localChain
	}
	external := set.cluster
	if sp.ExternalPolicyLocal {
		external = set.local
	}
	useCluster, useLocal := false, false
	if spn.Protocol == v1.ProtocolUDP {
		r.addFrontends(sp, internal, external)
	}
	if set.hasAny && sp.InternalPolicyLocal && len(set.local) == 0 {
		r.noLocalInternal++
	}
	if set.hasAny && sp.ExternalPolicyLocal && len(set.local) == 0 {
		r.noLocalExternal++
	}

	r.elem(clusterIPsSet, sp.ClusterIP.String(), "")
	ipKey := func(ip netip.Addr) string { return destKey(ip, proto, sp.Port) }
	switch {
	case len(internal) > 0 && sp.AffinityTimeout == 0:
		r.pickEndpoint(cfg, sp, internal)
	case len(internal) > 0:
		r.elem(serviceIPsMap, ipKey(sp.ClusterIP), "goto "+internalChain)
		useCluster = useCluster || !sp.InternalPolicyLocal
		useLocal = useLocal || sp.InternalPolicyLocal
	default:
		r.elem(noEndpointServicesMap, ipKey(sp.ClusterIP), noEndpointVerdict(sp.InternalPolicyLocal && set.hasAny))
	}

	if sp.externallyAccessible() {
		dests := slices.Concat(sp.ExternalIPs, sp.LoadBalancerIPs)
		nodePortKey := proto + " . " + strconv.Itoa(int(sp.NodePort))
		if len(external) > 0 {
			for _, ip := range dests {
				r.elem(serviceIPsMap, ipKey(ip), "goto "+extChain)
			}
			if sp.NodePort != 0 {
				r.elem(serviceNodePortsMap, nodePortKey, "goto "+extChain)
			}
			var rules []string
			if !sp.ExternalPolicyLocal {
				rules = []string{"jump " + markMasqChain, "goto " + clusterChain}
				useCluster = true
			} else {
				// Local policy keeps the client's address, but pods and the node itself
				// are not external clients: they may use any endpoint, and the node's own
				// traffic must be masqueraded for replies to find their way back.
				if len(set.cluster) > 0 {
					rules = append(rules,
						"ip saddr "+cfg.ClusterCIDR.String()+" goto "+clusterChain,
						"fib saddr type local jump "+markMasqChain,
						"fib saddr type local goto "+clusterChain)
					useCluster = true
				}
				rules = append(rules, "goto "+localChain)
				useLocal = true
			}
			r.chain(extChain, rules)
		} else {
			verdict := noEndpointVerdict(sp.ExternalPolicyLocal && set.hasAny)
			for _, ip := range dests {
				r.elem(noEndpointServicesMap, ipKey(ip), verdict)
			}
			if sp.NodePort != 0 {
				r.elem(noEndpointNodePortsMap, nodePortKey, verdict)
			}
		}
		if len(sp.SourceRanges) > 0 {
			for _, ip := range sp.LoadBalancerIPs {
				r.elem(firewallIPsSet, ipKey(ip), "")
				for _, p := range firewallSources(cfg, sp) {
					r.elem(firewallAllowSet, ipKey(ip)+" . "+prefixString(p), "")
				}
			}
		}
	}
	if useCluster && len(set.cluster) > 0 {
		r.chain(clusterChain, r.endpointRules(cfg, sp, set.cluster))
	}
	if useLocal && len(set.local) > 0 {
		r.chain(localChain, r.endpointRules(cfg, sp, set.local))
	}
}

// endpointsMapPrefix starts the names of the per-protocol endpoints maps.
const endpointsMapPrefix = "endpoints-"

// endpointsMapName is the endpoints map of a protocol ("tcp", "udp", "sctp").
func endpointsMapName(proto string) string { return endpointsMapPrefix + proto }

// pickerChainName is the shared chain that picks one of n endpoints of a protocol.
func pickerChainName(proto string, n int) string { return "pick-" + proto + "-1-of-" + strconv.Itoa(n) }

// picker is a shared chain sending a protocol's traffic to one of n endpoints.
type picker struct {
	name, proto string
	n           int
}

// rules are the picker's rules, which depend on its name (and the node) only.
func (pk picker) rules(cfg Config) []string {
	return []string{
		"ip saddr != " + cfg.ClusterCIDR.String() + " jump " + markMasqChain,
		fmt.Sprintf("dnat ip to ip daddr . meta l4proto . th dport . numgen random mod %d map @%s", pk.n, endpointsMapName(pk.proto)),
	}
}

// destKey is the key "ip . proto . port" of the dispatch maps.
func destKey(ip netip.Addr, proto string, port int32) string {
	var buf [48]byte
	b := ip.AppendTo(buf[:0])
	b = append(b, " . "...)
	b = append(b, proto...)
	b = append(b, " . "...)
	b = strconv.AppendInt(b, int64(port), 10)
	return string(b)
}

// pickEndpoint sends ClusterIP traffic of a port without session affinity to the
// shared chain that picks one of its n endpoints: that chain looks the endpoint up in
// the protocol's endpoints map by destination and a random index. The port then costs map
// elements only, no chain of its own, which is what keeps 10,000 services cheap to
// load and one more cheap to add.
func (r *serviceRules) pickEndpoint(cfg Config, sp *ServicePort, eps []Endpoint) {
	proto := protoName(sp.Name.Protocol)
	pk := picker{name: pickerChainName(proto, len(eps)), proto: proto, n: len(eps)}
	if !slices.Contains(r.shared, pk) {
		r.shared = append(r.shared, pk)
	}
	m := endpointsMapName(proto)
	key := destKey(sp.ClusterIP, proto, sp.Port)
	r.elem(serviceIPsMap, key, "goto "+pk.name)
	var kb, vb [64]byte
	for i, e := range eps {
		k := append(append(kb[:0], key...), " . "...)
		k = strconv.AppendInt(k, int64(i), 10)
		v := e.IP.AppendTo(vb[:0])
		v = append(v, " . "...)
		v = strconv.AppendInt(v, int64(e.Port), 10)
		r.elem(m, string(k), string(v))
	}
	r.hairpin(cfg, eps)
}

// hairpin lets this node's endpoints reach themselves: only the client's node
// translates, so only its own pods can be DNATed to themselves here. Endpoints without
// a node name may be local.
func (r *serviceRules) hairpin(cfg Config, eps []Endpoint) {
	for _, e := range eps {
		if e.NodeName == cfg.NodeName || e.NodeName == "" {
			ip := e.IP.String()
			r.elem(hairpinSet, ip+" . "+ip, "")
		}
	}
}

// addFrontends records the UDP frontends of a port: its ClusterIP sends to the
// internal endpoints, its external addresses and NodePort to the external ones. Every
// mode records them alike, for the conntrack cleanup in afterSync.
func (r *serviceOutcome) addFrontends(sp *ServicePort, internal, external []Endpoint) {
	targets := func(eps []Endpoint) []netip.AddrPort {
		out := make([]netip.AddrPort, len(eps))
		for i, e := range eps {
			out[i] = netip.AddrPortFrom(e.IP, uint16(e.Port))
		}
		return out
	}
	port := uint16(sp.Port)
	r.udp = append(r.udp, frontend{dst: sp.ClusterIP, port: port, endpoints: targets(internal)})
	if !sp.externallyAccessible() {
		return
	}
	ext := targets(external)
	for _, ip := range slices.Concat(sp.ExternalIPs, sp.LoadBalancerIPs) {
		r.udp = append(r.udp, frontend{dst: ip, port: port, endpoints: ext})
	}
	if sp.NodePort != 0 {
		r.udp = append(r.udp, frontend{port: uint16(sp.NodePort), endpoints: ext})
	}
}

// endpointRules fills one endpoint-choosing chain: masquerade ClusterIP traffic from
// outside the pod network, then pick an endpoint at random (or the client's previous
// one under session affinity) and DNAT to it.
func (r *serviceRules) endpointRules(cfg Config, sp *ServicePort, eps []Endpoint) []string {
	proto := protoName(sp.Name.Protocol)
	rules := []string{fmt.Sprintf("ip daddr %s ip saddr != %s jump %s", sp.ClusterIP, cfg.ClusterCIDR, markMasqChain)}
	r.hairpin(cfg, eps)
	dnat := func(e Endpoint) string { return fmt.Sprintf("meta l4proto %s dnat ip to %s", proto, e) }
	if sp.AffinityTimeout == 0 {
		if len(eps) == 1 {
			return append(rules, dnat(eps[0]))
		}
		targets := make([]string, len(eps))
		for i, e := range eps {
			targets[i] = fmt.Sprintf("%d : %s . %d", i, e.IP, e.Port)
		}
		return append(rules, fmt.Sprintf("meta l4proto %s dnat ip to numgen random mod %d map { %s }", proto, len(eps), strings.Join(targets, " , ")))
	}
	// Session affinity: one dynamic set of recent clients per endpoint; a known client
	// goes back to its endpoint, a new one is spread at random and remembered.
	targets := make([]string, len(eps))
	for i, e := range eps {
		aff, ep := affinitySetName(sp.Name, e), endpointChainName(sp.Name, e)
		if r.sets == nil {
			r.sets = map[string]time.Duration{}
		}
		r.sets[aff] = sp.AffinityTimeout
		r.chain(ep, []string{fmt.Sprintf("update @%s { ip saddr } %s", aff, dnat(e))})
		rules = append(rules, fmt.Sprintf("ip saddr @%s goto %s", aff, ep))
		targets[i] = fmt.Sprintf("%d : goto %s", i, ep)
	}
	if len(eps) == 1 {
		return append(rules, "goto "+endpointChainName(sp.Name, eps[0]))
	}
	return append(rules, fmt.Sprintf("numgen random mod %d vmap { %s }", len(eps), strings.Join(targets, " , ")))
}

// noEndpointVerdict rejects at once when the service has no endpoint at all, and drops
// when endpoints exist but none may serve this traffic from this node (Local policy),
// as upstream does.
func noEndpointVerdict(drop bool) string {
	if drop {
		return "drop"
	}
	return "goto " + rejectChain
}

// prefixString prints a host prefix as a bare address, as nft lists it.
func prefixString(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}
