// Package namespace implements the namespace controller: it empties every
// terminating namespace of its content, keeps the namespace's deletion
// conditions the way Kubernetes does, and then removes the "kubernetes"
// spec finalizer so that the API server can delete the namespace itself.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/tranche/tranche/internal/controller/worker"
)

// finalizerEstimateSeconds is how long Kubernetes assumes the finalizers on
// remaining content need before looking again.
const finalizerEstimateSeconds int64 = 15

// Backoff bounds for requeueing a namespace whose content is still going
// away or whose sync failed: quick at first (pods often stop in well under
// a second here), then no more often than every maxBackoff.
const (
	baseBackoff = 100 * time.Millisecond
	maxBackoff  = 10 * time.Second
)

// Config carries the clients and settings of a Controller.
type Config struct {
	// Client reads and finalizes namespaces and lists pods for the
	// graceful-termination estimate.
	Client kubernetes.Interface
	// Metadata lists and deletes the content of namespaces, whatever its type.
	Metadata metadata.Interface
	// Discovery finds the namespaced resources to empty.
	Discovery discovery.DiscoveryInterface
	// Logger receives the controller's logs; nil discards them.
	Logger *slog.Logger
	// Resync is the namespace informer's resync period; zero disables it.
	Resync time.Duration
}

// Controller empties and finalizes terminating namespaces. Create it with
// New and start it with Run.
type Controller struct {
	client    kubernetes.Interface
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	log       *slog.Logger

	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	queue    workqueue.TypedRateLimitingInterface[string]
	now      func() time.Time
}

// New returns a Controller watching namespaces through cfg.Client. It does
// no I/O until Run.
func New(cfg Config) *Controller {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	factory := informers.NewSharedInformerFactory(cfg.Client, cfg.Resync)
	c := &Controller{
		client:    cfg.Client,
		metadata:  cfg.Metadata,
		discovery: cfg.Discovery,
		log:       log,
		factory:   factory,
		informer:  factory.Core().V1().Namespaces().Informer(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](baseBackoff, maxBackoff),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "namespace"}),
		now: time.Now,
	}
	// Registration fails only on a stopped informer, which this fresh one is not.
	_, _ = c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	})
	return c
}

// enqueue records a namespace that is being deleted; others need nothing.
func (c *Controller) enqueue(obj any) {
	ns, ok := obj.(*v1.Namespace)
	if !ok || ns.DeletionTimestamp == nil {
		return
	}
	c.queue.Add(ns.Name)
}

// Run starts the informer and workers sync workers, and blocks until ctx
// ends; it then stops them and returns once they all returned. A namespace is
// retried for as long as it exists: its content may take any time to go.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	worker.Loop{Kind: "namespace", Queue: c.queue, Synced: []cache.InformerSynced{c.informer.HasSynced}, Sync: c.syncKey,
		MaxRetries: math.MaxInt, Expected: func(err error) bool { return errors.Is(err, errContentRemains) }, Logger: c.log}.Run(ctx, workers)
}

// errContentRemains requeues a namespace whose content is still going away.
var errContentRemains = errors.New("content remains")

// syncKey is sync for the loop: content still going away is an expected
// error, retried with backoff.
func (c *Controller) syncKey(ctx context.Context, name string) error {
	wait, err := c.sync(ctx, name)
	if err == nil && wait {
		return errContentRemains
	}
	return err
}

// sync makes one pass over namespace name: it marks it Terminating,
// deletes its content, writes the conditions plan asks for and finalizes
// it when empty. wait reports content still going away.
func (c *Controller) sync(ctx context.Context, name string) (wait bool, err error) {
	ns, err := c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("getting namespace %s: %w", name, err)
	}
	if ns.DeletionTimestamp == nil {
		return false, nil
	}
	if ns.Status.Phase != v1.NamespaceTerminating {
		terminating := ns.DeepCopy()
		terminating.Status.Phase = v1.NamespaceTerminating
		ns, err = c.client.CoreV1().Namespaces().UpdateStatus(ctx, terminating, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("marking namespace %s terminating: %w", name, err)
		}
	}

	remaining, d := c.deleteContent(ctx, ns)
	act := plan(ns, remaining, d, metav1.NewTime(c.now()))
	if act.status != nil {
		// Like Kubernetes, a failed condition write does not stop the
		// deletion: the next pass computes the same conditions again.
		updated, err := c.client.CoreV1().Namespaces().UpdateStatus(ctx, act.status, metav1.UpdateOptions{})
		if err != nil {
			c.log.Warn("updating conditions", "namespace", name, "err", err)
		} else {
			ns = updated
		}
	}
	if act.err != nil {
		return false, fmt.Errorf("deleting content of namespace %s: %w", name, act.err)
	}
	if act.wait {
		return true, nil
	}
	if act.finalize {
		if err := c.finalize(ctx, ns); err != nil {
			return false, err
		}
		c.log.Info("finalized", "namespace", name)
	}
	return false, nil
}

// finalize removes our token from spec.finalizers, re-reading the
// namespace on conflicts as long as it is the same namespace.
func (c *Controller) finalize(ctx context.Context, ns *v1.Namespace) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := c.client.CoreV1().Namespaces().Finalize(ctx, withoutFinalizer(ns, finalizerToken), metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
		latest, gerr := c.client.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		if latest.UID != ns.UID {
			return fmt.Errorf("namespace uid changed from %s to %s", ns.UID, latest.UID)
		}
		ns = latest
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finalizing namespace %s: %w", ns.Name, err)
	}
	return nil
}

// deleteContent deletes every deletable namespaced resource in ns and
// reports what is left. Discovery failures are not fatal: whatever was
// discovered is still deleted.
func (c *Controller) deleteContent(ctx context.Context, ns *v1.Namespace) (map[schema.GroupVersionResource]int, deletion) {
	d := deletion{finalizers: map[string]int{}}
	remaining := map[schema.GroupVersionResource]int{}
	lists, err := discovery.ServerPreferredNamespacedResources(c.discovery)
	if err != nil {
		d.discoveryErr = err
	}
	deletable := discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"delete"}}, lists)
	gvrs, err := discovery.GroupVersionResources(deletable)
	if err != nil {
		d.groupVersionErr = err
	}
	verbs := resourceVerbs(deletable)
	deleteOne := func(gvr schema.GroupVersionResource) {
		r, err := c.deleteResource(ctx, gvr, verbs[gvr], ns)
		if err != nil {
			d.contentErrs = append(d.contentErrs, err)
		}
		d.estimate = max(d.estimate, r.estimate)
		if r.remaining > 0 {
			remaining[gvr] = r.remaining
			for f, n := range r.finalizers {
				d.finalizers[f] += n
			}
		}
	}
	// Ordered namespace deletion (KEP-5080, GA in v1.34): pods go first, and nothing
	// else is deleted while one remains, so that no pod runs on without the
	// ConfigMaps, Secrets, ServiceAccounts or policies it relies on.
	if _, ok := gvrs[podsGVR]; ok {
		deleteOne(podsGVR)
		if remaining[podsGVR] > 0 {
			d.podsRemain = true
			return remaining, d
		}
	}
	ordered := make([]schema.GroupVersionResource, 0, len(gvrs))
	for gvr := range gvrs {
		if gvr != podsGVR {
			ordered = append(ordered, gvr)
		}
	}
	slices.SortFunc(ordered, func(a, b schema.GroupVersionResource) int {
		return strings.Compare(a.String(), b.String())
	})
	for _, gvr := range ordered {
		deleteOne(gvr)
	}
	return remaining, d
}

// podsGVR is core/v1 pods, deleted before every other resource of a namespace.
var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// resourceVerbs indexes the verbs discovery reported per resource.
func resourceVerbs(lists []*metav1.APIResourceList) map[schema.GroupVersionResource]sets.Set[string] {
	out := map[schema.GroupVersionResource]sets.Set[string]{}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			out[gv.WithResource(r.Name)] = sets.New(r.Verbs...)
		}
	}
	return out
}

// resourceResult is what deleting one resource in a namespace left behind.
type resourceResult struct {
	remaining  int
	finalizers map[string]int
	estimate   int64
}

// deleteResource deletes all objects of gvr in ns (one deletecollection
// when the resource supports it, else list and delete each) and lists
// again to see what remains. Its errors read as Kubernetes' do, since they
// end up in the namespace's NamespaceDeletionContentFailure condition.
func (c *Controller) deleteResource(ctx context.Context, gvr schema.GroupVersionResource, verbs sets.Set[string], ns *v1.Namespace) (resourceResult, error) {
	var res resourceResult
	if gvr == podsGVR {
		estimate, err := c.estimatePods(ctx, ns)
		if err != nil {
			return res, err
		}
		res.estimate = estimate
	}
	client := c.metadata.Resource(gvr).Namespace(ns.Name)
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	eachItem := !verbs.Has("deletecollection")
	if !eachItem {
		err := client.DeleteCollection(ctx, opts, metav1.ListOptions{})
		switch {
		case apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err):
			eachItem = true
		case err != nil:
			return res, err
		}
	}
	canList := verbs.Has("list")
	if eachItem && canList {
		list, err := client.List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err):
			canList = false
		case err != nil:
			return res, err
		default:
			for _, item := range list.Items {
				err := client.Delete(ctx, item.Name, opts)
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
					return res, err
				}
			}
		}
	}
	if !canList {
		return res, nil
	}
	list, err := client.List(ctx, metav1.ListOptions{})
	if apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err) {
		return res, nil
	}
	if err != nil {
		return res, err
	}
	if len(list.Items) == 0 {
		return resourceResult{}, nil
	}
	res.remaining = len(list.Items)
	res.finalizers = map[string]int{}
	for _, item := range list.Items {
		for _, f := range item.Finalizers {
			res.finalizers[f]++
		}
	}
	switch {
	case res.estimate > 0:
		return res, nil
	case len(res.finalizers) > 0:
		res.estimate = finalizerEstimateSeconds
		return res, nil
	}
	return res, fmt.Errorf("unexpected items still remain in namespace: %s for gvr: %v", ns.Name, gvr)
}

// estimatePods returns how many seconds the pods of ns may still take to
// terminate gracefully, counted from the namespace's deletion; zero once
// that time has passed.
func (c *Controller) estimatePods(ctx context.Context, ns *v1.Namespace) (int64, error) {
	pods, err := c.client.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	var estimate int64
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g > estimate {
			estimate = *g
		}
	}
	if ns.DeletionTimestamp != nil && c.now().Sub(ns.DeletionTimestamp.Time) >= time.Duration(estimate)*time.Second {
		return 0, nil
	}
	return estimate, nil
}
