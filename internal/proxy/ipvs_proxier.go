package proxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/moby/ipvs"
)

// IPVSOptions configures the ipvs mode beyond ProxierConfig.
type IPVSOptions struct {
	// Scheduler is the IPVS scheduler of every virtual server (`--ipvs-scheduler`),
	// one of IPVSSchedulers; "" means rr.
	Scheduler string
	// NodeAddresses are the node's addresses: each NodePort is a virtual server on
	// each of them.
	NodeAddresses []netip.Addr
	// Device holds the service addresses on kube-ipvs0 (nil: the netlink one of the
	// calling goroutine's network namespace, NewIPVSDevice).
	Device IPVSDevice
	// Rules writes the ipsets and iptables rules (nil: ipset and iptables-restore, as
	// NewIPVSRuleWriter).
	Rules IPVSRuleWriter
}

// IPVSDevice is the dummy device kube-ipvs0 and its addresses.
type IPVSDevice interface {
	// Ensure creates the device (down, as upstream leaves it) when it is missing.
	Ensure() error
	// Addresses lists the device's IPv4 addresses (nil when there is no device).
	Addresses() ([]netip.Addr, error)
	AddAddress(netip.Addr) error
	DelAddress(netip.Addr) error
	// Delete removes the device; no error when there is none.
	Delete() error
}

// IPVSRuleWriter applies the text the ipvs mode renders for ipset and iptables.
type IPVSRuleWriter interface {
	// RestoreIPSets runs text through `ipset restore`.
	RestoreIPSets(ctx context.Context, text string) error
	// RestoreIPTables runs text through `iptables-restore --noflush`, then makes sure
	// each jump exists once (inserted first in its built-in chain).
	RestoreIPTables(ctx context.Context, text string, jumps []IPVSJump) error
	// Cleanup deletes the jumps, the KUBE-* chains the text declared and the KUBE-*
	// ipsets of the mode; what is already gone is no error.
	Cleanup(ctx context.Context) error
}

// ReasonIPVSDifference is the reason of the Warning Event recorded on a Service whose
// current state the ipvs mode cannot proxy the way the nftables mode does (ipvs.md).
const ReasonIPVSDifference = "IPVSProxyModeDifference"

// IPVSProxier is the ipvs proxy mode: Services and EndpointSlices become IPVS virtual
// and real servers through netlink, plus the addresses on kube-ipvs0 and a fixed set
// of iptables rules driven by ipsets. Event handlers only record changes; Sync writes
// the minimal netlink calls. Safe for concurrent use.
type IPVSProxier struct {
	proxierCore
	opts IPVSOptions
	h    IPVSHandle

	// guarded by mu:
	plans map[types.NamespacedName]*ipvsServicePlan
	// want indexes the virtual servers of every plan with their owner: when two
	// services ask for one virtual server, the first keeps it.
	want  map[vsKey]*ipvsVirtual
	owner map[vsKey]types.NamespacedName
	// kernel is the copy of the kernel's virtual servers, re-read on each full sync.
	kernel map[vsKey]*kernelVS
	// draining are the virtual servers holding real servers at weight 0.
	draining sets.Set[vsKey]
	// bound is what kube-ipvs0 holds; ipsetText and iptablesText what was last written.
	bound                   sets.Set[netip.Addr]
	ipsetText, iptablesText string
	// differences are the messages last reported per service about how the ipvs mode
	// differs from nftables for it.
	differences map[types.NamespacedName]string
	// contested are the virtual servers more than one service asked for.
	contested sets.Set[vsKey]
	// syncState holds the health check ports and no-local-endpoint counts, as the
	// other modes keep them (rejected stays empty: a refused netlink call fails the sync).
	syncState
	// binds counts the plans needing each address on kube-ipvs0, members the plans
	// needing each ipset member.
	binds   map[netip.Addr]int
	members map[ipsetMember]int
}

// ipsetMember is one member of one of the mode's ipsets.
type ipsetMember struct{ set, member string }

var _ interface {
	OnServiceAdd(*v1.Service)
	OnServiceUpdate(old, cur *v1.Service)
	OnServiceDelete(*v1.Service)
	OnEndpointSliceAdd(*discoveryv1.EndpointSlice)
	OnEndpointSliceUpdate(old, cur *discoveryv1.EndpointSlice)
	OnEndpointSliceDelete(*discoveryv1.EndpointSlice)
	SetZone(string)
	Run(ctx context.Context)
	Sync(ctx context.Context) error
} = (*IPVSProxier)(nil)

// NewIPVSProxier returns the ipvs mode's proxier writing to h, which the caller opens
// inside the node's network namespace (ipvs.New(path)). It fails on an unknown
// scheduler, naming the kernel's.
func NewIPVSProxier(h IPVSHandle, cfg ProxierConfig, opts IPVSOptions) (*IPVSProxier, error) {
	if h == nil {
		return nil, errors.New("proxy: nil IPVS handle")
	}
	if !cfg.ClusterCIDR.IsValid() || !cfg.ServiceCIDR.IsValid() {
		return nil, fmt.Errorf("proxy: node %q: cluster CIDR %v and service CIDR %v must both be set", cfg.NodeName, cfg.ClusterCIDR, cfg.ServiceCIDR)
	}
	if opts.Scheduler == "" {
		opts.Scheduler = "rr"
	}
	if !slices.Contains(IPVSSchedulers, opts.Scheduler) {
		return nil, fmt.Errorf("proxy: node %q: unknown IPVS scheduler %q: must be one of %s", cfg.NodeName, opts.Scheduler, strings.Join(IPVSSchedulers, ", "))
	}
	for _, a := range opts.NodeAddresses {
		if !a.Is4() {
			return nil, fmt.Errorf("proxy: node %q: node address %v: only IPv4 is proxied", cfg.NodeName, a)
		}
	}
	if opts.Device == nil {
		opts.Device = NewIPVSDevice()
	}
	if opts.Rules == nil {
		opts.Rules = NewIPVSRuleWriter()
	}
	cfg = withDefaults(cfg)
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("proxy: node %q: %w", cfg.NodeName, err)
	}
	return &IPVSProxier{
		proxierCore: newProxierCore(cfg, m), opts: opts, h: h,
		plans: map[types.NamespacedName]*ipvsServicePlan{}, want: map[vsKey]*ipvsVirtual{},
		owner: map[vsKey]types.NamespacedName{}, kernel: map[vsKey]*kernelVS{},
		draining: sets.New[vsKey](), bound: sets.New[netip.Addr](), differences: map[types.NamespacedName]string{},
		contested: sets.New[vsKey](), syncState: newSyncState(), binds: map[netip.Addr]int{}, members: map[ipsetMember]int{},
	}, nil
}

// Run syncs whenever changes arrive, at most once per MinSyncPeriod, fully every
// FullSyncPeriod, and again after RetryPeriod (fully) when a sync fails or real
// servers are draining. It returns when ctx is cancelled.
func (p *IPVSProxier) Run(ctx context.Context) {
	p.runLoop(ctx, "ipvs", p.Sync, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.draining.Len() > 0 // draining real servers are checked again
	})
}

// Sync plans the changed services and writes the difference: netlink calls for the
// virtual and real servers, addresses on kube-ipvs0, and the ipsets and iptables rules
// when their text changed. A full sync (the first, after a failure, when due) re-reads
// the kernel's virtual servers and rewrites everything that differs.
func (p *IPVSProxier) Sync(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	start, changed, triggers, full := p.beginSync()
	err := p.sync(ctx, changed, full)
	if err != nil {
		p.needFull = true
		p.metrics.failures.Inc()
		return fmt.Errorf("node %q: ipvs: %w", p.cfg.NodeName, err)
	}
	p.finishSync(start, full, triggers)
	return nil
}

func (p *IPVSProxier) sync(ctx context.Context, changed sets.Set[types.NamespacedName], full bool) error {
	if full {
		if err := p.readKernel(); err != nil {
			return err
		}
		changed = changed.Union(p.svcs.Names()).Union(sets.KeySet(p.plans))
	} else if err := p.readDraining(); err != nil {
		return err
	}
	// Plan the changed services and collect the virtual servers to compare.
	desired := make(map[types.NamespacedName]*ipvsServicePlan, changed.Len())
	previous := make(map[types.NamespacedName]*ipvsServicePlan, changed.Len())
	touched := sets.New[vsKey]()
	dirty := sets.New[netip.Addr]()
	dirtyMembers := sets.New[ipsetMember]()
	for _, n := range slices.SortedFunc(maps.Keys(changed), compareNames) {
		old := p.plans[n]
		previous[n] = old
		if old != nil {
			for _, v := range old.virtuals {
				if p.owner[v.key] == n {
					delete(p.want, v.key)
					delete(p.owner, v.key)
				}
				touched.Insert(v.key)
			}
			for _, a := range old.bind {
				if p.binds[a]--; p.binds[a] <= 0 {
					delete(p.binds, a)
				}
				dirty.Insert(a)
			}
		}
		ports := p.svcs.Ports(n)
		if ports == nil {
			p.countMembers(old, nil, dirtyMembers)
			delete(p.plans, n)
			delete(p.differences, n)
			desired[n] = &ipvsServicePlan{}
			continue
		}
		pl := planIPVSService(p.cfg.Config, p.opts, ports, p.eps.Endpoints(n))
		p.countMembers(old, pl, dirtyMembers)
		p.plans[n] = pl
		desired[n] = pl
		for _, a := range pl.bind {
			p.binds[a]++
			dirty.Insert(a)
		}
		p.reportDifference(n, pl)
	}
	// Claim virtual servers in name order, so that a conflict always resolves alike.
	for _, n := range slices.SortedFunc(maps.Keys(changed), compareNames) {
		pl := p.plans[n]
		if pl == nil {
			continue
		}
		for _, v := range pl.virtuals {
			touched.Insert(v.key)
			if o, taken := p.owner[v.key]; taken && o != n {
				p.contested.Insert(v.key)
				p.cfg.Logger.Warn("two services ask for one IPVS virtual server; the first keeps it", "node", p.cfg.NodeName,
					"virtualServer", v.key.String(), "service", n.String(), "owner", o.String())
				continue
			}
			p.want[v.key], p.owner[v.key] = v, n
		}
	}
	// A contested virtual server its owner gave up goes to another service asking.
	for k := range p.contested.Intersection(touched) {
		if _, owned := p.owner[k]; owned {
			continue
		}
		p.contested.Delete(k)
		for _, n := range ipvsServiceNames(p.plans) {
			if i := slices.IndexFunc(p.plans[n].virtuals, func(v *ipvsVirtual) bool { return v.key == k }); i >= 0 {
				p.want[k], p.owner[k] = p.plans[n].virtuals[i], n
				break
			}
		}
	}
	if full {
		touched = touched.Union(sets.KeySet(p.kernel))
	}
	touched = touched.Union(p.draining)
	if err := p.applyVirtuals(touched); err != nil {
		return err
	}
	if err := p.applyAddresses(full, dirty); err != nil {
		return err
	}
	if err := p.applyRules(ctx, full, dirtyMembers); err != nil {
		return err
	}
	afterSync(&p.proxierCore, &p.syncState, desired, previous)
	return nil
}

// readKernel replaces the copy of the kernel's virtual servers with what it reports.
func (p *IPVSProxier) readKernel() error {
	svcs, err := p.h.GetServices()
	if err != nil {
		return fmt.Errorf("listing virtual servers: %w", err)
	}
	clear(p.kernel)
	p.draining.Clear()
	for _, s := range svcs {
		dests, err := p.h.GetDestinations(s)
		if err != nil {
			return fmt.Errorf("listing real servers of %s: %w", vsKeyOf(s), err)
		}
		p.kernel[vsKeyOf(s)] = newKernelVS(s, dests)
	}
	return nil
}

// readDraining refreshes the connection counts of the draining virtual servers.
func (p *IPVSProxier) readDraining() error {
	for k := range p.draining {
		kv := p.kernel[k]
		if kv == nil {
			p.draining.Delete(k)
			continue
		}
		dests, err := p.h.GetDestinations(&kv.svc)
		if err != nil {
			return fmt.Errorf("listing real servers of %s: %w", k, err)
		}
		p.kernel[k] = newKernelVS(&kv.svc, dests)
	}
	return nil
}

func newKernelVS(s *ipvs.Service, dests []*ipvs.Destination) *kernelVS {
	kv := &kernelVS{svc: *s, dests: make(map[rsKey]*ipvs.Destination, len(dests))}
	for _, d := range dests {
		kv.dests[rsKeyOf(d)] = d
	}
	return kv
}

// applyVirtuals makes the kernel's virtual servers in keys match p.want, one netlink
// call at a time, updating the copy as each succeeds.
func (p *IPVSProxier) applyVirtuals(keys sets.Set[vsKey]) error {
	for _, k := range slices.SortedFunc(maps.Keys(keys), compareVSKeys) {
		ops, draining := diffVirtual(p.want[k], p.kernel[k])
		if deletesTCPDest(ops) {
			// The copy has no fresh connection counts: ask the kernel before deleting.
			kv := p.kernel[k]
			dests, err := p.h.GetDestinations(&kv.svc)
			if err != nil {
				return fmt.Errorf("listing real servers of %s: %w", k, err)
			}
			p.kernel[k] = newKernelVS(&kv.svc, dests)
			ops, draining = diffVirtual(p.want[k], p.kernel[k])
		}
		if draining {
			p.draining.Insert(k)
		} else {
			p.draining.Delete(k)
		}
		for _, op := range ops {
			if err := p.run(op); err != nil {
				return err
			}
		}
	}
	return nil
}

func deletesTCPDest(ops []ipvsOp) bool {
	for _, op := range ops {
		if op.verb == "delete" && op.dest != nil && op.svc.Protocol == syscall.IPPROTO_TCP {
			return true
		}
	}
	return false
}

func (p *IPVSProxier) run(op ipvsOp) error {
	var err error
	k := vsKeyOf(op.svc)
	switch {
	case op.dest == nil && op.verb == "add":
		err = p.h.NewService(op.svc)
	case op.dest == nil && op.verb == "edit":
		err = p.h.UpdateService(op.svc)
	case op.dest == nil:
		err = p.h.DelService(op.svc)
	case op.verb == "add":
		err = p.h.NewDestination(op.svc, op.dest)
	case op.verb == "edit":
		err = p.h.UpdateDestination(op.svc, op.dest)
	default:
		err = p.h.DelDestination(op.svc, op.dest)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	switch {
	case op.dest == nil && op.verb == "delete":
		delete(p.kernel, k)
	case op.dest == nil:
		kv := p.kernel[k]
		if kv == nil {
			kv = &kernelVS{dests: map[rsKey]*ipvs.Destination{}}
			p.kernel[k] = kv
		}
		kv.svc = *op.svc
	case op.verb == "delete":
		delete(p.kernel[k].dests, rsKeyOf(op.dest))
	default:
		d := *op.dest
		if c := p.kernel[k].dests[rsKeyOf(op.dest)]; c != nil {
			d.ActiveConnections, d.InactiveConnections = c.ActiveConnections, c.InactiveConnections
		}
		p.kernel[k].dests[rsKeyOf(op.dest)] = &d
	}
	return nil
}

// applyAddresses binds exactly the planned service addresses on kube-ipvs0: those in
// dirty (whose count of plans changed), or all on a full sync.
func (p *IPVSProxier) applyAddresses(full bool, dirty sets.Set[netip.Addr]) error {
	dev := p.opts.Device
	if full {
		if err := dev.Ensure(); err != nil {
			return fmt.Errorf("creating %s: %w", IPVSDeviceName, err)
		}
		have, err := dev.Addresses()
		if err != nil {
			return fmt.Errorf("listing the addresses of %s: %w", IPVSDeviceName, err)
		}
		p.bound = sets.New(have...)
		dirty = dirty.Union(p.bound).Union(sets.KeySet(p.binds))
	}
	for _, a := range slices.SortedFunc(maps.Keys(dirty), netip.Addr.Compare) {
		switch want, have := p.binds[a] > 0, p.bound.Has(a); {
		case have && !want:
			if err := dev.DelAddress(a); err != nil {
				return fmt.Errorf("deleting %s from %s: %w", a, IPVSDeviceName, err)
			}
			p.bound.Delete(a)
		case want && !have:
			if err := dev.AddAddress(a); err != nil {
				return fmt.Errorf("adding %s to %s: %w", a, IPVSDeviceName, err)
			}
			p.bound.Insert(a)
		}
	}
	return nil
}

// countMembers moves the member counts from old's members to cur's (either may be
// nil), noting in dirty the members whose presence may have changed.
func (p *IPVSProxier) countMembers(old, cur *ipvsServicePlan, dirty sets.Set[ipsetMember]) {
	count := func(pl *ipvsServicePlan, delta int, other *ipvsServicePlan) {
		if pl == nil {
			return
		}
		for set, ms := range pl.members {
			var others []string
			if other != nil {
				others = other.members[set]
			}
			for _, m := range ms {
				if _, both := slices.BinarySearch(others, m); both {
					continue
				}
				k := ipsetMember{set, m}
				if p.members[k] += delta; p.members[k] <= 0 {
					delete(p.members, k)
				}
				dirty.Insert(k)
			}
		}
	}
	count(old, -1, cur)
	count(cur, +1, old)
}

// applyRules writes the ipsets (whole on a full sync, else the members that changed)
// and the iptables rules when their text changed or on a full sync.
func (p *IPVSProxier) applyRules(ctx context.Context, full bool, dirty sets.Set[ipsetMember]) error {
	var text string
	switch {
	case full || p.ipsetText == "":
		bySet := map[string][]string{}
		for k := range p.members {
			bySet[k.set] = append(bySet[k.set], k.member)
		}
		for _, ms := range bySet {
			slices.Sort(ms)
		}
		text = ipvsIPSetText(bySet)
	case dirty.Len() > 0:
		var b strings.Builder
		for _, k := range slices.SortedFunc(maps.Keys(dirty), compareIPSetMembers) {
			verb := "del"
			if p.members[k] > 0 {
				verb = "add"
			}
			b.WriteString(verb + " " + k.set + " " + k.member + "\n")
		}
		text = b.String()
	}
	if text != "" {
		p.ipsetText = ""
		if err := p.opts.Rules.RestoreIPSets(ctx, text); err != nil {
			return fmt.Errorf("ipset restore: %w", err)
		}
		p.ipsetText = text
	}
	rules := ipvsIPTablesText(p.cfg.Config)
	if full || rules != p.iptablesText {
		p.iptablesText = ""
		if err := p.opts.Rules.RestoreIPTables(ctx, rules, ipvsJumps); err != nil {
			return fmt.Errorf("iptables-restore: %w", err)
		}
		p.iptablesText = rules
	}
	return nil
}

func compareIPSetMembers(a, b ipsetMember) int {
	if c := strings.Compare(a.set, b.set); c != 0 {
		return c
	}
	return strings.Compare(a.member, b.member)
}

// reportDifference records a Warning Event when a service enters a state the ipvs mode
// proxies differently from the nftables mode.
func (p *IPVSProxier) reportDifference(n types.NamespacedName, pl *ipvsServicePlan) {
	msg := ""
	if len(pl.noLocal) > 0 {
		msg = fmt.Sprintf("ports %s have a Local traffic policy and no endpoint on node %s: the nftables mode drops such packets, the ipvs mode refuses them (ICMP port unreachable) because an IPVS virtual server without real servers cannot drop",
			strings.Join(pl.noLocal, ", "), p.cfg.NodeName)
	}
	if p.differences[n] == msg {
		return
	}
	if msg == "" {
		delete(p.differences, n)
		return
	}
	p.differences[n] = msg
	p.cfg.Logger.Warn("ipvs mode differs from nftables for a service", "node", p.cfg.NodeName, "service", n.String(), "difference", msg)
	if p.cfg.Recorder != nil {
		p.cfg.Recorder.Eventf(p.svcs.Ref(n), v1.EventTypeWarning, ReasonIPVSDifference, "%s", msg)
	}
}
