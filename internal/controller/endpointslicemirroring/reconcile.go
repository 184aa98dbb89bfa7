// Package endpointslicemirroring mirrors user-written Endpoints of Services
// without a selector into EndpointSlices (managed-by
// endpointslicemirroring-controller.k8s.io), so that consumers reading
// only EndpointSlices (proxy, DNS) see them. reconcile is the pure part;
// Controller applies its result through client-go.
package endpointslicemirroring

import (
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	netutils "k8s.io/utils/net"
)

const (
	// ControllerName is the managed-by value of mirrored slices.
	ControllerName = "endpointslicemirroring-controller.k8s.io"
	// MaxEndpointsPerSubset is how many addresses of one Endpoints subset
	// are mirrored; the rest is skipped (and reported in an event).
	MaxEndpointsPerSubset = 1000
)

// plan is what one sync writes for one Endpoints object.
type plan struct {
	create, update, delete []*discovery.EndpointSlice
	// invalid counts addresses that are not IPs; skipped counts every
	// address not mirrored (invalid ones included).
	invalid, skipped int
}

// desired is the mirrored content of one (address type, port set).
type desired struct {
	at        discovery.AddressType
	ports     []discovery.EndpointPort
	endpoints []discovery.Endpoint
	seen      map[string]bool
}

// reconcile computes the slice writes mirroring ep. existing holds the
// slices labelled with the Endpoints' name; only those managed by this
// controller are considered. Nothing is mirrored (and mirrored slices are
// deleted) when ep or svc is nil, when svc has a selector, or when ep is
// labelled endpointslice.kubernetes.io/skip-mirror=true or is a
// leader-election record.
func reconcile(ep *v1.Endpoints, svc *v1.Service, existing []*discovery.EndpointSlice, maxPerSubset int) plan {
	var managed []*discovery.EndpointSlice
	for _, s := range existing {
		if s != nil && s.Labels[discovery.LabelManagedBy] == ControllerName && s.DeletionTimestamp == nil {
			managed = append(managed, s)
		}
	}
	sort.SliceStable(managed, func(i, j int) bool { return managed[i].Name < managed[j].Name })
	var p plan
	if !shouldMirror(ep) || svc == nil || svc.Spec.Selector != nil {
		p.delete = managed
		return p
	}

	want := map[string]*desired{}
	for _, subset := range ep.Subsets {
		ports := mirrorPorts(subset.Ports)
		total := len(subset.Addresses) + len(subset.NotReadyAddresses)
		added := 0
		add := func(addrs []v1.EndpointAddress, ready bool) {
			for _, a := range addrs {
				if added >= maxPerSubset {
					return
				}
				e, at, ok := toEndpoint(a, ready)
				if !ok {
					p.invalid++
					continue
				}
				k := string(at) + "|" + portsKey(ports)
				d := want[k]
				if d == nil {
					d = &desired{at: at, ports: ports, seen: map[string]bool{}}
					want[k] = d
				}
				if ek := endpointKey(&e); !d.seen[ek] {
					d.seen[ek] = true
					d.endpoints = append(d.endpoints, e)
				}
				added++
			}
		}
		add(subset.Addresses, true)
		add(subset.NotReadyAddresses, false)
		p.skipped += total - added
	}

	have := map[string][]*discovery.EndpointSlice{}
	for _, s := range managed {
		k := string(s.AddressType) + "|" + portsKey(s.Ports)
		have[k] = append(have[k], s)
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d := want[k]
		slices := have[k]
		s := newSlice(ep, d)
		if len(slices) == 0 {
			p.create = append(p.create, s)
			continue
		}
		p.delete = append(p.delete, slices[1:]...)
		if sameContent(slices[0], s) {
			continue
		}
		s.Name, s.GenerateName, s.ResourceVersion = slices[0].Name, "", slices[0].ResourceVersion
		p.update = append(p.update, s)
	}
	for _, s := range managed {
		if _, ok := want[string(s.AddressType)+"|"+portsKey(s.Ports)]; !ok {
			p.delete = append(p.delete, s)
		}
	}
	return recycle(p)
}

// shouldMirror is Kubernetes' rule on the Endpoints object itself.
func shouldMirror(ep *v1.Endpoints) bool {
	if ep == nil || ep.Labels[discovery.LabelSkipMirror] == "true" {
		return false
	}
	_, leader := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
	return !leader
}

// recycle turns a create and a delete of the same address type into one
// update of the slice that would have been deleted.
func recycle(p plan) plan {
	for i := 0; i < len(p.create); {
		j := -1
		for k, d := range p.delete {
			if d.AddressType == p.create[i].AddressType {
				j = k
				break
			}
		}
		if j < 0 {
			i++
			continue
		}
		s := p.create[i]
		s.Name, s.GenerateName, s.ResourceVersion = p.delete[j].Name, "", p.delete[j].ResourceVersion
		p.update = append(p.update, s)
		p.create = append(p.create[:i:i], p.create[i+1:]...)
		p.delete = append(p.delete[:j:j], p.delete[j+1:]...)
	}
	return p
}

// toEndpoint converts an Endpoints address; ok is false for a non-IP.
func toEndpoint(a v1.EndpointAddress, ready bool) (discovery.Endpoint, discovery.AddressType, bool) {
	ip := netutils.ParseIPSloppy(a.IP)
	if ip == nil {
		return discovery.Endpoint{}, "", false
	}
	at := discovery.AddressTypeIPv4
	if ip.To4() == nil {
		at = discovery.AddressTypeIPv6
	}
	e := discovery.Endpoint{
		Addresses:  []string{ip.String()},
		Conditions: discovery.EndpointConditions{Ready: &ready},
	}
	if a.TargetRef != nil {
		ref := *a.TargetRef
		e.TargetRef = &ref
	}
	if a.NodeName != nil {
		node := *a.NodeName
		e.NodeName = &node
	}
	if a.Hostname != "" {
		host := a.Hostname
		e.Hostname = &host
	}
	return e, at, true
}

func mirrorPorts(ports []v1.EndpointPort) []discovery.EndpointPort {
	out := []discovery.EndpointPort{}
	for _, p := range ports {
		name, num, proto := p.Name, p.Port, p.Protocol
		var app *string
		if p.AppProtocol != nil {
			a := *p.AppProtocol
			app = &a
		}
		out = append(out, discovery.EndpointPort{Name: &name, Port: &num, Protocol: &proto, AppProtocol: app})
	}
	return out
}

// newSlice builds the mirrored slice: the Endpoints' labels plus
// service-name and managed-by, its annotations except the trigger time
// and kubectl's last-applied configuration, owned by the Endpoints.
func newSlice(ep *v1.Endpoints, d *desired) *discovery.EndpointSlice {
	ref := metav1.NewControllerRef(ep, schema.GroupVersionKind{Version: "v1", Kind: "Endpoints"})
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ep.Namespace,
			GenerateName:    slicePrefix(ep.Name),
			Labels:          map[string]string{},
			Annotations:     map[string]string{},
			OwnerReferences: []metav1.OwnerReference{*ref},
		},
		AddressType: d.at,
		Ports:       d.ports,
		Endpoints:   d.endpoints,
	}
	for k, v := range ep.Labels {
		s.Labels[k] = v
	}
	s.Labels[discovery.LabelServiceName] = ep.Name
	s.Labels[discovery.LabelManagedBy] = ControllerName
	for k, v := range ep.Annotations {
		if k != v1.EndpointsLastChangeTriggerTime && k != v1.LastAppliedConfigAnnotation {
			s.Annotations[k] = v
		}
	}
	return s
}

func slicePrefix(name string) string {
	if len(apivalidation.NameIsDNSSubdomain(name+"-", true)) != 0 {
		return name
	}
	return name + "-"
}

// sameContent reports whether the existing slice already mirrors want:
// same endpoints (in any order, targetRef resourceVersion aside), labels
// and annotations.
func sameContent(have, want *discovery.EndpointSlice) bool {
	if len(have.Endpoints) != len(want.Endpoints) ||
		!apiequality.Semantic.DeepEqual(have.Labels, want.Labels) ||
		!apiequality.Semantic.DeepEqual(have.Annotations, want.Annotations) {
		return false
	}
	byKey := map[string]discovery.Endpoint{}
	for _, e := range want.Endpoints {
		byKey[endpointKey(&e)] = e
	}
	for _, e := range have.Endpoints {
		w, ok := byKey[endpointKey(&e)]
		if !ok || !apiequality.Semantic.DeepEqual(stripRV(w), stripRV(e)) {
			return false
		}
	}
	return true
}

func stripRV(e discovery.Endpoint) discovery.Endpoint {
	if e.TargetRef != nil {
		ref := *e.TargetRef
		ref.ResourceVersion = ""
		e.TargetRef = &ref
	}
	return e
}

func endpointKey(e *discovery.Endpoint) string {
	addrs := append([]string(nil), e.Addresses...)
	sort.Strings(addrs)
	key := strings.Join(addrs, ",") + "|"
	if e.Hostname != nil {
		key += *e.Hostname
	}
	if e.TargetRef != nil {
		key += "|" + e.TargetRef.Namespace + "/" + e.TargetRef.Name
	}
	return key
}

func portsKey(ports []discovery.EndpointPort) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		var b strings.Builder
		for _, s := range []*string{p.Name, (*string)(p.Protocol), p.AppProtocol} {
			if s == nil {
				b.WriteString("-/")
			} else {
				b.WriteString(strconv.Quote(*s) + "/")
			}
		}
		if p.Port != nil {
			b.WriteString(strconv.Itoa(int(*p.Port)))
		}
		parts = append(parts, b.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
