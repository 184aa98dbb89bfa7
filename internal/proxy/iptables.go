package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// The iptables mode writes kube-proxy's layout, names and comments, so that
// `iptables-save` on a node reads like the Kubernetes documentation: top-level chains
// in the filter and nat tables, and per service port KUBE-SVC (cluster endpoints),
// KUBE-SVL (local endpoints), KUBE-EXT (external traffic), KUBE-FW (source ranges) and
// per endpoint KUBE-SEP chains.

// Top-level chains of the iptables mode (kube-proxy's names).
const (
	iptServicesChain         = "KUBE-SERVICES"
	iptExternalServicesChain = "KUBE-EXTERNAL-SERVICES"
	iptNodePortsChain        = "KUBE-NODEPORTS"
	iptPostroutingChain      = "KUBE-POSTROUTING"
	iptMarkMasqChain         = "KUBE-MARK-MASQ"
	iptForwardChain          = "KUBE-FORWARD"
	iptFirewallChain         = "KUBE-PROXY-FIREWALL"
)

// Prefixes of the per-service chains; every chain the mode owns starts with "KUBE-".
const (
	iptClusterPrefix  = "KUBE-SVC-"
	iptLocalPrefix    = "KUBE-SVL-"
	iptFirewallPrefix = "KUBE-FW-"
	iptExternalPrefix = "KUBE-EXT-"
	iptEndpointPrefix = "KUBE-SEP-"
)

// iptServiceChain reports whether a nat chain is a per-service chain of this mode.
func iptServiceChain(c string) bool {
	for _, p := range []string{iptClusterPrefix, iptLocalPrefix, iptFirewallPrefix, iptExternalPrefix, iptEndpointPrefix} {
		if strings.HasPrefix(c, p) {
			return true
		}
	}
	return false
}

// iptJump is a rule in a built-in chain jumping to one of the mode's chains. The
// built-in chains are shared with the rest of the node, so these rules are inserted
// once (when missing) instead of rewriting the chain.
type iptJump struct {
	table, from, to, comment string
	extra                    string
}

// iptJumps are kube-proxy's jumps, in its order.
var iptJumps = []iptJump{
	{"filter", "INPUT", iptExternalServicesChain, "kubernetes externally-visible service portals", "-m conntrack --ctstate NEW"},
	{"filter", "FORWARD", iptExternalServicesChain, "kubernetes externally-visible service portals", "-m conntrack --ctstate NEW"},
	{"filter", "INPUT", iptNodePortsChain, "kubernetes health check service ports", ""},
	{"filter", "FORWARD", iptServicesChain, "kubernetes service portals", "-m conntrack --ctstate NEW"},
	{"filter", "OUTPUT", iptServicesChain, "kubernetes service portals", "-m conntrack --ctstate NEW"},
	{"filter", "FORWARD", iptForwardChain, "kubernetes forwarding rules", ""},
	{"filter", "INPUT", iptFirewallChain, "kubernetes load balancer firewall", "-m conntrack --ctstate NEW"},
	{"filter", "OUTPUT", iptFirewallChain, "kubernetes load balancer firewall", "-m conntrack --ctstate NEW"},
	{"filter", "FORWARD", iptFirewallChain, "kubernetes load balancer firewall", "-m conntrack --ctstate NEW"},
	{"nat", "OUTPUT", iptServicesChain, "kubernetes service portals", ""},
	{"nat", "PREROUTING", iptServicesChain, "kubernetes service portals", ""},
	{"nat", "POSTROUTING", iptPostroutingChain, "kubernetes postrouting rules", ""},
}

// rule renders the jump as an insertion at the top of its built-in chain.
func (j iptJump) rule() string {
	s := "-I " + j.from + " 1"
	if j.extra != "" {
		s += " " + j.extra
	}
	return s + " -m comment --comment " + quoteComment(j.comment) + " -j " + j.to
}

// portProtoHash is kube-proxy's: the first 16 characters of the base32 encoding of the
// SHA-256 of the service port name and the lower-case protocol.
func portProtoHash(servicePortName, protocol string) string {
	sum := sha256.Sum256([]byte(servicePortName + protocol))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// iptEndpointChainName is kube-proxy's KUBE-SEP name: the hash also covers "ip:port".
func iptEndpointChainName(servicePortName, protocol, endpoint string) string {
	sum := sha256.Sum256([]byte(servicePortName + protocol + endpoint))
	return iptEndpointPrefix + base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// kubeProxyPortName is kube-proxy's ServicePortName.String(): "ns/name" and ":port"
// when the port has a name. It is both the hashed name and the rules' comment.
func kubeProxyPortName(spn ServicePortName) string {
	s := spn.Namespace + "/" + spn.Name
	if spn.Port != "" {
		s += ":" + spn.Port
	}
	return s
}

// quoteComment quotes a comment as iptables-restore reads it.
func quoteComment(s string) string { return `"` + s + `"` }

// probability is kube-proxy's --probability for the rule choosing among n endpoints:
// 1/n with ten decimals.
func probability(n int) string { return fmt.Sprintf("%0.10f", 1.0/float64(n)) }

// iptServiceRules is what one service contributes to the two tables: its rules in the
// shared top-level chains and its own nat chains (full contents, "-A" lines).
type iptServiceRules struct {
	// Rules in the top-level chains, each a full "-A CHAIN ..." line.
	natServices, natNodePorts                                 []string
	filterServices, filterExternal, filterNodePorts, filterFW []string
	// chains are the service's own nat chains and their rules.
	chains map[string][]string
	serviceOutcome
}

func (r *iptServiceRules) outcome() *serviceOutcome {
	if r == nil {
		return nil
	}
	return &r.serviceOutcome
}

// buildIPTService is the pure generator for one service in the iptables mode.
func buildIPTService(cfg Config, ports map[ServicePortName]*ServicePort, eps map[ServicePortName][]Endpoint) *iptServiceRules {
	r := &iptServiceRules{}
	names := slices.SortedFunc(maps.Keys(ports), func(a, b ServicePortName) int { return strings.Compare(a.String(), b.String()) })
	for _, n := range names {
		r.addPort(cfg, ports[n], eps[n])
	}
	return r
}

func (r *iptServiceRules) chain(name string, rules ...string) {
	if r.chains == nil {
		r.chains = map[string][]string{}
	}
	r.chains[name] = append(r.chains[name], rules...)
}

// addPort follows kube-proxy's syncProxyRules for one service port.
func (r *iptServiceRules) addPort(cfg Config, sp *ServicePort, eps []Endpoint) {
	set := categorize(sp, eps, cfg.NodeName, cfg.Zone)
	name := kubeProxyPortName(sp.Name)
	proto := protoName(sp.Name.Protocol)
	hash := portProtoHash(name, proto)
	clusterChain, localChain := iptClusterPrefix+hash, iptLocalPrefix+hash
	extChain, fwChain := iptExternalPrefix+hash, iptFirewallPrefix+hash
	match := "-m " + proto + " -p " + proto
	port := strconv.Itoa(int(sp.Port))

	usesClusterChain := len(set.cluster) > 0 && sp.usesClusterEndpoints()
	usesLocalChain := len(set.local) > 0 && sp.usesLocalEndpoints()
	hasEndpoints := set.hasAny
	internalChain, hasInternal := clusterChain, hasEndpoints
	if sp.InternalPolicyLocal {
		internalChain, hasInternal = localChain, hasEndpoints && len(set.local) > 0
	}
	externalChain, hasExternal := clusterChain, hasEndpoints
	if sp.ExternalPolicyLocal {
		externalChain, hasExternal = localChain, hasEndpoints && len(set.local) > 0
	}
	usesExtChain := hasEndpoints && sp.externallyAccessible()
	lbChain := extChain
	usesFWChain := hasEndpoints && len(sp.LoadBalancerIPs) > 0 && len(sp.SourceRanges) > 0
	if usesFWChain {
		lbChain = fwChain
	}
	if sp.Name.Protocol == "UDP" {
		internal, external := set.cluster, set.cluster
		if sp.InternalPolicyLocal {
			internal = set.local
		}
		if sp.ExternalPolicyLocal {
			external = set.local
		}
		r.addFrontends(sp, internal, external)
	}

	internalTarget, externalTarget := "", ""
	internalComment, externalComment := "", ""
	if !hasEndpoints {
		internalTarget, externalTarget = "REJECT", "REJECT"
		internalComment = quoteComment(name + " has no endpoints")
		externalComment = internalComment
	} else {
		if !hasInternal {
			internalTarget, internalComment = "DROP", quoteComment(name+" has no local endpoints")
			r.noLocalInternal++
		}
		if !hasExternal {
			externalTarget, externalComment = "DROP", quoteComment(name+" has no local endpoints")
			r.noLocalExternal++
		}
	}

	clusterIPMatch := fmt.Sprintf("-m comment --comment %s %s -d %s --dport %s", quoteComment(name+" cluster IP"), match, sp.ClusterIP, port)
	if hasInternal {
		r.natServices = append(r.natServices, "-A "+iptServicesChain+" "+clusterIPMatch+" -j "+internalChain)
	} else {
		r.filterServices = append(r.filterServices, fmt.Sprintf("-A %s -m comment --comment %s %s -d %s --dport %s -j %s",
			iptServicesChain, internalComment, match, sp.ClusterIP, port, internalTarget))
	}
	for _, ip := range sp.ExternalIPs {
		if hasEndpoints {
			r.natServices = append(r.natServices, fmt.Sprintf("-A %s -m comment --comment %s %s -d %s --dport %s -j %s",
				iptServicesChain, quoteComment(name+" external IP"), match, ip, port, extChain))
		}
		if !hasExternal {
			r.filterExternal = append(r.filterExternal, fmt.Sprintf("-A %s -m comment --comment %s %s -d %s --dport %s -j %s",
				iptExternalServicesChain, externalComment, match, ip, port, externalTarget))
		}
	}
	for _, ip := range sp.LoadBalancerIPs {
		if hasEndpoints {
			r.natServices = append(r.natServices, fmt.Sprintf("-A %s -m comment --comment %s %s -d %s --dport %s -j %s",
				iptServicesChain, quoteComment(name+" loadbalancer IP"), match, ip, port, lbChain))
		}
		if usesFWChain {
			r.filterFW = append(r.filterFW, fmt.Sprintf("-A %s -m comment --comment %s %s -d %s --dport %s -j DROP",
				iptFirewallChain, quoteComment(name+" traffic not accepted by "+fwChain), match, ip, port))
		}
	}
	if !hasExternal {
		for _, ip := range sp.LoadBalancerIPs {
			r.filterExternal = append(r.filterExternal, fmt.Sprintf("-A %s -m comment --comment %s %s -d %s --dport %s -j %s",
				iptExternalServicesChain, externalComment, match, ip, port, externalTarget))
		}
	}
	if sp.NodePort != 0 {
		nodePort := strconv.Itoa(int(sp.NodePort))
		if hasEndpoints {
			r.natNodePorts = append(r.natNodePorts, fmt.Sprintf("-A %s -m comment --comment %s %s --dport %s -j %s",
				iptNodePortsChain, name, match, nodePort, extChain))
		}
		if !hasExternal {
			r.filterExternal = append(r.filterExternal, fmt.Sprintf("-A %s -m comment --comment %s -m addrtype --dst-type LOCAL %s --dport %s -j %s",
				iptExternalServicesChain, externalComment, match, nodePort, externalTarget))
		}
	}
	if sp.HealthCheckNodePort != 0 {
		r.filterNodePorts = append(r.filterNodePorts, fmt.Sprintf("-A %s -m comment --comment %s -m tcp -p tcp --dport %d -j ACCEPT",
			iptNodePortsChain, quoteComment(name+" health check node port"), sp.HealthCheckNodePort))
	}

	// The service's own chains.
	if hasInternal {
		r.chain(internalChain, fmt.Sprintf("-A %s %s ! -s %s -j %s", internalChain, clusterIPMatch, cfg.ClusterCIDR, iptMarkMasqChain))
	}
	if usesExtChain {
		r.chain(extChain)
		if !sp.ExternalPolicyLocal {
			r.chain(extChain, fmt.Sprintf("-A %s -m comment --comment %s -j %s", extChain, quoteComment("masquerade traffic for "+name+" external destinations"), iptMarkMasqChain))
		} else {
			r.chain(extChain,
				fmt.Sprintf("-A %s -m comment --comment %s -s %s -j %s", extChain, quoteComment("pod traffic for "+name+" external destinations"), cfg.ClusterCIDR, clusterChain),
				fmt.Sprintf("-A %s -m comment --comment %s -m addrtype --src-type LOCAL -j %s", extChain, quoteComment("masquerade LOCAL traffic for "+name+" external destinations"), iptMarkMasqChain),
				fmt.Sprintf("-A %s -m comment --comment %s -m addrtype --src-type LOCAL -j %s", extChain, quoteComment("route LOCAL traffic for "+name+" external destinations"), clusterChain))
		}
		if hasExternal {
			r.chain(extChain, fmt.Sprintf("-A %s -j %s", extChain, externalChain))
		}
	}
	if usesFWChain {
		head := fmt.Sprintf("-A %s -m comment --comment %s", fwChain, quoteComment(name+" loadbalancer IP"))
		for _, p := range firewallSources(cfg, sp) {
			r.chain(fwChain, fmt.Sprintf("%s -s %s -j %s", head, p, extChain))
		}
		r.chain(fwChain, fmt.Sprintf("-A %s -m comment --comment %s", fwChain, quoteComment("other traffic to "+name+" will be dropped by KUBE-PROXY-FIREWALL")))
	}
	if usesClusterChain {
		r.endpointRules(sp, name, clusterChain, set.cluster)
	}
	if usesLocalChain {
		r.endpointRules(sp, name, localChain, set.local)
	}
	reachable := map[string]Endpoint{}
	if sp.usesClusterEndpoints() {
		for _, e := range set.cluster {
			reachable[e.String()] = e
		}
	}
	if sp.usesLocalEndpoints() {
		for _, e := range set.local {
			reachable[e.String()] = e
		}
	}
	for _, key := range slices.Sorted(maps.Keys(reachable)) {
		e := reachable[key]
		sep := iptEndpointChainName(name, proto, key)
		head := "-A " + sep + " -m comment --comment " + name
		dnat := head
		if sp.AffinityTimeout != 0 {
			dnat += " -m recent --name " + sep + " --set"
		}
		r.chain(sep,
			fmt.Sprintf("%s -s %s -j %s", head, e.IP, iptMarkMasqChain),
			fmt.Sprintf("%s %s -j DNAT --to-destination %s", dnat, match, key))
	}
}

// endpointRules fills a KUBE-SVC or KUBE-SVL chain: affinity checks first, then one
// rule per endpoint choosing it with probability 1/(n-i), the last one always.
func (r *iptServiceRules) endpointRules(sp *ServicePort, name, chain string, eps []Endpoint) {
	proto := protoName(sp.Name.Protocol)
	r.chain(chain)
	if sp.AffinityTimeout != 0 {
		for _, e := range eps {
			sep := iptEndpointChainName(name, proto, e.String())
			r.chain(chain, fmt.Sprintf("-A %s -m comment --comment %s -m recent --name %s --rcheck --seconds %d --reap -j %s",
				chain, quoteComment(name+" -> "+e.String()), sep, int(sp.AffinityTimeout.Seconds()), sep))
		}
	}
	for i, e := range eps {
		sep := iptEndpointChainName(name, proto, e.String())
		line := fmt.Sprintf("-A %s -m comment --comment %s", chain, quoteComment(name+" -> "+e.String()))
		if i < len(eps)-1 {
			line += " -m statistic --mode random --probability " + probability(len(eps)-i)
		}
		r.chain(chain, line+" -j "+sep)
	}
}

// iptState is what the iptables mode last wrote: every service's rules (the top-level
// chains are rewritten from them at every sync) and the nat chains it owns.
type iptState struct {
	services map[types.NamespacedName]*iptServiceRules
}

func newIPTState() *iptState {
	return &iptState{services: map[types.NamespacedName]*iptServiceRules{}}
}

// chainSet returns every per-service chain of the state.
func (s *iptState) chainSet() map[string]bool {
	out := map[string]bool{}
	for _, r := range s.services {
		for c := range r.chains {
			out[c] = true
		}
	}
	return out
}

// iptPlan is one iptables-restore input and what it changes.
type iptPlan struct {
	data []byte
	// Counts for the metrics and logs.
	filterRules, natRules, natChainsWritten, chainsDeleted int
}

// planIPTables writes the restore text that brings the tables from st to the desired
// rules of the changed services, and updates st as if it succeeded. The top-level
// chains are always rewritten whole (as kube-proxy does); a service's own chains only
// when it is in changed or full is true. stale lists per-service chains found in the
// kernel (full syncs) to delete when no service uses them; jumps are the rules to
// insert into the built-in chains (full syncs, only those found missing).
func planIPTables(cfg Config, st *iptState, changed map[types.NamespacedName]*iptServiceRules, full bool, existingChains []string, jumps []iptJump) *iptPlan {
	before := st.chainSet()
	for n, r := range changed {
		if r == nil || (len(r.chains) == 0 && len(r.natServices)+len(r.natNodePorts)+len(r.filterServices)+len(r.filterExternal)+len(r.filterNodePorts)+len(r.filterFW) == 0) {
			delete(st.services, n)
		} else {
			st.services[n] = r
		}
	}
	after := st.chainSet()
	names := slices.SortedFunc(maps.Keys(st.services), compareNames)

	pl := &iptPlan{}
	var filter, nat bytes.Buffer
	line := func(b *bytes.Buffer, s string) { b.WriteString(s); b.WriteByte('\n') }
	filter.WriteString("*filter\n")
	for _, c := range []string{iptServicesChain, iptExternalServicesChain, iptForwardChain, iptNodePortsChain, iptFirewallChain} {
		line(&filter, ":"+c+" - [0:0]")
	}
	nat.WriteString("*nat\n")
	for _, c := range []string{iptServicesChain, iptNodePortsChain, iptPostroutingChain, iptMarkMasqChain} {
		line(&nat, ":"+c+" - [0:0]")
	}
	// Chain lines of the per-service chains written, then every rule.
	var written []string
	for _, n := range names {
		if _, ok := changed[n]; !full && !ok {
			continue
		}
		written = append(written, slices.Sorted(maps.Keys(st.services[n].chains))...)
	}
	slices.Sort(written)
	for _, c := range written {
		line(&nat, ":"+c+" - [0:0]")
	}
	var deleted []string
	if full {
		for _, c := range existingChains {
			if iptServiceChain(c) && !after[c] {
				deleted = append(deleted, c)
			}
		}
	} else {
		for c := range before {
			if !after[c] {
				deleted = append(deleted, c)
			}
		}
	}
	slices.Sort(deleted)
	deleted = slices.Compact(deleted)
	for _, c := range deleted {
		line(&nat, ":"+c+" - [0:0]")
	}
	pl.natChainsWritten, pl.chainsDeleted = len(written), len(deleted)

	masq := masqueradeMark + "/" + masqueradeMark
	natRule := func(s string) { line(&nat, s); pl.natRules++ }
	filterRule := func(s string) { line(&filter, s); pl.filterRules++ }
	natRule("-A " + iptPostroutingChain + " -m mark ! --mark " + masq + " -j RETURN")
	natRule("-A " + iptPostroutingChain + " -j MARK --xor-mark " + masqueradeMark)
	natRule("-A " + iptPostroutingChain + ` -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`)
	natRule("-A " + iptMarkMasqChain + " -j MARK --or-mark " + masqueradeMark)
	for _, n := range names {
		r := st.services[n]
		for _, s := range r.filterServices {
			filterRule(s)
		}
		for _, s := range r.filterExternal {
			filterRule(s)
		}
		for _, s := range r.filterNodePorts {
			filterRule(s)
		}
		for _, s := range r.filterFW {
			filterRule(s)
		}
		for _, s := range r.natServices {
			natRule(s)
		}
		for _, s := range r.natNodePorts {
			natRule(s)
		}
	}
	writtenSet := map[string]bool{}
	for _, c := range written {
		writtenSet[c] = true
	}
	for _, n := range names {
		r := st.services[n]
		for _, c := range slices.Sorted(maps.Keys(r.chains)) {
			if writtenSet[c] {
				for _, s := range r.chains[c] {
					natRule(s)
				}
			}
		}
	}
	for _, c := range deleted {
		line(&nat, "-X "+c)
	}
	natRule("-A " + iptServicesChain + ` -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j ` + iptNodePortsChain)
	filterRule("-A " + iptForwardChain + " -m conntrack --ctstate INVALID -j DROP")
	filterRule("-A " + iptForwardChain + ` -m comment --comment "kubernetes forwarding rules" -m mark --mark ` + masq + " -j ACCEPT")
	filterRule("-A " + iptForwardChain + ` -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`)
	// Jumps from the built-in chains go last, once their targets exist.
	for _, j := range jumps {
		if j.table == "filter" {
			line(&filter, j.rule())
		} else {
			line(&nat, j.rule())
		}
	}
	filter.WriteString("COMMIT\n")
	nat.WriteString("COMMIT\n")
	// iptables-restore commits each table at its COMMIT: nat goes first, so that a nat
	// table refused leaves both tables as they were. A filter table refused after it
	// leaves the new translations with the previous rejects and firewall drops, which
	// match only untranslated traffic, until the full sync that follows the failure.
	pl.data = append(nat.Bytes(), filter.Bytes()...)
	return pl
}

// missingJumps returns the jumps the saved built-in chains lack: a jump counts as there
// when its built-in chain has any rule jumping to its target.
func missingJumps(saved map[string][]byte) []iptJump {
	var out []iptJump
	for _, j := range iptJumps {
		if !hasJump(saved[j.table], j.from, j.to) {
			out = append(out, j)
		}
	}
	// Inserted at the top, so insert in reverse to keep kube-proxy's order.
	slices.Reverse(out)
	return out
}

func hasJump(saved []byte, from, to string) bool {
	for l := range strings.Lines(string(saved)) {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "-A "+from+" ") && strings.HasSuffix(l, " -j "+to) {
			return true
		}
	}
	return false
}

// savedChains lists the chains declared in iptables-save output (":NAME POLICY ...").
func savedChains(saved []byte) []string {
	var out []string
	for l := range strings.Lines(string(saved)) {
		if strings.HasPrefix(l, ":") {
			if f := strings.Fields(l[1:]); len(f) > 0 {
				out = append(out, f[0])
			}
		}
	}
	return out
}
