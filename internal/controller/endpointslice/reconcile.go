package endpointslice

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	netutils "k8s.io/utils/net"
)

const (
	// ControllerName is the endpointslice.kubernetes.io/managed-by value on
	// the slices this controller owns; slices with any other value are
	// never touched.
	ControllerName = "endpointslice-controller.k8s.io"
	// DefaultMaxEndpointsPerSlice is Kubernetes' default packing limit.
	DefaultMaxEndpointsPerSlice = 100
	// MaxEndpointsPerSliceLimit is the largest limit accepted: the API
	// rejects slices with more than 1000 endpoints.
	MaxEndpointsPerSliceLimit = 1000
)

// plan is what one sync must write for one Service.
type plan struct {
	create []*discovery.EndpointSlice
	update []*discovery.EndpointSlice
	delete []*discovery.EndpointSlice
	// skipped names (namespace/name) the pods left out because their node
	// is not in the cache yet; the sync reports an error so it is retried.
	skipped []string
}

// empty reports whether the plan writes nothing.
func (p plan) empty() bool {
	return len(p.create) == 0 && len(p.update) == 0 && len(p.delete) == 0
}

// candidate is a pod that belongs in the Service's endpoints, with its node.
type candidate struct {
	pod  *v1.Pod
	node *v1.Node
}

// group is the desired endpoints sharing one resolved port set.
type group struct {
	ports     []discovery.EndpointPort
	endpoints map[string]discovery.Endpoint
}

// reconcile computes, from snapshots, the slice writes that make existing
// match the pods selected by svc. existing holds the slices labelled with
// the Service's name; slices managed by anyone else or being deleted are
// ignored. A nil svc (deleted), a Service without selector and an
// ExternalName Service get all their managed slices deleted. triggerTime,
// when not zero, is stamped on every written slice as
// endpoints.kubernetes.io/last-change-trigger-time; it never causes a write
// by itself. The result is deterministic for given inputs.
func reconcile(svc *v1.Service, pods []*v1.Pod, nodes map[string]*v1.Node, existing []*discovery.EndpointSlice, maxPerSlice int, triggerTime time.Time) plan {
	if maxPerSlice <= 0 {
		maxPerSlice = DefaultMaxEndpointsPerSlice
	}
	var managed []*discovery.EndpointSlice
	for _, s := range existing {
		if s == nil || s.Labels[discovery.LabelManagedBy] != ControllerName || s.DeletionTimestamp != nil {
			continue
		}
		if svc != nil && s.Labels[discovery.LabelServiceName] != svc.Name {
			continue
		}
		managed = append(managed, s)
	}
	sortByName(managed)

	var p plan
	if svc == nil || svc.Spec.Selector == nil || svc.Spec.Type == v1.ServiceTypeExternalName {
		p.delete = managed
		return p
	}

	types := addressTypes(svc)
	byType := map[discovery.AddressType][]*discovery.EndpointSlice{}
	for _, s := range managed {
		if !containsType(types, s.AddressType) {
			p.delete = append(p.delete, s)
			continue
		}
		byType[s.AddressType] = append(byType[s.AddressType], s)
	}

	candidates, skipped := selectPods(svc, pods, nodes)
	p.skipped = skipped
	for _, at := range types {
		create, update, del := reconcileAddressType(svc, candidates, byType[at], at, maxPerSlice)
		p.create = append(p.create, create...)
		p.update = append(p.update, update...)
		p.delete = append(p.delete, del...)
	}
	p = recycle(svc, p)
	if svc.DeletionTimestamp != nil {
		// Creating slices for a Service being deleted races the garbage
		// collector; Kubernetes refrains, and so do we.
		p.create = nil
	}
	for _, s := range p.create {
		setTriggerTime(s, triggerTime)
	}
	for _, s := range p.update {
		setTriggerTime(s, triggerTime)
	}
	sortByName(p.update)
	return p
}

// selectPods keeps the pods that belong in endpoints (not terminal, with an
// IP) and resolves their nodes. Pods whose node is unknown are skipped
// unless the Service publishes not-ready addresses, as Kubernetes does, so
// that a pod pointing at a vanished node cannot wedge the Service.
func selectPods(svc *v1.Service, pods []*v1.Pod, nodes map[string]*v1.Node) ([]candidate, []string) {
	sorted := make([]*v1.Pod, 0, len(pods))
	for _, pod := range pods {
		if pod != nil {
			sorted = append(sorted, pod)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var out []candidate
	var skipped []string
	for _, pod := range sorted {
		if !podInEndpoints(pod) {
			continue
		}
		node := nodes[pod.Spec.NodeName]
		if node == nil && !svc.Spec.PublishNotReadyAddresses {
			skipped = append(skipped, pod.Namespace+"/"+pod.Name)
			continue
		}
		out = append(out, candidate{pod: pod, node: node})
	}
	return out, skipped
}

// reconcileAddressType plans the slices of one address type.
func reconcileAddressType(svc *v1.Service, candidates []candidate, existing []*discovery.EndpointSlice, at discovery.AddressType, maxPerSlice int) (create, update, del []*discovery.EndpointSlice) {
	existingByPorts := map[string][]*discovery.EndpointSlice{}
	for _, s := range existing {
		if !ownedBy(s, svc) {
			del = append(del, s)
			continue
		}
		k := portsKey(s.Ports)
		existingByPorts[k] = append(existingByPorts[k], s)
	}

	hints := hintMode(svc)
	groups := map[string]*group{}
	for _, c := range candidates {
		ep := podToEndpoint(c.pod, c.node, svc, at, hints)
		if len(ep.Addresses) == 0 {
			continue
		}
		ports := endpointPorts(svc, c.pod)
		k := portsKey(ports)
		g := groups[k]
		if g == nil {
			g = &group{ports: ports, endpoints: map[string]discovery.Endpoint{}}
			groups[k] = g
		}
		g.endpoints[endpointKey(&ep)] = ep
	}

	for _, k := range sortedKeys(groups) {
		c, u, d := pack(svc, existingByPorts[k], groups[k], at, maxPerSlice)
		create = append(create, c...)
		update = append(update, u...)
		del = append(del, d...)
	}
	for _, k := range sortedKeys(existingByPorts) {
		if _, ok := groups[k]; !ok {
			del = append(del, existingByPorts[k]...)
		}
	}

	// A Service whose selector matches nothing still gets one empty slice,
	// so that consumers can tell "no endpoints" from "not processed yet".
	if len(existing) == len(del) && len(create) == 0 {
		placeholder := newSlice(svc, []discovery.EndpointPort{}, at)
		if len(del) == 1 && placeholderEqual(del[0], placeholder) {
			del = nil
		} else {
			create = append(create, placeholder)
		}
	}
	return create, update, del
}

// pack fits the desired endpoints of one port set into the existing slices
// with that port set, as Kubernetes does: endpoints stay in the slice they
// are in (updated in place), gone ones are removed, new ones go first into
// slices already being updated (fullest first), then into the unchanged
// slice that ends closest to full, then into new slices. It never
// rebalances, so one pod change costs at most one slice write.
func pack(svc *v1.Service, existing []*discovery.EndpointSlice, g *group, at discovery.AddressType, maxPerSlice int) (create, update, del []*discovery.EndpointSlice) {
	desired := g.endpoints
	var unchanged []*discovery.EndpointSlice
	for _, s := range existing {
		kept := make([]discovery.Endpoint, 0, len(s.Endpoints))
		changed := false
		for i := range s.Endpoints {
			k := endpointKey(&s.Endpoints[i])
			want, ok := desired[k]
			if !ok {
				continue
			}
			kept = append(kept, want)
			if !endpointEqual(&want, &s.Endpoints[i]) {
				changed = true
			}
			delete(desired, k)
		}
		labels, labelsChanged := sliceLabels(s, svc)
		switch {
		case changed || len(kept) != len(s.Endpoints):
			if len(kept) == 0 {
				del = append(del, s)
				continue
			}
			c := s.DeepCopy()
			c.Endpoints = kept
			c.Labels = labels
			update = append(update, c)
		case labelsChanged:
			c := s.DeepCopy()
			c.Labels = labels
			update = append(update, c)
		default:
			unchanged = append(unchanged, s)
		}
	}

	remaining := make([]string, 0, len(desired))
	for k := range desired {
		remaining = append(remaining, k)
	}
	sort.Strings(remaining)
	take := func(s *discovery.EndpointSlice) {
		for len(remaining) > 0 && len(s.Endpoints) < maxPerSlice {
			s.Endpoints = append(s.Endpoints, desired[remaining[0]])
			remaining = remaining[1:]
		}
	}

	if len(remaining) > 0 && len(update) > 0 {
		fill := append([]*discovery.EndpointSlice(nil), update...)
		sort.SliceStable(fill, func(i, j int) bool { return len(fill[i].Endpoints) > len(fill[j].Endpoints) })
		for _, s := range fill {
			take(s)
		}
	}

	for len(remaining) > 0 {
		var target *discovery.EndpointSlice
		if len(remaining) < maxPerSlice {
			if i := sliceToFill(unchanged, len(remaining), maxPerSlice); i >= 0 {
				target = unchanged[i].DeepCopy()
				unchanged = append(unchanged[:i], unchanged[i+1:]...)
				update = append(update, target)
			}
		}
		if target == nil {
			target = newSlice(svc, g.ports, at)
			create = append(create, target)
		}
		take(target)
	}
	return create, update, del
}

// sliceToFill returns the index of the slice that ends closest to full
// once n endpoints are added, or -1 when none has room for all n.
func sliceToFill(slices []*discovery.EndpointSlice, n, maxPerSlice int) int {
	best, bestGap := -1, maxPerSlice
	for i, s := range slices {
		gap := maxPerSlice - (n + len(s.Endpoints))
		if gap >= 0 && gap < bestGap {
			best, bestGap = i, gap
			if gap == 0 {
				break
			}
		}
	}
	return best
}

// recycle turns a create paired with a delete of the same address type
// into an update of the slice that would have been deleted, which saves
// two writes and keeps slice names stable.
func recycle(svc *v1.Service, p plan) plan {
	for i := 0; i < len(p.delete) && len(p.create) > 0; {
		old := p.delete[i]
		s := p.create[len(p.create)-1]
		if old.AddressType != s.AddressType || !ownedBy(old, svc) {
			i++
			continue
		}
		s.Name = old.Name
		// A conditional update: if the slice changed meanwhile, the write
		// conflicts and the sync is retried on fresh state.
		s.ResourceVersion = old.ResourceVersion
		p.create = p.create[:len(p.create)-1]
		p.update = append(p.update, s)
		p.delete = append(p.delete[:i:i], p.delete[i+1:]...)
	}
	return p
}

// hints says which topology hints the Service's trafficDistribution asks for.
type hints struct{ zone, node bool }

// hintMode reads spec.trafficDistribution. The topology-mode annotation
// takes precedence in Kubernetes (its own heuristics); we then set no hints.
func hintMode(svc *v1.Service) hints {
	if svc.Spec.TrafficDistribution == nil || topologyAnnotationEnabled(svc.Annotations) {
		return hints{}
	}
	switch *svc.Spec.TrafficDistribution {
	case v1.ServiceTrafficDistributionPreferClose, v1.ServiceTrafficDistributionPreferSameZone:
		return hints{zone: true}
	case v1.ServiceTrafficDistributionPreferSameNode:
		return hints{zone: true, node: true}
	}
	return hints{}
}

func topologyAnnotationEnabled(annotations map[string]string) bool {
	val, ok := annotations[v1.DeprecatedAnnotationTopologyAwareHints]
	if !ok {
		val, ok = annotations[v1.AnnotationTopologyMode]
	}
	return ok && (val == "Auto" || val == "auto")
}

// podToEndpoint builds the endpoint of pod for one address type.
func podToEndpoint(pod *v1.Pod, node *v1.Node, svc *v1.Service, at discovery.AddressType, h hints) discovery.Endpoint {
	serving := podReady(pod)
	terminating := pod.DeletionTimestamp != nil
	// Ready never says true for a terminating pod, unless the Service asks
	// for not-ready addresses to be published.
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := discovery.Endpoint{
		Addresses: podAddresses(pod, at),
		Conditions: discovery.EndpointConditions{
			Ready:       &ready,
			Serving:     &serving,
			Terminating: &terminating,
		},
		TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
	}
	if pod.Spec.NodeName != "" {
		name := pod.Spec.NodeName
		ep.NodeName = &name
	}
	if node != nil && node.Labels[v1.LabelTopologyZone] != "" {
		zone := node.Labels[v1.LabelTopologyZone]
		ep.Zone = &zone
	}
	if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
		hostname := pod.Spec.Hostname
		ep.Hostname = &hostname
	}
	// Hints go on ready endpoints only: the proxy ignores them elsewhere.
	if ready {
		var hs discovery.EndpointHints
		if h.zone && ep.Zone != nil {
			hs.ForZones = []discovery.ForZone{{Name: *ep.Zone}}
		}
		if h.node && ep.NodeName != nil {
			hs.ForNodes = []discovery.ForNode{{Name: *ep.NodeName}}
		}
		if hs.ForZones != nil || hs.ForNodes != nil {
			ep.Hints = &hs
		}
	}
	return ep
}

// podAddresses returns the pod's IPs of the given family, normalised.
func podAddresses(pod *v1.Pod, at discovery.AddressType) []string {
	ips := make([]string, 0, 1)
	for _, podIP := range pod.Status.PodIPs {
		ips = append(ips, podIP.IP)
	}
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = append(ips, pod.Status.PodIP)
	}
	out := []string{}
	for _, s := range ips {
		ip := netutils.ParseIPSloppy(s)
		if ip == nil {
			continue
		}
		if netutils.IsIPv6(ip) == (at == discovery.AddressTypeIPv6) {
			out = append(out, ip.String())
		}
	}
	return out
}

// podInEndpoints is Kubernetes' membership rule for EndpointSlices:
// terminal pods and pods without an IP are out; terminating pods stay, as
// terminating endpoints.
func podInEndpoints(pod *v1.Pod) bool {
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return false
	}
	return pod.Status.PodIP != "" || len(pod.Status.PodIPs) > 0
}

// podReady reports whether the pod's Ready condition is True.
func podReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// endpointPorts resolves the Service's ports against one pod. A named
// targetPort the pod does not declare (with that protocol) leaves that port
// out, so such pods land in a slice with a different port set.
func endpointPorts(svc *v1.Service, pod *v1.Pod) []discovery.EndpointPort {
	ports := []discovery.EndpointPort{}
	if len(svc.Spec.Ports) == 0 && svc.Spec.ClusterIP == v1.ClusterIPNone {
		return ports
	}
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		num, ok := findPort(pod, sp)
		if !ok {
			continue
		}
		name, proto := sp.Name, sp.Protocol
		var appProtocol *string
		if sp.AppProtocol != nil {
			a := *sp.AppProtocol
			appProtocol = &a
		}
		ports = append(ports, discovery.EndpointPort{Name: &name, Port: &num, Protocol: &proto, AppProtocol: appProtocol})
	}
	return ports
}

// findPort resolves a Service port's targetPort on a pod: a number is used
// as is; a name is looked up among the containers' ports (and restartable
// init containers', i.e. sidecars) with the same protocol.
func findPort(pod *v1.Pod, sp *v1.ServicePort) (int32, bool) {
	if sp.TargetPort.Type == intstr.Int {
		return sp.TargetPort.IntVal, true
	}
	name := sp.TargetPort.StrVal
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name && p.Protocol == sp.Protocol {
				return p.ContainerPort, true
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
			continue
		}
		for _, p := range c.Ports {
			if p.Name == name && p.Protocol == sp.Protocol {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// addressTypes lists the slice address types a Service gets, from its
// ipFamilies; without them (an old object) from its clusterIP, and a
// headless Service without families gets both.
func addressTypes(svc *v1.Service) []discovery.AddressType {
	var out []discovery.AddressType
	for _, f := range svc.Spec.IPFamilies {
		at := discovery.AddressTypeIPv4
		if f == v1.IPv6Protocol {
			at = discovery.AddressTypeIPv6
		} else if f != v1.IPv4Protocol {
			continue
		}
		if !containsType(out, at) {
			out = append(out, at)
		}
	}
	if len(out) > 0 {
		return out
	}
	if svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != v1.ClusterIPNone {
		if netutils.IsIPv6String(svc.Spec.ClusterIP) {
			return []discovery.AddressType{discovery.AddressTypeIPv6}
		}
		return []discovery.AddressType{discovery.AddressTypeIPv4}
	}
	return []discovery.AddressType{discovery.AddressTypeIPv4, discovery.AddressTypeIPv6}
}

func containsType(types []discovery.AddressType, at discovery.AddressType) bool {
	for _, t := range types {
		if t == at {
			return true
		}
	}
	return false
}

// newSlice returns an unnamed slice for svc with the given ports.
func newSlice(svc *v1.Service, ports []discovery.EndpointPort, at discovery.AddressType) *discovery.EndpointSlice {
	ref := metav1.NewControllerRef(svc, schema.GroupVersionKind{Version: "v1", Kind: "Service"})
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    slicePrefix(svc.Name),
			Namespace:       svc.Namespace,
			OwnerReferences: []metav1.OwnerReference{*ref},
		},
		AddressType: at,
		Ports:       append([]discovery.EndpointPort{}, ports...),
		Endpoints:   []discovery.Endpoint{},
	}
	s.Labels, _ = sliceLabels(s, svc)
	return s
}

// slicePrefix is "<svc>-" when that is a valid name prefix, else the name.
func slicePrefix(name string) string {
	prefix := name + "-"
	if len(apivalidation.NameIsDNSSubdomain(prefix, true)) != 0 {
		return name
	}
	return prefix
}

// reservedLabel reports labels the controller sets itself and never copies
// from the Service.
func reservedLabel(key string) bool {
	return key == discovery.LabelServiceName || key == discovery.LabelManagedBy || key == v1.IsHeadlessService
}

// sliceLabels returns the labels slice s must carry for svc: the Service's
// labels except reserved ones, the headless marker, the service name and
// managed-by. The bool reports whether the copied Service labels differ
// from the slice's.
func sliceLabels(s *discovery.EndpointSlice, svc *v1.Service) (map[string]string, bool) {
	have := map[string]string{}
	for k, v := range s.Labels {
		if !reservedLabel(k) {
			have[k] = v
		}
	}
	want := map[string]string{}
	for k, v := range svc.Labels {
		if !reservedLabel(k) {
			want[k] = v
		}
	}
	changed := !apiequality.Semantic.DeepEqual(have, want)
	if svc.Spec.ClusterIP == v1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		want[v1.IsHeadlessService] = ""
	}
	want[discovery.LabelServiceName] = svc.Name
	want[discovery.LabelManagedBy] = ControllerName
	return want, changed
}

// ownedBy reports whether s has an owner reference to this very Service
// (same UID), so slices of an older Service of the same name are replaced.
func ownedBy(s *discovery.EndpointSlice, svc *v1.Service) bool {
	for _, o := range s.OwnerReferences {
		if o.UID == svc.UID && o.Kind == "Service" && o.APIVersion == "v1" {
			return true
		}
	}
	return false
}

// placeholderEqual reports whether the existing slice already is the
// wanted placeholder, comparing what matters: namespace, labels, owners,
// address type and emptiness.
func placeholderEqual(have, want *discovery.EndpointSlice) bool {
	return have.Namespace == want.Namespace &&
		have.AddressType == want.AddressType &&
		len(have.Ports) == 0 && len(have.Endpoints) == 0 &&
		apiequality.Semantic.DeepEqual(have.Labels, want.Labels) &&
		apiequality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences)
}

// endpointKey identifies an endpoint across syncs by what cannot change
// in place: addresses, hostname and the pod it stands for. Everything else
// (conditions, zone, hints) is updated in place.
func endpointKey(ep *discovery.Endpoint) string {
	addrs := append([]string(nil), ep.Addresses...)
	sort.Strings(addrs)
	var b strings.Builder
	b.WriteString(strings.Join(addrs, ","))
	b.WriteByte('|')
	if ep.Hostname != nil {
		b.WriteString(*ep.Hostname)
	}
	b.WriteByte('|')
	if ep.TargetRef != nil {
		b.WriteString(ep.TargetRef.Namespace)
		b.WriteByte('/')
		b.WriteString(ep.TargetRef.Name)
	}
	return b.String()
}

// endpointEqual compares two endpoints with the same key, ignoring the
// resourceVersion of their targetRef (pod writes that do not matter).
func endpointEqual(a, b *discovery.Endpoint) bool {
	if !strPtrEqual(a.NodeName, b.NodeName) || !strPtrEqual(a.Zone, b.Zone) ||
		!boolPtrEqual(a.Conditions.Ready, b.Conditions.Ready) ||
		!boolPtrEqual(a.Conditions.Serving, b.Conditions.Serving) ||
		!boolPtrEqual(a.Conditions.Terminating, b.Conditions.Terminating) {
		return false
	}
	if (a.TargetRef == nil) != (b.TargetRef == nil) {
		return false
	}
	if a.TargetRef != nil {
		ra, rb := *a.TargetRef, *b.TargetRef
		ra.ResourceVersion, rb.ResourceVersion = "", ""
		if ra != rb {
			return false
		}
	}
	return apiequality.Semantic.DeepEqual(a.Hints, b.Hints)
}

func strPtrEqual(a, b *string) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func boolPtrEqual(a, b *bool) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// portsKey identifies a port set independently of order.
func portsKey(ports []discovery.EndpointPort) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		parts = append(parts, strings.Join([]string{
			optString(p.Name), optString((*string)(p.Protocol)), optInt(p.Port), optString(p.AppProtocol),
		}, "/"))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func optString(s *string) string {
	if s == nil {
		return "-"
	}
	return strconv.Quote(*s)
}

func optInt(i *int32) string {
	if i == nil {
		return "-"
	}
	return strconv.Itoa(int(*i))
}

// setTriggerTime stamps (or clears, for a zero time) the
// last-change-trigger-time annotation.
func setTriggerTime(s *discovery.EndpointSlice, t time.Time) {
	if t.IsZero() {
		delete(s.Annotations, v1.EndpointsLastChangeTriggerTime)
		return
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[v1.EndpointsLastChangeTriggerTime] = t.UTC().Format(time.RFC3339Nano)
}

func sortByName(slices []*discovery.EndpointSlice) {
	sort.SliceStable(slices, func(i, j int) bool { return slices[i].Name < slices[j].Name })
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// describe names a slice for errors and logs.
func describe(s *discovery.EndpointSlice) string {
	if s.Name != "" {
		return fmt.Sprintf("EndpointSlice %s/%s", s.Namespace, s.Name)
	}
	return fmt.Sprintf("EndpointSlice %s/%s*", s.Namespace, s.GenerateName)
}
