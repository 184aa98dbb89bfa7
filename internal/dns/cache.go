package dns

import (
	"fmt"
	"net/netip"
	"strconv"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// Cache is the read-only, indexed view of the cluster the server answers from. Objects
// it returns are shared with the cache and must not be modified.
type Cache interface {
	// Synced reports whether the cache holds a complete view; until then the server
	// answers SERVFAIL for the cluster zone.
	Synced() bool
	// Service returns the Service namespace/name.
	Service(namespace, name string) (*v1.Service, bool)
	// ServicesByIP returns the Services with ip among their ClusterIPs.
	ServicesByIP(ip netip.Addr) []*v1.Service
	// EndpointSlices returns the slices of Service namespace/name (by the
	// kubernetes.io/service-name label).
	EndpointSlices(namespace, service string) []*discoveryv1.EndpointSlice
	// EndpointSlicesByIP returns the slices with an endpoint address ip.
	EndpointSlicesByIP(ip netip.Addr) []*discoveryv1.EndpointSlice
	// PodByIP returns the pod (not on the host network) whose address is ip.
	PodByIP(ip netip.Addr) (PodInfo, bool)
	// NamespaceExists reports whether the Namespace exists.
	NamespaceExists(name string) bool
	// HasServices reports whether the namespace holds any Service.
	HasServices(namespace string) bool
}

// PodInfo is what the server needs to know about a pod: where it lives and whether its
// resolver uses the standard cluster search list (dnsPolicy ClusterFirst without
// dnsConfig), the condition for answering its search-expanded names early.
type PodInfo struct {
	Namespace, Name string
	StandardSearch  bool
}

// Index names shared by the informer cache and the fake, so both answer lookups with
// the same functions.
const (
	byClusterIP = "clusterIP"
	byService   = "service"
	byAddress   = "address"
	byPodIP     = "podIP"
)

func serviceIPIndex(obj any) ([]string, error) {
	svc, ok := obj.(*v1.Service)
	if !ok {
		return nil, fmt.Errorf("service index: unexpected %T", obj)
	}
	var keys []string
	for _, ip := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(ip); err == nil {
			keys = append(keys, a.String())
		}
	}
	if len(keys) == 0 && svc.Spec.ClusterIP != "" {
		if a, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil {
			keys = append(keys, a.String())
		}
	}
	return keys, nil
}

func sliceServiceIndex(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, fmt.Errorf("endpointslice index: unexpected %T", obj)
	}
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return nil, nil
	}
	return []string{s.Namespace + "/" + name}, nil
}

func sliceAddressIndex(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, fmt.Errorf("endpointslice index: unexpected %T", obj)
	}
	var keys []string
	for _, ep := range s.Endpoints {
		for _, a := range ep.Addresses {
			if ip, err := netip.ParseAddr(a); err == nil {
				keys = append(keys, ip.String())
			}
		}
	}
	return keys, nil
}

func podIPIndex(obj any) ([]string, error) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return nil, fmt.Errorf("pod index: unexpected %T", obj)
	}
	if p.Spec.HostNetwork || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		// The node's address, or one a finished pod no longer holds.
		return nil, nil
	}
	var keys []string
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			keys = append(keys, a.String())
		}
	}
	if len(keys) == 0 && p.Status.PodIP != "" {
		if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			keys = append(keys, a.String())
		}
	}
	return keys, nil
}

// stripPod keeps of a pod only what PodByIP needs, so the server holds a few hundred
// bytes per pod instead of the whole object (CoreDNS's `pods verified` keeps them all).
func stripPod(obj any) (any, error) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil // a tombstone: the informer handles it
	}
	out := &v1.Pod{}
	out.Name, out.Namespace, out.UID, out.ResourceVersion = p.Name, p.Namespace, p.UID, p.ResourceVersion
	out.Spec.HostNetwork = p.Spec.HostNetwork
	out.Spec.DNSPolicy = p.Spec.DNSPolicy
	out.Annotations = map[string]string{standardSearchMark: strconv.FormatBool(standardSearch(p))}
	out.Status.Phase = p.Status.Phase
	out.Status.PodIP = p.Status.PodIP
	out.Status.PodIPs = p.Status.PodIPs
	return out, nil
}

// standardSearchMark records on a stripped pod whether its resolv.conf is the
// cluster default (stripPod drops the fields that decide it).
const standardSearchMark = "dns.tranche.dev/standard-search"

func standardSearch(p *v1.Pod) bool {
	if p.Spec.HostNetwork {
		return false
	}
	if p.Spec.DNSPolicy != v1.DNSClusterFirst && p.Spec.DNSPolicy != "" {
		return false
	}
	c := p.Spec.DNSConfig
	return c == nil || (len(c.Searches) == 0 && len(c.Options) == 0 && len(c.Nameservers) == 0)
}

// The indexes each store needs (functions, so no map is shared between caches).
func serviceIndexers() cache.Indexers { return cache.Indexers{byClusterIP: serviceIPIndex} }
func sliceIndexers() cache.Indexers {
	return cache.Indexers{byService: sliceServiceIndex, byAddress: sliceAddressIndex}
}
func podIndexers() cache.Indexers { return cache.Indexers{byPodIP: podIPIndex} }

// stores answers the Cache lookups over client-go indexers; the informer cache and the
// fake differ only in how the indexers are fed.
type stores struct {
	services, slices, pods, namespaces cache.Indexer
	synced                             func() bool
}

func newIndexers() (svc, slices, pods, ns cache.Indexer) {
	// Informers from a shared factory index by namespace already; the fake does too.
	svc = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := svc.AddIndexers(serviceIndexers()); err != nil {
		panic(err) // programmer error: conflicting index names
	}
	return svc,
		cache.NewIndexer(cache.MetaNamespaceKeyFunc, sliceIndexers()),
		cache.NewIndexer(cache.MetaNamespaceKeyFunc, podIndexers()),
		cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
}

func (s *stores) Synced() bool { return s.synced() }

func (s *stores) Service(namespace, name string) (*v1.Service, bool) {
	obj, ok, err := s.services.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	svc, ok := obj.(*v1.Service)
	return svc, ok
}

func (s *stores) ServicesByIP(ip netip.Addr) []*v1.Service {
	objs, _ := s.services.ByIndex(byClusterIP, ip.String())
	return typed[*v1.Service](objs)
}

func (s *stores) EndpointSlices(namespace, service string) []*discoveryv1.EndpointSlice {
	objs, _ := s.slices.ByIndex(byService, namespace+"/"+service)
	return typed[*discoveryv1.EndpointSlice](objs)
}

func (s *stores) EndpointSlicesByIP(ip netip.Addr) []*discoveryv1.EndpointSlice {
	objs, _ := s.slices.ByIndex(byAddress, ip.String())
	return typed[*discoveryv1.EndpointSlice](objs)
}

func (s *stores) PodByIP(ip netip.Addr) (PodInfo, bool) {
	objs, _ := s.pods.ByIndex(byPodIP, ip.String())
	pods := typed[*v1.Pod](objs)
	if len(pods) != 1 {
		// None, or an address two pods claim (one leaving, one arriving): not sure whose.
		return PodInfo{}, false
	}
	p := pods[0]
	return PodInfo{Namespace: p.Namespace, Name: p.Name, StandardSearch: p.Annotations[standardSearchMark] == "true"}, true
}

func (s *stores) NamespaceExists(name string) bool {
	_, ok, err := s.namespaces.GetByKey(name)
	return err == nil && ok
}

func (s *stores) HasServices(namespace string) bool {
	keys, err := s.services.IndexKeys(cache.NamespaceIndex, namespace)
	return err == nil && len(keys) > 0
}

func typed[T any](objs []any) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// Fake is a Cache fed by hand, for tests and benchmarks. It indexes with the same
// functions as the informer cache and refuses objects the API server would not hold.
type Fake struct {
	stores
	synced atomic.Bool
}

var _ Cache = (*Fake)(nil)

// NewFake returns an empty, synced Fake.
func NewFake() *Fake {
	f := &Fake{}
	f.services, f.slices, f.pods, f.namespaces = newIndexers()
	f.stores.synced = f.synced.Load
	f.synced.Store(true)
	return f
}

// SetSynced sets what Synced reports.
func (f *Fake) SetSynced(v bool) { f.synced.Store(v) }

// Add stores (or replaces) Services, EndpointSlices, Pods and Namespaces.
func (f *Fake) Add(objs ...any) error {
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *v1.Service:
			if err = requireName(o.Namespace, o.Name, "Service"); err == nil {
				err = f.services.Update(o)
			}
		case *discoveryv1.EndpointSlice:
			if err = requireName(o.Namespace, o.Name, "EndpointSlice"); err == nil {
				err = f.slices.Update(o)
			}
		case *v1.Pod:
			if err = requireName(o.Namespace, o.Name, "Pod"); err == nil {
				var stripped any
				stripped, err = stripPod(o)
				if err == nil {
					err = f.pods.Update(stripped)
				}
			}
		case *v1.Namespace:
			if o.Name == "" {
				err = fmt.Errorf("Namespace: metadata.name is required")
			} else {
				err = f.namespaces.Update(o)
			}
		default:
			err = fmt.Errorf("fake DNS cache: unsupported object %T", obj)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Delete removes an object added before (matched by kind, namespace and name).
func (f *Fake) Delete(obj any) error {
	switch o := obj.(type) {
	case *v1.Service:
		return f.services.Delete(o)
	case *discoveryv1.EndpointSlice:
		return f.slices.Delete(o)
	case *v1.Pod:
		return f.pods.Delete(o)
	case *v1.Namespace:
		return f.namespaces.Delete(o)
	}
	return fmt.Errorf("fake DNS cache: unsupported object %T", obj)
}

func requireName(ns, name, kind string) error {
	if ns == "" || name == "" {
		return fmt.Errorf("%s %s/%s: metadata.namespace and metadata.name are required", kind, ns, name)
	}
	return nil
}
