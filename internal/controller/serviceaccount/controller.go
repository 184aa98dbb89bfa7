// Package serviceaccount keeps a "default" ServiceAccount in every namespace, as
// Kubernetes' service account controller does: pods that name no account use it.
package serviceaccount

import (
	"context"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// DefaultName is the account every namespace gets.
const DefaultName = "default"

// Controller creates missing default ServiceAccounts.
type Controller struct {
	client     kubernetes.Interface
	namespaces corelisters.NamespaceLister
	accounts   corelisters.ServiceAccountLister
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]
	log        *slog.Logger
}

// New wires the controller to the factory's namespace and service account informers.
func New(client kubernetes.Interface, f informers.SharedInformerFactory, log *slog.Logger) *Controller {
	nsInf := f.Core().V1().Namespaces()
	saInf := f.Core().V1().ServiceAccounts()
	c := &Controller{
		client: client, namespaces: nsInf.Lister(), accounts: saInf.Lister(),
		synced: []cache.InformerSynced{nsInf.Informer().HasSynced, saInf.Informer().HasSynced},
		queue:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		log:    log,
	}
	_, _ = nsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.enqueue(obj) },
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
	})
	_, _ = saInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if sa, ok := obj.(*v1.ServiceAccount); ok && sa.Name == DefaultName {
				c.queue.Add(sa.Namespace)
			}
		},
	})
	return c
}

func (c *Controller) enqueue(obj interface{}) {
	if ns, ok := obj.(*v1.Namespace); ok {
		c.queue.Add(ns.Name)
	}
}

// Run processes namespaces until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	go func() {
		for c.next(ctx) {
		}
	}()
	<-ctx.Done()
}

func (c *Controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		c.log.Warn("creating default service account", "namespace", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *Controller) sync(ctx context.Context, ns string) error {
	nsObj, err := c.namespaces.Get(ns)
	if apierrors.IsNotFound(err) || (err == nil && nsObj.Status.Phase != v1.NamespaceActive) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := c.accounts.ServiceAccounts(ns).Get(DefaultName); err == nil {
		return nil
	}
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultName, Namespace: ns}}
	_, err = c.client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) || (apierrors.IsForbidden(err)) {
		return nil
	}
	return err
}
