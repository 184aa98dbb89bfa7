// Package endpoints is the (deprecated, still shown by `kubectl get
// endpoints`) Endpoints controller: one core/v1 Endpoints object per
// Service with a selector, named like the Service, its subsets grouping
// the selected pods by resolved port set. reconcile is the pure part;
// Controller applies its result through client-go.
package endpoints

import (
	"bytes"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	netutils "k8s.io/utils/net"
)

const (
	// MaxCapacity is the most addresses one Endpoints object carries.
	MaxCapacity = 1000
	// truncated is the over-capacity annotation's value.
	truncated = "truncated"
)

// plan is what one sync writes for one Service: at most one of its fields
// is set.
type plan struct {
	create *v1.Endpoints
	update *v1.Endpoints
	delete bool
}

// reconcile computes the write that makes existing (nil when absent) the
// Endpoints of svc (nil when the Service is gone). Services without
// selector and ExternalName Services are left alone: their Endpoints are
// the user's. triggerTime, when not zero, is stamped as
// endpoints.kubernetes.io/last-change-trigger-time on a write; it never
// causes one.
func reconcile(svc *v1.Service, pods []*v1.Pod, existing *v1.Endpoints, triggerTime time.Time) plan {
	if svc == nil {
		return plan{delete: existing != nil}
	}
	if svc.Spec.Selector == nil || svc.Spec.Type == v1.ServiceTypeExternalName {
		return plan{}
	}
	subsets := desiredSubsets(svc, pods)
	labels := desiredLabels(svc)

	if existing != nil &&
		subsetsEqual(existing.Subsets, subsets) &&
		apiequality.Semantic.DeepEqual(existing.Labels, labels) &&
		capacityAnnotationCorrect(existing) {
		return plan{}
	}

	var ep *v1.Endpoints
	if existing != nil {
		ep = existing.DeepCopy()
	} else {
		ep = &v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name}}
	}
	ep.Subsets = subsets
	ep.Labels = labels
	if ep.Annotations == nil {
		ep.Annotations = map[string]string{}
	}
	if triggerTime.IsZero() {
		delete(ep.Annotations, v1.EndpointsLastChangeTriggerTime)
	} else {
		ep.Annotations[v1.EndpointsLastChangeTriggerTime] = triggerTime.UTC().Format(time.RFC3339Nano)
	}
	if truncate(ep) {
		ep.Annotations[v1.EndpointsOverCapacity] = truncated
	} else {
		delete(ep.Annotations, v1.EndpointsOverCapacity)
	}
	if existing == nil {
		return plan{create: ep}
	}
	return plan{update: ep}
}

// desiredLabels are the Service's labels, the headless marker for a
// Service without cluster IP, and skip-mirror so that the mirroring
// controller leaves our object alone.
func desiredLabels(svc *v1.Service) map[string]string {
	labels := map[string]string{}
	for k, v := range svc.Labels {
		labels[k] = v
	}
	if svc.Spec.ClusterIP == v1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		labels[v1.IsHeadlessService] = ""
	} else {
		delete(labels, v1.IsHeadlessService)
	}
	labels[discovery.LabelSkipMirror] = "true"
	return labels
}

// desiredSubsets groups the pods' addresses by the port set they resolve
// to, in a canonical order.
func desiredSubsets(svc *v1.Service, pods []*v1.Pod) []v1.EndpointSubset {
	type entry struct {
		ports    []v1.EndpointPort
		ready    []v1.EndpointAddress
		notReady []v1.EndpointAddress
	}
	groups := map[string]*entry{}
	for _, pod := range pods {
		if pod == nil || !podInEndpoints(pod, svc.Spec.PublishNotReadyAddresses) {
			continue
		}
		addr, ok := podAddress(svc, pod)
		if !ok {
			continue
		}
		var ports []v1.EndpointPort
		if len(svc.Spec.Ports) == 0 {
			// Only a headless Service may go without ports.
			if svc.Spec.ClusterIP != v1.ClusterIPNone {
				continue
			}
		} else {
			for i := range svc.Spec.Ports {
				sp := &svc.Spec.Ports[i]
				num, ok := findPort(pod, sp)
				if !ok {
					continue
				}
				ports = append(ports, v1.EndpointPort{Name: sp.Name, Port: num, Protocol: sp.Protocol, AppProtocol: sp.AppProtocol})
			}
			if len(ports) == 0 {
				continue
			}
		}
		sortPorts(ports)
		k := portsKey(ports)
		g := groups[k]
		if g == nil {
			g = &entry{ports: ports}
			groups[k] = g
		}
		if svc.Spec.PublishNotReadyAddresses || podReady(pod) {
			g.ready = append(g.ready, addr)
		} else {
			g.notReady = append(g.notReady, addr)
		}
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	subsets := []v1.EndpointSubset{}
	for _, k := range keys {
		g := groups[k]
		sortAddresses(g.ready)
		sortAddresses(g.notReady)
		subsets = append(subsets, v1.EndpointSubset{Addresses: g.ready, NotReadyAddresses: g.notReady, Ports: g.ports})
	}
	return subsets
}

// podAddress is the pod's address in the Service's primary IP family.
func podAddress(svc *v1.Service, pod *v1.Pod) (v1.EndpointAddress, bool) {
	wantV6 := false
	switch {
	case len(svc.Spec.IPFamilies) > 0:
		wantV6 = svc.Spec.IPFamilies[0] == v1.IPv6Protocol
	case svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != v1.ClusterIPNone:
		wantV6 = netutils.IsIPv6String(svc.Spec.ClusterIP)
	default:
		wantV6 = netutils.IsIPv6String(pod.Status.PodIP)
	}
	ips := []string{}
	for _, p := range pod.Status.PodIPs {
		ips = append(ips, p.IP)
	}
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = append(ips, pod.Status.PodIP)
	}
	for _, ip := range ips {
		if netutils.IsIPv6String(ip) == wantV6 && netutils.ParseIPSloppy(ip) != nil {
			node := pod.Spec.NodeName
			addr := v1.EndpointAddress{
				IP:        ip,
				NodeName:  &node,
				TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			}
			if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
				addr.Hostname = pod.Spec.Hostname
			}
			return addr, true
		}
	}
	return v1.EndpointAddress{}, false
}

// podInEndpoints is Kubernetes' rule for Endpoints: no terminal pods, no
// pods without IP, and terminating pods only when not-ready addresses are
// published.
func podInEndpoints(pod *v1.Pod, includeTerminating bool) bool {
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return false
	}
	if pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0 {
		return false
	}
	return includeTerminating || pod.DeletionTimestamp == nil
}

func podReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// findPort resolves a targetPort on a pod: numbers as is, names among the
// containers' (and sidecars') ports with the same protocol.
func findPort(pod *v1.Pod, sp *v1.ServicePort) (int32, bool) {
	if sp.TargetPort.Type == intstr.Int {
		return sp.TargetPort.IntVal, true
	}
	containers := append([]v1.Container(nil), pod.Spec.Containers...)
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			containers = append(containers, c)
		}
	}
	for _, c := range containers {
		for _, p := range c.Ports {
			if p.Name == sp.TargetPort.StrVal && p.Protocol == sp.Protocol {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

func sortPorts(ports []v1.EndpointPort) {
	sort.Slice(ports, func(i, j int) bool {
		if ports[i].Name != ports[j].Name {
			return ports[i].Name < ports[j].Name
		}
		if ports[i].Port != ports[j].Port {
			return ports[i].Port < ports[j].Port
		}
		return ports[i].Protocol < ports[j].Protocol
	})
}

func portsKey(ports []v1.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		b.WriteString(p.Name)
		b.WriteByte('/')
		b.WriteString(string(p.Protocol))
		b.WriteByte('/')
		b.WriteString(strconv.Itoa(int(p.Port)))
		if p.AppProtocol != nil {
			b.WriteString("/" + *p.AppProtocol)
		}
		b.WriteByte(',')
	}
	return b.String()
}

// sortAddresses orders addresses by IP (as bytes), then pod UID, as
// Kubernetes does.
func sortAddresses(addrs []v1.EndpointAddress) {
	sort.Slice(addrs, func(i, j int) bool {
		a, b := netutils.ParseIPSloppy(addrs[i].IP), netutils.ParseIPSloppy(addrs[j].IP)
		if c := bytes.Compare(a, b); c != 0 {
			return c < 0
		}
		return uid(addrs[i]) < uid(addrs[j])
	})
}

func uid(a v1.EndpointAddress) string {
	if a.TargetRef == nil {
		return ""
	}
	return string(a.TargetRef.UID)
}

// subsetsEqual compares subsets ignoring the targetRefs' resourceVersion
// and nil-versus-empty lists.
func subsetsEqual(a, b []v1.EndpointSubset) bool {
	return apiequality.Semantic.DeepEqual(stripRV(a), stripRV(b))
}

func stripRV(subsets []v1.EndpointSubset) []v1.EndpointSubset {
	out := make([]v1.EndpointSubset, len(subsets))
	for i := range subsets {
		s := *subsets[i].DeepCopy()
		for _, addrs := range [][]v1.EndpointAddress{s.Addresses, s.NotReadyAddresses} {
			for j := range addrs {
				if addrs[j].TargetRef != nil {
					addrs[j].TargetRef.ResourceVersion = ""
				}
			}
		}
		out[i] = s
	}
	return out
}

// capacityAnnotationCorrect reports whether the object is within capacity
// and not marked as truncated.
func capacityAnnotationCorrect(ep *v1.Endpoints) bool {
	n := 0
	for _, s := range ep.Subsets {
		n += len(s.Addresses) + len(s.NotReadyAddresses)
	}
	if n > MaxCapacity {
		return false
	}
	_, marked := ep.Annotations[v1.EndpointsOverCapacity]
	return !marked
}

// truncate cuts ep down to MaxCapacity addresses as Kubernetes does:
// ready addresses first, each subset keeping its proportional share
// (rounded up). It reports whether anything was cut.
func truncate(ep *v1.Endpoints) bool {
	ready, notReady := 0, 0
	for _, s := range ep.Subsets {
		ready += len(s.Addresses)
		notReady += len(s.NotReadyAddresses)
	}
	if ready+notReady <= MaxCapacity {
		return false
	}
	cutReady := ready > MaxCapacity
	budget, total := MaxCapacity-ready, notReady
	if cutReady {
		budget, total = MaxCapacity, ready
	}
	left := budget
	for i := range ep.Subsets {
		s := &ep.Subsets[i]
		n := len(s.NotReadyAddresses)
		if cutReady {
			n = len(s.Addresses)
		}
		share := min(int(math.Ceil(float64(n)/float64(total)*float64(budget))), left)
		if cutReady {
			s.Addresses = s.Addresses[:min(share, len(s.Addresses))]
			s.NotReadyAddresses = []v1.EndpointAddress{}
			left -= len(s.Addresses)
		} else {
			s.NotReadyAddresses = s.NotReadyAddresses[:min(share, len(s.NotReadyAddresses))]
			left -= len(s.NotReadyAddresses)
		}
	}
	return true
}
