// Package disruption is Kubernetes' disruption controller: it keeps every
// PodDisruptionBudget's status (expected, desired and current healthy pods,
// disruptions allowed, evictions awaiting their pod's deletion, observed generation
// and the DisruptionAllowed condition) in step with the pods its selector picks and
// the scale of their controllers, which is what pods/eviction decides on. Each sync
// is computeCounts and newStatus (pure) followed by one status write. It also turns
// False the DisruptionTarget condition of pods an eviction marked but did not delete.
package disruption

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/tranche/tranche/internal/controller/worker"
	"github.com/tranche/tranche/internal/tombstone"
)

// Config is what New needs.
type Config struct {
	// Client writes PodDisruptionBudget status.
	Client kubernetes.Interface
	// Informers provides PodDisruptionBudgets, Pods, ReplicaSets, Deployments,
	// StatefulSets and ReplicationControllers; the caller starts it after New.
	Informers informers.SharedInformerFactory
	// Scales reads the scale subresource of a pod's controller of any other kind (a
	// custom resource with a scale subresource), whose resource Mapper names; either
	// nil: pods of such controllers have no known scale.
	Scales scale.ScalesGetter
	Mapper meta.RESTMapper
	// Recorder receives the budgets' events; nil drops them.
	Recorder record.EventRecorder
	// Clock is the time of evictions' expiry; nil means the real clock.
	Clock clock.WithTicker
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
}

// Controller keeps PodDisruptionBudget status. Create it with New and start it with Run.
type Controller struct {
	client   kubernetes.Interface
	scales   scale.ScalesGetter
	mapper   meta.RESTMapper
	recorder record.EventRecorder
	clock    clock.WithTicker
	log      *slog.Logger

	pdbs   policylisters.PodDisruptionBudgetLister
	pods   corelisters.PodLister
	rcs    corelisters.ReplicationControllerLister
	rss    appslisters.ReplicaSetLister
	deps   appslisters.DeploymentLister
	sets   appslisters.StatefulSetLister
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	// staleQueue holds pods whose DisruptionTarget condition turns stale.
	staleQueue workqueue.TypedRateLimitingInterface[string]
}

// New builds the controller and registers its event handlers. It panics when Client or
// Informers is missing, a wiring mistake.
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("disruption.New: Client and Informers are required")
	}
	c := &Controller{client: cfg.Client, scales: cfg.Scales, mapper: cfg.Mapper}
	c.log, c.clock, c.recorder = worker.Defaults(cfg.Logger, cfg.Clock, cfg.Recorder)
	c.queue = worker.NewQueue("disruption", c.clock)
	c.staleQueue = worker.NewQueue("disruption_stale_pod_disruption", c.clock)
	f := cfg.Informers
	pdbs, pods := f.Policy().V1().PodDisruptionBudgets(), f.Core().V1().Pods()
	rcs, rss := f.Core().V1().ReplicationControllers(), f.Apps().V1().ReplicaSets()
	deps, sets := f.Apps().V1().Deployments(), f.Apps().V1().StatefulSets()
	c.pdbs, c.pods, c.rcs, c.rss, c.deps, c.sets = pdbs.Lister(), pods.Lister(), rcs.Lister(), rss.Lister(), deps.Lister(), sets.Lister()
	for _, inf := range []cache.SharedIndexInformer{pdbs.Informer(), pods.Informer(), rcs.Informer(), rss.Informer(), deps.Informer(), sets.Informer()} {
		c.synced = append(c.synced, inf.HasSynced)
	}
	worker.Watch(pdbs.Informer(), func(obj any) { worker.Enqueue(c.queue, obj) })
	worker.Watch(pods.Informer(), c.podChanged)
	worker.Watch(pods.Informer(), c.podForStaleCheck)
	return c
}

// podChanged queues the budgets selecting the pod.
func (c *Controller) podChanged(obj any) {
	pod := tombstone.As[*v1.Pod](obj)
	if pod == nil {
		return
	}
	pdbs, err := c.pdbs.GetPodPodDisruptionBudgets(pod)
	if err != nil {
		return // none selects it
	}
	for _, pdb := range pdbs {
		worker.Enqueue(c.queue, pdb)
	}
}

// Run syncs budgets with workers goroutines, and resets stale DisruptionTarget
// conditions with one more, until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	wg.Go(func() {
		worker.Loop{Kind: "Pod", Queue: c.staleQueue, Synced: c.synced, Sync: c.syncStale,
			MaxRetries: worker.DefaultMaxRetries, Expected: apierrors.IsConflict, Logger: c.log}.Run(ctx, 1)
	})
	worker.Loop{Kind: "PodDisruptionBudget", Queue: c.queue, Synced: c.synced, Sync: c.sync,
		MaxRetries: worker.DefaultMaxRetries, Expected: apierrors.IsConflict, Logger: c.log}.Run(ctx, workers)
	wg.Wait()
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pdb, err := c.pdbs.PodDisruptionBudgets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = c.trySync(ctx, pdb)
	if err == nil || apierrors.IsConflict(err) {
		return err
	}
	c.log.Error("syncing PodDisruptionBudget", "pdb", key, "err", err)
	if out := failedStatus(pdb, err); !equality.Semantic.DeepEqual(out.Status, pdb.Status) {
		if _, werr := c.client.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, out, metav1.UpdateOptions{}); werr != nil {
			return werr
		}
	}
	// kube-controller-manager leaves a failed budget until its next event; what failed
	// may mend without one (a controller's kind served once the RESTMapper is renewed,
	// an API call that timed out), so it is looked at again.
	c.queue.AddAfter(key, failedRecheck)
	return nil
}

// failedRecheck is how long after a failed sync a budget is synced again.
const failedRecheck = 30 * time.Second

func (c *Controller) trySync(ctx context.Context, pdb *policyv1.PodDisruptionBudget) error {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		c.recorder.Eventf(pdb, v1.EventTypeWarning, "NoPods", "Failed to get pods: %v", err)
		return err
	}
	pods, err := c.pods.Pods(pdb.Namespace).List(sel)
	if err != nil {
		return err
	}
	if len(pods) == 0 {
		c.recorder.Event(pdb, v1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	now := c.clock.Now()
	counts, err := computeCounts(pdb, pods, c.findScale, now)
	if err != nil {
		c.recorder.Eventf(pdb, v1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", err)
		return err
	}
	if len(counts.unmanaged) > 0 {
		c.recorder.Eventf(pdb, v1.EventTypeWarning, "UnmanagedPods", "Pods selected by this PodDisruptionBudget (selector: %v) were found "+
			"to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. "+
			"To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.", pdb.Spec.Selector)
	}
	if out := newStatus(pdb, counts); out != nil {
		if _, err := c.client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if counts.recheck != nil {
		key, _ := cache.MetaNamespaceKeyFunc(pdb)
		c.queue.AddAfter(key, counts.recheck.Sub(now))
	}
	return nil
}

// findScale is the scaleFinder: over the informer caches a pod's ReplicationController,
// its ReplicaSet's Deployment, its ReplicaSet when no Deployment controls that, or its
// StatefulSet, and through the scale subresource a controller of any other kind, as
// kube-controller-manager's disruption controller; matched by UID.
func (c *Controller) findScale(pod *v1.Pod, ref *metav1.OwnerReference) (types.UID, int32, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "", 0, false
	}
	apps := slices.Contains([]string{"apps", "extensions"}, gv.Group)
	ns := pod.Namespace
	switch {
	case ref.Kind == "ReplicationController" && gv.Group == "":
		rc, err := c.rcs.ReplicationControllers(ns).Get(ref.Name)
		if err != nil || rc.UID != ref.UID {
			return "", 0, false
		}
		return rc.UID, replicas(rc.Spec.Replicas), true
	case ref.Kind == "ReplicaSet" && apps:
		rs, err := c.rss.ReplicaSets(ns).Get(ref.Name)
		if err != nil || rs.UID != ref.UID {
			return "", 0, false
		}
		if dref := metav1.GetControllerOf(rs); dref != nil && dref.Kind == "Deployment" {
			return c.deploymentScale(ns, dref)
		}
		return rs.UID, replicas(rs.Spec.Replicas), true
	case ref.Kind == "StatefulSet" && gv.Group == "apps":
		ss, err := c.sets.StatefulSets(ns).Get(ref.Name)
		if err != nil || ss.UID != ref.UID {
			return "", 0, false
		}
		return ss.UID, replicas(ss.Spec.Replicas), true
	}
	return c.otherScale(ns, ref, gv)
}

// otherScaleTimeout bounds the read of another kind's scale subresource.
const otherScaleTimeout = 10 * time.Second

// otherScale reads the scale subresource of ref, a controller of a kind without an
// informer here, from the API; not found when the kind has no resource or no scale
// subresource, or the object is gone or of another UID.
func (c *Controller) otherScale(ns string, ref *metav1.OwnerReference, gv schema.GroupVersion) (types.UID, int32, bool) {
	if c.scales == nil || c.mapper == nil {
		return "", 0, false
	}
	m, err := c.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version)
	if err != nil {
		return "", 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), otherScaleTimeout)
	defer cancel()
	s, err := c.scales.Scales(ns).Get(ctx, m.Resource.GroupResource(), ref.Name, metav1.GetOptions{})
	if err != nil || s.UID != ref.UID {
		return "", 0, false
	}
	return s.UID, s.Spec.Replicas, true
}

func (c *Controller) deploymentScale(ns string, ref *metav1.OwnerReference) (types.UID, int32, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || (gv.Group != "apps" && gv.Group != "extensions") {
		return "", 0, false
	}
	d, err := c.deps.Deployments(ns).Get(ref.Name)
	if err != nil || d.UID != ref.UID {
		return "", 0, false
	}
	return d.UID, replicas(d.Spec.Replicas), true
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}
