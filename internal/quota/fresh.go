package quota

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// freshQuotas is the informer factory the quota admission plugin reads quotas from: f's,
// except that a quota whose cached status does not yet cover its spec (the controller's
// first status write, or one after a spec change, not delivered to this server yet) is
// read live. Upstream's plugin takes the cached quota as it is, and a quota without
// status.hard restricts nothing: a create admitted in that moment is never charged, so
// status.used stays one short until the controller recalculates the quota (after a
// deletion in the namespace, or the full recalculation every 5 minutes), a create over
// the limit is admitted meanwhile, and a client that waits for the status before
// creating, as the conformance specs do, does not avoid it: the status it read may not
// have reached this server's informer (TestResourceQuotaObjectCounts, under load). Once the cache shows the status, this
// costs nothing.
type freshQuotas struct {
	informers.SharedInformerFactory
	client kubernetes.Interface
}

func (f freshQuotas) Core() coreinformers.Interface {
	return freshCore{Interface: f.SharedInformerFactory.Core(), client: f.client}
}

type freshCore struct {
	coreinformers.Interface
	client kubernetes.Interface
}

func (c freshCore) V1() corev1informers.Interface {
	return freshCoreV1{Interface: c.Interface.V1(), client: c.client}
}

type freshCoreV1 struct {
	corev1informers.Interface
	client kubernetes.Interface
}

func (c freshCoreV1) ResourceQuotas() corev1informers.TypedResourceQuotaInformer {
	return freshQuotaInformer{TypedResourceQuotaInformer: c.Interface.ResourceQuotas(), client: c.client}
}

type freshQuotaInformer struct {
	corev1informers.TypedResourceQuotaInformer
	client kubernetes.Interface
}

func (i freshQuotaInformer) Lister() corev1listers.ResourceQuotaLister {
	return freshLister{ResourceQuotaLister: i.TypedResourceQuotaInformer.Lister(), client: i.client}
}

type freshLister struct {
	corev1listers.ResourceQuotaLister
	client kubernetes.Interface
}

func (l freshLister) ResourceQuotas(namespace string) corev1listers.ResourceQuotaNamespaceLister {
	return freshNamespaceLister{ResourceQuotaNamespaceLister: l.ResourceQuotaLister.ResourceQuotas(namespace), client: l.client, namespace: namespace}
}

type freshNamespaceLister struct {
	corev1listers.ResourceQuotaNamespaceLister
	client    kubernetes.Interface
	namespace string
}

// liveQuotaTimeout bounds a live read of a quota; on failure the cached one is used.
const liveQuotaTimeout = 5 * time.Second

// List returns the cached quotas, each one whose status does not cover its spec
// replaced by the stored one.
func (l freshNamespaceLister) List(selector labels.Selector) ([]*v1.ResourceQuota, error) {
	items, err := l.ResourceQuotaNamespaceLister.List(selector)
	if err != nil {
		return nil, err
	}
	for i, q := range items {
		if quotav1.Equals(q.Spec.Hard, q.Status.Hard) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), liveQuotaTimeout)
		live, err := l.client.CoreV1().ResourceQuotas(l.namespace).Get(ctx, q.Name, metav1.GetOptions{})
		cancel()
		if err == nil {
			items[i] = live
		}
	}
	return items, nil
}
