// Package perns keeps one object in every active namespace, as Kubernetes' service
// account controller (the "default" ServiceAccount) and root CA publisher (the
// kube-root-ca.crt ConfigMap) do: created when a namespace appears, recreated when
// deleted, corrected when changed.
package perns

import (
	"context"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/tranche/tranche/internal/controller/worker"
	"github.com/tranche/tranche/internal/tombstone"
)

// Kind says which object a Controller keeps and how.
type Kind struct {
	// Name is the object's name in every namespace.
	Name string
	// QueueName names the controller's queue in the workqueue metrics.
	QueueName string
	// Informer watches the objects; its events on Name requeue the namespace.
	Informer cache.SharedIndexInformer
	// Ensure creates or corrects the object in namespace ns; it is called for every
	// active namespace on each change and must be idempotent (AlreadyExists is fine).
	Ensure func(ctx context.Context, ns string) error
}

// Controller keeps one Kind in every active namespace.
type Controller struct {
	kind       Kind
	namespaces corelisters.NamespaceLister
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]
	log        *slog.Logger
}

// New wires the controller to the factory's namespace informer and kind's informer.
func New(f informers.SharedInformerFactory, kind Kind, log *slog.Logger) *Controller {
	nsInf := f.Core().V1().Namespaces()
	c := &Controller{
		kind: kind, namespaces: nsInf.Lister(),
		synced: []cache.InformerSynced{nsInf.Informer().HasSynced, kind.Informer.HasSynced},
		queue:  worker.NewQueue(kind.QueueName, nil),
		log:    log,
	}
	_, _ = nsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.enqueueNamespace(obj) },
		UpdateFunc: func(_, obj interface{}) { c.enqueueNamespace(obj) },
	})
	onObject := func(obj interface{}) {
		if m := tombstone.As[metav1.Object](obj); m != nil && m.GetName() == kind.Name {
			c.queue.Add(m.GetNamespace())
		}
	}
	_, _ = kind.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) { onObject(obj) },
		DeleteFunc: onObject,
	})
	return c
}

func (c *Controller) enqueueNamespace(obj interface{}) {
	if ns, ok := obj.(*v1.Namespace); ok {
		c.queue.Add(ns.Name)
	}
}

// Run processes namespaces until ctx ends; it returns once the sync under
// way returned.
func (c *Controller) Run(ctx context.Context) {
	worker.Loop{Kind: "namespace's " + c.kind.Name, Queue: c.queue, Synced: c.synced, Sync: c.sync,
		MaxRetries: worker.DefaultMaxRetries, Logger: c.log}.Run(ctx, 1)
}

// HasSynced reports whether the caches the controller reads are filled.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

func (c *Controller) sync(ctx context.Context, ns string) error {
	nsObj, err := c.namespaces.Get(ns)
	if apierrors.IsNotFound(err) || (err == nil && nsObj.Status.Phase != v1.NamespaceActive) {
		return nil
	}
	if err != nil {
		return err
	}
	err = c.kind.Ensure(ctx, ns)
	if apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err) {
		// Forbidden: the namespace started terminating meanwhile.
		return nil
	}
	return err
}
