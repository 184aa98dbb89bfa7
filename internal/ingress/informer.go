package ingress

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

const byServiceName = "serviceName"

// informerCache is the production Cache over shared informers.
type informerCache struct {
	factory  informers.SharedInformerFactory
	ings     cache.Indexer
	classes  cache.Indexer
	services cache.Indexer
	slices   cache.Indexer
	secrets  cache.Indexer
	synced   []cache.InformerSynced
}

var _ Cache = (*informerCache)(nil)

// newInformerCache starts informers on the kinds Build reads; onChange is called after
// every add, update and delete (it must not block).
func newInformerCache(ctx context.Context, client kubernetes.Interface, onChange func()) (*informerCache, error) {
	f := informers.NewSharedInformerFactory(client, 0)
	c := &informerCache{factory: f}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { onChange() },
		UpdateFunc: func(any, any) { onChange() },
		DeleteFunc: func(any) { onChange() },
	}
	sliceInf := f.Discovery().V1().EndpointSlices().Informer()
	if err := sliceInf.AddIndexers(cache.Indexers{byServiceName: func(obj any) ([]string, error) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return nil, fmt.Errorf("endpointslice index: unexpected %T", obj)
		}
		if n := s.Labels[discoveryv1.LabelServiceName]; n != "" {
			return []string{s.Namespace + "/" + n}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	infs := []cache.SharedIndexInformer{
		f.Networking().V1().Ingresses().Informer(),
		f.Networking().V1().IngressClasses().Informer(),
		f.Core().V1().Services().Informer(),
		sliceInf,
		f.Core().V1().Secrets().Informer(),
	}
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, err
		}
		c.synced = append(c.synced, inf.HasSynced)
	}
	c.ings, c.classes, c.services, c.slices, c.secrets = infs[0].GetIndexer(), infs[1].GetIndexer(), infs[2].GetIndexer(), infs[3].GetIndexer(), infs[4].GetIndexer()
	f.Start(ctx.Done())
	return c, nil
}

// Synced reports whether every informer has listed once.
func (c *informerCache) Synced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

func (c *informerCache) Ingresses() []*networkingv1.Ingress {
	ls, _ := informersList[*networkingv1.Ingress](c.ings)
	return ls
}

func (c *informerCache) IngressClasses() []*networkingv1.IngressClass {
	ls, _ := informersList[*networkingv1.IngressClass](c.classes)
	return ls
}

func (c *informerCache) Service(namespace, name string) (*v1.Service, bool) {
	return getByKey[*v1.Service](c.services, namespace+"/"+name)
}

func (c *informerCache) Secret(namespace, name string) (*v1.Secret, bool) {
	return getByKey[*v1.Secret](c.secrets, namespace+"/"+name)
}

func (c *informerCache) EndpointSlices(namespace, service string) []*discoveryv1.EndpointSlice {
	objs, err := c.slices.ByIndex(byServiceName, namespace+"/"+service)
	if err != nil {
		return nil
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func getByKey[T any](idx cache.Indexer, key string) (T, bool) {
	var zero T
	o, ok, err := idx.GetByKey(key)
	if err != nil || !ok {
		return zero, false
	}
	t, ok := o.(T)
	return t, ok
}

func informersList[T interface {
	GetNamespace() string
	GetName() string
}](idx cache.Indexer) ([]T, error) {
	var out []T
	err := cache.ListAll(idx, labels.Everything(), func(o any) {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	})
	sort.Slice(out, func(i, j int) bool {
		return out[i].GetNamespace()+"/"+out[i].GetName() < out[j].GetNamespace()+"/"+out[j].GetName()
	})
	return out, err
}
