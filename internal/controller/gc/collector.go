// Package gc implements the garbage collector: it keeps a graph of owner
// references over the metadata of every deletable resource and, as
// Kubernetes' collector does, deletes dependents whose owners are all
// gone, carries out foreground deletion (dependents first) and orphaning
// (ownerReferences removed, dependents kept).
package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/tranche/tranche/internal/controller/worker"
	"github.com/tranche/tranche/internal/tombstone"
)

// defaultResyncDiscovery is how often resources are re-discovered when
// Config.ResyncDiscovery is zero.
const defaultResyncDiscovery = 30 * time.Second

// Config carries the clients and settings of a Collector.
type Config struct {
	// Metadata watches, reads, patches and deletes objects of any resource.
	Metadata metadata.Interface
	// Discovery lists the resources to watch and maps owner kinds to them.
	Discovery discovery.DiscoveryInterface
	// Logger receives the collector's logs; nil discards them.
	Logger *slog.Logger
	// ResyncDiscovery is how often resources are re-discovered so that new
	// ones (custom resources) are covered; zero means 30s.
	ResyncDiscovery time.Duration
}

// Collector is the garbage collector. Create it with New and start it
// with Run.
type Collector struct {
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	log       *slog.Logger
	resync    time.Duration

	// mu guards graph and mapper; informer handlers and workers share them.
	mu     sync.Mutex
	graph  *graph
	mapper mapper

	// monitors is touched only by Run's goroutine.
	monitors map[schema.GroupVersionResource]*monitor

	attemptToDelete workqueue.TypedRateLimitingInterface[types.UID]
	attemptToOrphan workqueue.TypedRateLimitingInterface[types.UID]
}

// monitor is the metadata informer of one resource.
type monitor struct {
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	done     chan struct{}
}

// New returns a Collector over cfg's clients. It does no I/O until Run.
func New(cfg Config) *Collector {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	resync := cfg.ResyncDiscovery
	if resync <= 0 {
		resync = defaultResyncDiscovery
	}
	return &Collector{
		metadata:  cfg.Metadata,
		discovery: cfg.Discovery,
		log:       log,
		resync:    resync,
		graph:     newGraph(),
		monitors:  map[schema.GroupVersionResource]*monitor{},
		attemptToDelete: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "garbage_collector_attempt_to_delete"}),
		attemptToOrphan: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "garbage_collector_attempt_to_orphan"}),
	}
}

// Run discovers resources, starts their monitors, waits for them to sync,
// runs workers workers per queue and re-discovers every ResyncDiscovery.
// It blocks until ctx ends, then stops everything it started and returns
// once every worker returned. Like upstream, an object is retried for as
// long as it fails: giving up would leave garbage behind for good.
func (c *Collector) Run(ctx context.Context, workers int) {
	defer c.stopMonitors()
	defer c.attemptToDelete.ShutDown()
	defer c.attemptToOrphan.ShutDown()

	if err := c.syncResources(ctx); err != nil {
		c.log.Warn("discovery incomplete", "err", err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.monitorsSynced) {
		return
	}
	c.log.Info("started", "workers", workers, "resources", len(c.monitors))
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, l := range []worker.TypedLoop[types.UID]{
		{Kind: "object to delete", Queue: c.attemptToDelete, Sync: c.processAttemptToDelete, MaxRetries: math.MaxInt, Logger: c.log},
		{Kind: "object to orphan", Queue: c.attemptToOrphan, Sync: c.processAttemptToOrphan, MaxRetries: math.MaxInt, Logger: c.log},
	} {
		wg.Go(func() { l.Run(ctx, workers) })
	}
	ticker := time.NewTicker(c.resync)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if err := c.syncResources(ctx); err != nil {
				c.log.Warn("discovery incomplete", "err", err)
			}
		}
	}
}

// syncResources re-reads discovery, updates the mapper and starts or stops
// monitors to match. A partial discovery failure still applies what was
// found, without stopping monitors of the groups that failed.
func (c *Collector) syncResources(ctx context.Context) error {
	_, all, allErr := discovery.ServerGroupsAndResources(c.discovery)
	preferred, prefErr := discovery.ServerPreferredResources(c.discovery)
	err := errors.Join(allErr, prefErr)
	if len(all) == 0 && len(preferred) == 0 {
		return err
	}
	m := newMapper(all, preferred)
	c.mu.Lock()
	c.mapper = m
	c.mu.Unlock()
	wanted := monitorable(preferred)
	for gvr, ri := range wanted {
		if _, ok := c.monitors[gvr]; !ok {
			c.monitors[gvr] = c.startMonitor(ctx, ri)
		}
	}
	// A resource no longer served loses its monitor, except in the groups whose
	// discovery failed (an aggregated API whose server is down): their resources are
	// unknown, not gone, as kube-controller-manager's collector keeps them. Any other
	// failure keeps every monitor.
	failed, partial := failedGroups(err)
	if err != nil && !partial {
		return err
	}
	for gvr, mon := range c.monitors {
		if _, ok := wanted[gvr]; ok || failed[gvr.GroupVersion()] {
			continue
		}
		mon.stop()
		<-mon.done
		delete(c.monitors, gvr)
	}
	return err
}

// failedGroups returns the group versions whose discovery failed, when every error in err
// is such a partial failure (client-go's ErrGroupDiscoveryFailed).
func failedGroups(err error) (map[schema.GroupVersion]bool, bool) {
	failed := map[schema.GroupVersion]bool{}
	if err == nil {
		return failed, true
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var gd *discovery.ErrGroupDiscoveryFailed
		if !errors.As(e, &gd) {
			return nil, false
		}
		for gv := range gd.Groups {
			failed[gv] = true
		}
	}
	return failed, true
}

func (c *Collector) startMonitor(ctx context.Context, ri resourceInfo) *monitor {
	inf := metadatainformer.NewFilteredMetadataInformer(c.metadata, ri.gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	apiVersion := ri.gvk.GroupVersion().String()
	observe := func(obj any) {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return
		}
		id := identity{APIVersion: apiVersion, Kind: ri.gvk.Kind, Namespace: m.Namespace, Name: m.Name, UID: m.UID}
		c.mu.Lock()
		w := c.graph.observe(id, m)
		c.mu.Unlock()
		c.schedule(w)
	}
	// Registration fails only on a stopped informer, which this fresh one is not.
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			m := tombstone.As[*metav1.PartialObjectMetadata](obj)
			if m == nil {
				return
			}
			c.mu.Lock()
			w := c.graph.forget(m.UID)
			c.mu.Unlock()
			c.schedule(w)
		},
	})
	mctx, stop := context.WithCancel(ctx)
	mon := &monitor{informer: inf, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(mon.done)
		inf.Run(mctx.Done())
	}()
	return mon
}

func (c *Collector) monitorsSynced() bool {
	for _, mon := range c.monitors {
		if !mon.informer.HasSynced() {
			return false
		}
	}
	return true
}

func (c *Collector) stopMonitors() {
	for gvr, mon := range c.monitors {
		mon.stop()
		<-mon.done
		delete(c.monitors, gvr)
	}
}

// schedule queues the work an event caused.
func (c *Collector) schedule(w work) {
	for _, uid := range w.attemptToDelete {
		c.attemptToDelete.Add(uid)
	}
	for _, uid := range w.attemptToOrphan {
		c.attemptToOrphan.Add(uid)
	}
}

// snapshot is a copy of a node and its dependents, safe to use unlocked.
type snapshot struct {
	node       node
	dependents []*node
	mapper     mapper
}

func (c *Collector) snapshot(uid types.UID) (snapshot, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.graph.nodes[uid]
	if n == nil {
		return snapshot{}, false
	}
	s := snapshot{node: copyNode(n), mapper: c.mapper}
	for d := range n.dependents {
		if dn := c.graph.nodes[d]; dn != nil {
			cp := copyNode(dn)
			s.dependents = append(s.dependents, &cp)
		}
	}
	// A stable order keeps the calls of one pass reproducible.
	slices.SortFunc(s.dependents, func(a, b *node) int { return strings.Compare(string(a.id.UID), string(b.id.UID)) })
	return s, true
}

func copyNode(n *node) node {
	cp := *n
	cp.owners = append([]metav1.OwnerReference(nil), n.owners...)
	cp.dependents = make(map[types.UID]struct{}, len(n.dependents))
	for k := range n.dependents {
		cp.dependents[k] = struct{}{}
	}
	return cp
}

// processAttemptToDelete looks at one node: a virtual node sends its
// dependents to check their owners; an owner deleting in the foreground
// waits for its blocking dependents; any other object is checked against
// its live owners and planDependent's verdict is applied.
func (c *Collector) processAttemptToDelete(ctx context.Context, uid types.UID) error {
	s, ok := c.snapshot(uid)
	if !ok {
		return nil
	}
	n := s.node
	switch {
	case !n.observed:
		for _, d := range s.dependents {
			c.attemptToDelete.Add(d.id.UID)
		}
		return nil
	case n.deletingDependents:
		return c.processDeletingDependents(ctx, s)
	case n.beingDeleted:
		// Deletion is one-way: its dependents are handled once it is gone.
		return nil
	}

	ri, ok := s.mapper.lookup(n.id.APIVersion, n.id.Kind)
	if !ok {
		return fmt.Errorf("no resource serves %s %s for %s", n.id.APIVersion, n.id.Kind, describe(n.id))
	}
	latest, err := c.metadata.Resource(ri.gvr).Namespace(n.id.Namespace).Get(ctx, n.id.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || (err == nil && latest.UID != n.id.UID):
		// Its delete event is late or lost: act as if it arrived.
		c.mu.Lock()
		w := c.graph.forget(uid)
		c.mu.Unlock()
		c.schedule(w)
		return nil
	case err != nil:
		return fmt.Errorf("getting %s: %w", describe(n.id), err)
	}
	if latest.DeletionTimestamp != nil {
		// Already being deleted (our graph hears of it a moment later): deleting it
		// again would only be a second request, as upstream's collector also skips.
		return nil
	}
	if len(latest.OwnerReferences) == 0 {
		return nil
	}
	checks, err := c.checkOwners(ctx, s.mapper, latest)
	if errors.Is(err, errNamespacedOwnerOfClusterScoped) {
		c.log.Warn("ignoring object", "object", describe(n.id), "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	deletingDependents := false
	for _, d := range s.dependents {
		deletingDependents = deletingDependents || d.deletingDependents
	}
	p := planDependent(latest, checks, len(s.dependents) > 0, deletingDependents)
	return c.applyDependentPlan(ctx, ri, latest, p)
}

// checkOwners looks up every owner of latest live, by name in the
// namespace its reference can reach, and classifies the reference.
func (c *Collector) checkOwners(ctx context.Context, m mapper, latest *metav1.PartialObjectMetadata) ([]ownerCheck, error) {
	checks := make([]ownerCheck, 0, len(latest.OwnerReferences))
	for _, ref := range latest.OwnerReferences {
		ri, ok := m.lookup(ref.APIVersion, ref.Kind)
		if !ok {
			return nil, fmt.Errorf("owner %s %s/%s of %s/%s: no resource serves this kind", ref.APIVersion, ref.Kind, ref.Name, latest.Namespace, latest.Name)
		}
		ns := ""
		if ri.namespaced {
			if latest.Namespace == "" {
				return nil, fmt.Errorf("owner %s %s/%s of %s: %w", ref.APIVersion, ref.Kind, ref.Name, latest.Name, errNamespacedOwnerOfClusterScoped)
			}
			ns = latest.Namespace
		}
		owner, err := c.metadata.Resource(ri.gvr).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			owner = nil
		case err != nil:
			return nil, fmt.Errorf("getting owner %s %s/%s of %s/%s: %w", ref.APIVersion, ref.Kind, ref.Name, latest.Namespace, latest.Name, err)
		}
		checks = append(checks, ownerCheck{ref: ref, state: classifyOwner(ref, owner)})
	}
	return checks, nil
}

// applyDependentPlan performs p on obj: unblock, drop references, delete.
func (c *Collector) applyDependentPlan(ctx context.Context, ri resourceInfo, obj *metav1.PartialObjectMetadata, p dependentPlan) error {
	client := c.metadata.Resource(ri.gvr).Namespace(obj.Namespace)
	name := obj.Namespace + "/" + obj.Name
	if p.unblock {
		patch, err := unblockPatch(obj)
		if err != nil {
			return err
		}
		if patch != nil {
			if _, err := client.Patch(ctx, obj.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("unblocking owner references of %s %s: %w", ri.gvr.Resource, name, err)
			}
		}
	}
	if len(p.dropOwners) > 0 {
		patch, err := dropOwnersPatch(obj, p.dropOwners)
		if err != nil {
			return err
		}
		if patch != nil {
			if _, err := client.Patch(ctx, obj.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("removing absent owners from %s %s: %w", ri.gvr.Resource, name, err)
			}
			c.log.Info("removed owner references", "resource", ri.gvr.Resource, "object", name, "owners", p.dropOwners)
		}
	}
	if p.delete != nil {
		uid := obj.UID
		opts := metav1.DeleteOptions{PropagationPolicy: p.delete, Preconditions: &metav1.Preconditions{UID: &uid}}
		if err := client.Delete(ctx, obj.Name, opts); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting %s %s: %w", ri.gvr.Resource, name, err)
		}
		c.log.Info("deleted dependent", "resource", ri.gvr.Resource, "object", name, "propagation", *p.delete)
	}
	return nil
}

// processDeletingDependents handles an owner deleting in the foreground:
// it removes the foregroundDeletion finalizer once no blocking dependent
// remains, else sends the blocking dependents to be deleted.
func (c *Collector) processDeletingDependents(ctx context.Context, s snapshot) error {
	blocking := blockingDependents(s.node.id.UID, s.dependents)
	if len(blocking) == 0 {
		return c.removeFinalizer(ctx, s, metav1.FinalizerDeleteDependents)
	}
	for _, d := range blocking {
		if !d.deletingDependents {
			c.attemptToDelete.Add(d.id.UID)
		}
	}
	return nil
}

// processAttemptToOrphan handles an owner deleting with the orphan
// finalizer: it removes the owner's reference from every dependent, then
// removes the finalizer.
func (c *Collector) processAttemptToOrphan(ctx context.Context, uid types.UID) error {
	s, ok := c.snapshot(uid)
	if !ok || !s.node.observed || !s.node.orphaning {
		return nil
	}
	var errs []error
	for _, d := range s.dependents {
		if err := c.orphan(ctx, s.mapper, d.id, uid); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return c.removeFinalizer(ctx, s, metav1.FinalizerOrphanDependents)
}

// orphan removes the reference to owner from dependent, retrying on
// conflicts with a fresh read.
func (c *Collector) orphan(ctx context.Context, m mapper, dep identity, owner types.UID) error {
	ri, ok := m.lookup(dep.APIVersion, dep.Kind)
	if !ok {
		return fmt.Errorf("no resource serves %s %s for %s", dep.APIVersion, dep.Kind, describe(dep))
	}
	client := c.metadata.Resource(ri.gvr).Namespace(dep.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest, err := client.Get(ctx, dep.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if latest.UID != dep.UID {
			return nil
		}
		patch, err := dropOwnersPatch(latest, []types.UID{owner})
		if err != nil || patch == nil {
			return err
		}
		_, err = client.Patch(ctx, dep.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("orphaning %s: %w", describe(dep), err)
	}
	return nil
}

// removeFinalizer removes finalizer from the object of s, retrying on
// conflicts with a fresh read.
func (c *Collector) removeFinalizer(ctx context.Context, s snapshot, finalizer string) error {
	id := s.node.id
	ri, ok := s.mapper.lookup(id.APIVersion, id.Kind)
	if !ok {
		return fmt.Errorf("no resource serves %s %s for %s", id.APIVersion, id.Kind, describe(id))
	}
	client := c.metadata.Resource(ri.gvr).Namespace(id.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest, err := client.Get(ctx, id.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if latest.UID != id.UID {
			return nil
		}
		patch, err := removeFinalizerPatch(latest, finalizer)
		if err != nil || patch == nil {
			return err
		}
		_, err = client.Patch(ctx, id.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer %s from %s: %w", finalizer, describe(id), err)
	}
	if err == nil {
		c.log.Info("removed finalizer", "object", describe(id), "finalizer", finalizer)
	}
	return nil
}

// describe names an object for errors and logs: "Kind ns/name (uid)".
func describe(id identity) string {
	name := id.Name
	if id.Namespace != "" {
		name = id.Namespace + "/" + id.Name
	}
	return fmt.Sprintf("%s %s (%s)", id.Kind, name, id.UID)
}
