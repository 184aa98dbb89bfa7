package proxy

import (
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ServiceChangeTracker records Service events as {previous, current} per service and
// keeps the proxy's view of every service. Event handlers call Update; the sync calls
// Drain. Safe for concurrent use.
type ServiceChangeTracker struct {
	mu      sync.Mutex
	state   map[types.NamespacedName]map[ServicePortName]*ServicePort
	pending map[types.NamespacedName]map[ServicePortName]*ServicePort // previous, per changed key
	// uids name the Service objects behind state, for Events about them.
	uids map[types.NamespacedName]types.UID
}

// NewServiceChangeTracker returns an empty tracker.
func NewServiceChangeTracker() *ServiceChangeTracker {
	return &ServiceChangeTracker{
		state:   map[types.NamespacedName]map[ServicePortName]*ServicePort{},
		pending: map[types.NamespacedName]map[ServicePortName]*ServicePort{},
		uids:    map[types.NamespacedName]types.UID{},
	}
}

// Update records a Service event: previous nil for an add, current nil for a delete. It
// reports whether a sync is needed, which is false when the event does not change what
// the proxy programs (including a change undone before the next Drain).
func (t *ServiceChangeTracker) Update(previous, current *v1.Service) bool {
	svc := current
	if svc == nil {
		svc = previous
	}
	if svc == nil {
		return false
	}
	name := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	ports := servicePorts(current)
	t.mu.Lock()
	defer t.mu.Unlock()
	old, changed := t.pending[name]
	if !changed {
		old = t.state[name]
	}
	if len(ports) == 0 {
		delete(t.state, name)
		delete(t.uids, name)
	} else {
		t.state[name] = ports
		t.uids[name] = current.UID
	}
	if reflect.DeepEqual(old, t.state[name]) {
		delete(t.pending, name)
		return changed
	}
	if !changed {
		t.pending[name] = old
	}
	return true
}

// Drain returns the services whose view changed since the last Drain and forgets them.
func (t *ServiceChangeTracker) Drain() sets.Set[types.NamespacedName] {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := sets.New[types.NamespacedName]()
	for name := range t.pending {
		out.Insert(name)
	}
	clear(t.pending)
	return out
}

// PendingCount returns how many services have changes not yet drained.
func (t *ServiceChangeTracker) PendingCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}

// Ports returns the current ports of one service (nil when it is not proxied). The
// result is shared: callers must not modify it.
func (t *ServiceChangeTracker) Ports(name types.NamespacedName) map[ServicePortName]*ServicePort {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state[name]
}

// Ref returns a reference to a proxied service's object, for Events about it.
func (t *ServiceChangeTracker) Ref(name types.NamespacedName) *v1.ObjectReference {
	t.mu.Lock()
	defer t.mu.Unlock()
	return &v1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: name.Namespace, Name: name.Name, UID: t.uids[name]}
}

// Names returns every proxied service.
func (t *ServiceChangeTracker) Names() sets.Set[types.NamespacedName] {
	t.mu.Lock()
	defer t.mu.Unlock()
	return sets.KeySet(t.state)
}

// EndpointsChangeTracker records EndpointSlice events per service, merges the slices of
// a service into one endpoint list per port (an endpoint listed by two slices counts
// once, an unusable one not at all), and drops events that change nothing. Safe for
// concurrent use.
type EndpointsChangeTracker struct {
	mu          sync.Mutex
	serviceCIDR netip.Prefix
	slices      map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice
	merged      map[types.NamespacedName]map[ServicePortName][]Endpoint
	// pending holds the merged view each changed service had at the last Drain.
	pending  map[types.NamespacedName]map[ServicePortName][]Endpoint
	triggers map[types.NamespacedName][]time.Time
	// unusable holds, per slice (namespace and slice name), what was last found
	// unusable in it, so that a problem is reported when it appears, not at every event.
	unusable map[types.NamespacedName][]UnusableAddress
}

// NewEndpointsChangeTracker returns an empty tracker. Endpoint addresses inside
// serviceCIDR are unusable (the zero prefix checks none).
func NewEndpointsChangeTracker(serviceCIDR netip.Prefix) *EndpointsChangeTracker {
	return &EndpointsChangeTracker{
		serviceCIDR: serviceCIDR,
		slices:      map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice{},
		merged:      map[types.NamespacedName]map[ServicePortName][]Endpoint{},
		pending:     map[types.NamespacedName]map[ServicePortName][]Endpoint{},
		triggers:    map[types.NamespacedName][]time.Time{},
		unusable:    map[types.NamespacedName][]UnusableAddress{},
	}
}

// Update records an EndpointSlice add or update (deleted false) or delete (deleted
// true) and reports whether a sync is needed. Slices without the
// kubernetes.io/service-name label and non-IPv4 slices are ignored, and so are the
// endpoints whose address the proxy cannot use (see UpdateReporting).
func (t *EndpointsChangeTracker) Update(slice *discoveryv1.EndpointSlice, deleted bool) bool {
	changed, _ := t.UpdateReporting(slice, deleted)
	return changed
}

// UpdateReporting is Update that also returns what became unusable in the slice with
// this event: the unusable addresses (or the FQDN addressType) it lists now and its
// previous version did not. A problem is thus returned once, however many events
// the slice then gets while it keeps it; once gone, it is returned again if it comes
// back.
func (t *EndpointsChangeTracker) UpdateReporting(slice *discoveryv1.EndpointSlice, deleted bool) (bool, []UnusableAddress) {
	if slice == nil {
		return false, nil
	}
	svcName := slice.Labels[discoveryv1.LabelServiceName]
	if svcName == "" {
		return false, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fresh := t.noteUnusable(slice, deleted)
	if slice.AddressType != discoveryv1.AddressTypeIPv4 {
		return false, fresh
	}
	name := types.NamespacedName{Namespace: slice.Namespace, Name: svcName}
	old, changed := t.pending[name]
	if !changed {
		old = t.merged[name]
	}
	bySlice := t.slices[name]
	if deleted {
		delete(bySlice, slice.Name)
		if len(bySlice) == 0 {
			delete(t.slices, name)
		}
	} else {
		if bySlice == nil {
			bySlice = map[string]*discoveryv1.EndpointSlice{}
			t.slices[name] = bySlice
		}
		bySlice[slice.Name] = slice
	}
	merged := mergeSlices(name, t.slices[name], t.serviceCIDR)
	if len(merged) == 0 {
		delete(t.merged, name)
	} else {
		t.merged[name] = merged
	}
	if reflect.DeepEqual(old, t.merged[name]) {
		delete(t.pending, name)
		delete(t.triggers, name)
		return changed, fresh
	}
	if !changed {
		t.pending[name] = old
	}
	if ts, err := time.Parse(time.RFC3339Nano, slice.Annotations[AnnotationLastChangeTriggerTime]); err == nil {
		t.triggers[name] = append(t.triggers[name], ts)
	}
	return true, fresh
}

// noteUnusable remembers what is unusable in the slice now and returns what was not
// already in its previous version. t.mu must be held.
func (t *EndpointsChangeTracker) noteUnusable(slice *discoveryv1.EndpointSlice, deleted bool) []UnusableAddress {
	key := types.NamespacedName{Namespace: slice.Namespace, Name: slice.Name}
	if deleted {
		delete(t.unusable, key)
		return nil
	}
	now := unusableAddresses(slice, t.serviceCIDR)
	before := t.unusable[key]
	if len(now) == 0 {
		delete(t.unusable, key)
		return nil
	}
	t.unusable[key] = now
	var fresh []UnusableAddress
	for _, u := range now {
		if !slices.Contains(before, u) {
			fresh = append(fresh, u)
		}
	}
	return fresh
}

// Drain returns the services whose endpoints changed since the last Drain, with the
// last-change-trigger-times of the slice events behind those changes, and forgets them.
func (t *EndpointsChangeTracker) Drain() (sets.Set[types.NamespacedName], []time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := sets.New[types.NamespacedName]()
	for name := range t.pending {
		out.Insert(name)
	}
	var times []time.Time
	for _, ts := range t.triggers {
		times = append(times, ts...)
	}
	clear(t.pending)
	clear(t.triggers)
	return out, times
}

// PendingCount returns how many services have endpoint changes not yet drained.
func (t *EndpointsChangeTracker) PendingCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}

// Endpoints returns the merged endpoints of one service port, sorted. The result is
// shared: callers must not modify it.
func (t *EndpointsChangeTracker) Endpoints(name types.NamespacedName) map[ServicePortName][]Endpoint {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.merged[name]
}

// mergeSlices builds the per-port endpoint lists of one service. Slices are visited by
// name so the result does not depend on event order; when two slices list the same
// address and port, a ready copy wins over an unready one, as upstream does.
func mergeSlices(name types.NamespacedName, bySlice map[string]*discoveryv1.EndpointSlice, serviceCIDR netip.Prefix) map[ServicePortName][]Endpoint {
	if len(bySlice) == 0 {
		return nil
	}
	sliceNames := make([]string, 0, len(bySlice))
	for n := range bySlice {
		sliceNames = append(sliceNames, n)
	}
	slices.Sort(sliceNames)
	type key struct {
		spn ServicePortName
		ap  netip.AddrPort
	}
	seen := map[key]int{}
	out := map[ServicePortName][]Endpoint{}
	for _, sn := range sliceNames {
		s := bySlice[sn]
		for _, p := range s.Ports {
			if p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
				continue
			}
			spn := ServicePortName{NamespacedName: name, Protocol: v1.ProtocolTCP}
			if p.Name != nil {
				spn.Port = *p.Name
			}
			if p.Protocol != nil {
				spn.Protocol = *p.Protocol
			}
			for _, e := range s.Endpoints {
				if len(e.Addresses) == 0 {
					continue
				}
				ip, unusable := endpointAddress(e.Addresses[0], serviceCIDR)
				if unusable != "" {
					continue
				}
				ep := convertEndpoint(e, ip, *p.Port)
				k := key{spn, netip.AddrPortFrom(ip, uint16(*p.Port))}
				if i, ok := seen[k]; ok {
					if ep.Ready && !out[spn][i].Ready {
						out[spn][i] = ep
					}
					continue
				}
				seen[k] = len(out[spn])
				out[spn] = append(out[spn], ep)
			}
		}
	}
	for spn := range out {
		slices.SortFunc(out[spn], compareEndpoints)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func convertEndpoint(e discoveryv1.Endpoint, ip netip.Addr, port int32) Endpoint {
	ep := Endpoint{
		IP:          ip,
		Port:        port,
		Ready:       e.Conditions.Ready == nil || *e.Conditions.Ready,
		Serving:     e.Conditions.Serving == nil || *e.Conditions.Serving,
		Terminating: e.Conditions.Terminating != nil && *e.Conditions.Terminating,
	}
	if e.NodeName != nil {
		ep.NodeName = *e.NodeName
	}
	if e.Zone != nil {
		ep.Zone = *e.Zone
	}
	if e.Hints != nil {
		var zones, nodes []string
		for _, z := range e.Hints.ForZones {
			zones = append(zones, z.Name)
		}
		for _, n := range e.Hints.ForNodes {
			nodes = append(nodes, n.Name)
		}
		ep.ZoneHints = sortedStrings(zones)
		ep.NodeHints = sortedStrings(nodes)
	}
	return ep
}
