package ingress

import (
	"fmt"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// Cache is the read-only view of the API the controller builds its Table from. The
// production implementation sits on shared informers; Fake is an in-memory one for tests.
// Returned objects are shared and must not be modified.
type Cache interface {
	// Ingresses returns every Ingress in every namespace.
	Ingresses() []*networkingv1.Ingress
	// IngressClasses returns every IngressClass.
	IngressClasses() []*networkingv1.IngressClass
	// Service returns the Service namespace/name, or false when there is none.
	Service(namespace, name string) (*v1.Service, bool)
	// EndpointSlices returns the slices labelled kubernetes.io/service-name=service.
	EndpointSlices(namespace, service string) []*discoveryv1.EndpointSlice
	// Secret returns the Secret namespace/name, or false when there is none.
	Secret(namespace, name string) (*v1.Secret, bool)
}

// Fake is a Cache over objects held in memory. Like the informer cache it indexes slices
// by their kubernetes.io/service-name label, so a slice without it is never found.
type Fake struct {
	mu        sync.Mutex
	ingresses map[string]*networkingv1.Ingress
	classes   map[string]*networkingv1.IngressClass
	services  map[string]*v1.Service
	slices    map[string]*discoveryv1.EndpointSlice
	secrets   map[string]*v1.Secret
}

var _ Cache = (*Fake)(nil)

// NewFake returns a Fake holding objs (see Add).
func NewFake(objs ...any) *Fake {
	f := &Fake{
		ingresses: map[string]*networkingv1.Ingress{},
		classes:   map[string]*networkingv1.IngressClass{},
		services:  map[string]*v1.Service{},
		slices:    map[string]*discoveryv1.EndpointSlice{},
		secrets:   map[string]*v1.Secret{},
	}
	for _, o := range objs {
		f.Add(o)
	}
	return f
}

// Add stores or replaces obj, which must be one of the kinds the Cache serves; any other
// kind is a programmer error and panics.
func (f *Fake) Add(obj any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		f.ingresses[o.Namespace+"/"+o.Name] = o
	case *networkingv1.IngressClass:
		f.classes[o.Name] = o
	case *v1.Service:
		f.services[o.Namespace+"/"+o.Name] = o
	case *discoveryv1.EndpointSlice:
		f.slices[o.Namespace+"/"+o.Name] = o
	case *v1.Secret:
		f.secrets[o.Namespace+"/"+o.Name] = o
	default:
		panic(fmt.Sprintf("ingress.Fake: unsupported object %T", obj))
	}
}

// Ingresses implements Cache, in namespace/name order.
func (f *Fake) Ingresses() []*networkingv1.Ingress {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sortedValues(f.ingresses)
}

// IngressClasses implements Cache, in name order.
func (f *Fake) IngressClasses() []*networkingv1.IngressClass {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sortedValues(f.classes)
}

// Service implements Cache.
func (f *Fake) Service(namespace, name string) (*v1.Service, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.services[namespace+"/"+name]
	return s, ok
}

// EndpointSlices implements Cache.
func (f *Fake) EndpointSlices(namespace, service string) []*discoveryv1.EndpointSlice {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*discoveryv1.EndpointSlice
	for _, s := range sortedValues(f.slices) {
		if s.Namespace == namespace && s.Labels[discoveryv1.LabelServiceName] == service {
			out = append(out, s)
		}
	}
	return out
}

// Secret implements Cache.
func (f *Fake) Secret(namespace, name string) (*v1.Secret, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.secrets[namespace+"/"+name]
	return s, ok
}

func sortedValues[T any](m map[string]T) []T {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]T, 0, len(keys))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}
