// Package statefulset runs StatefulSets: pods with stable names
// <set>-<ordinal>, hostnames and claims <template>-<set>-<ordinal> that
// outlive their pods, created in order (OrderedReady) or all at once
// (Parallel), updated through ControllerRevisions from the highest ordinal
// down to the partition, with claim retention by ownerReferences as
// upstream's StatefulSet controller does.
//
// Pod and claim names are fixed, so informer lag cannot duplicate a create
// (the second one fails with AlreadyExists) or a delete (NotFound): unlike
// the controllers that generate names, no expectations are needed.
package statefulset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/tranche/tranche/internal/controller/controllerref"
	"github.com/tranche/tranche/internal/controller/worker"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// maxRetries bounds the retries of a failing StatefulSet before it waits
// for its next event.
const maxRetries = 15

// Config is what New needs.
type Config struct {
	// Client writes pods, claims, ControllerRevisions, StatefulSet status
	// and events.
	Client kubernetes.Interface
	// Informers provides StatefulSets, Pods, PersistentVolumeClaims and
	// ControllerRevisions; the caller starts it after New.
	Informers informers.SharedInformerFactory
	// Recorder receives the controller's events; nil drops them.
	Recorder record.EventRecorder
	// Clock is used for minReadySeconds and requeues; nil means the real
	// clock.
	Clock clock.WithTicker
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
}

// Controller reconciles StatefulSets.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	clock    clock.WithTicker
	logger   *slog.Logger

	sets      appslisters.StatefulSetLister
	pods      corelisters.PodLister
	claims    corelisters.PersistentVolumeClaimLister
	revisions appslisters.ControllerRevisionLister
	synced    []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
}

// New builds the controller and registers its event handlers. It panics
// when Client or Informers is missing (a wiring mistake).
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("statefulset.New: Client and Informers are required")
	}
	cfg.Logger, cfg.Clock, cfg.Recorder = worker.Defaults(cfg.Logger, cfg.Clock, cfg.Recorder)
	setInf := cfg.Informers.Apps().V1().StatefulSets()
	podInf := cfg.Informers.Core().V1().Pods()
	pvcInf := cfg.Informers.Core().V1().PersistentVolumeClaims()
	revInf := cfg.Informers.Apps().V1().ControllerRevisions()
	c := &Controller{
		client:    cfg.Client,
		recorder:  cfg.Recorder,
		clock:     cfg.Clock,
		logger:    cfg.Logger,
		sets:      setInf.Lister(),
		pods:      podInf.Lister(),
		claims:    pvcInf.Lister(),
		revisions: revInf.Lister(),
		synced: []cache.InformerSynced{setInf.Informer().HasSynced, podInf.Informer().HasSynced,
			pvcInf.Informer().HasSynced, revInf.Informer().HasSynced},
		queue: worker.NewQueue("statefulset", cfg.Clock),
	}
	worker.Watch(setInf.Informer(), c.enqueue)
	worker.Watch(podInf.Informer(), c.onPod)
	return c
}

// Run waits for the caches and syncs with the given number of workers until
// ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop{Kind: "StatefulSet", Queue: c.queue, Synced: c.synced, Sync: c.sync, MaxRetries: maxRetries, Logger: c.logger}.Run(ctx, workers)
}

// HasSynced reports whether the caches the controller reads are filled: the
// controller manager starts Run once they are.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

func (c *Controller) enqueue(obj any) { worker.Enqueue(c.queue, obj) }

// onPod wakes the owning set, or every matching one for an orphan.
func (c *Controller) onPod(obj any) {
	_, _, pod := worker.Pods(obj, nil)
	if pod == nil {
		return
	}
	if key, hasController := worker.OwnerKey(pod, controllerKind); hasController {
		if key != "" {
			c.queue.Add(key)
		}
		return
	}
	sets, err := c.sets.StatefulSets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, set := range sets {
		if worker.Selects(set.Spec.Selector, pod.Labels) {
			c.enqueue(set)
		}
	}
}

// sync reconciles one StatefulSet (namespace/name).
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("StatefulSet key %q: %w", key, err)
	}
	cached, err := c.sets.StatefulSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting StatefulSet %s: %w", key, err)
	}
	set := cached.DeepCopy()
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil || sel.Empty() {
		return nil
	}
	pods, err := c.claimPods(ctx, set, sel)
	if err != nil {
		return err
	}
	h, err := c.syncHistory(ctx, set, pods)
	if err != nil {
		return err
	}
	s := snapshot{set: set, pods: pods, claims: map[string]*v1.PersistentVolumeClaim{}, current: h.current, update: h.update,
		updateTmpl: &set.Spec.Template, currentTmpl: &set.Spec.Template, now: c.clock.Now()}
	if h.current.Name != h.update.Name {
		if s.currentTmpl, err = templateOf(h.current); err != nil {
			return err
		}
	}
	claims, err := c.claims.PersistentVolumeClaims(ns).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing claims of StatefulSet %s: %w", key, err)
	}
	for _, cl := range claims {
		s.claims[cl.Name] = cl
	}
	p := compute(s)
	applyErr := c.apply(ctx, set, p)
	if err := c.updateStatus(ctx, set, p.status); err != nil {
		return errors.Join(applyErr, err)
	}
	api := c.client.AppsV1().ControllerRevisions(ns)
	for _, rev := range h.deletes {
		if err := api.Delete(ctx, rev, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			applyErr = errors.Join(applyErr, fmt.Errorf("deleting ControllerRevision %s/%s: %w", ns, rev, err))
		}
	}
	if p.requeue > 0 {
		c.queue.AddAfter(key, p.requeue)
	}
	return applyErr
}

// syncHistory resolves the current and update revisions, creating or
// bumping the update one.
func (c *Controller) syncHistory(ctx context.Context, set *appsv1.StatefulSet, pods []*v1.Pod) (history, error) {
	all, err := c.revisions.ControllerRevisions(set.Namespace).List(labels.Everything())
	if err != nil {
		return history{}, fmt.Errorf("listing revisions of StatefulSet %s/%s: %w", set.Namespace, set.Name, err)
	}
	var owned []*appsv1.ControllerRevision
	for _, r := range all {
		if ref := metav1.GetControllerOf(r); ref != nil && ref.UID == set.UID {
			owned = append(owned, r)
		}
	}
	live := map[string]bool{}
	for _, pod := range pods {
		live[pod.Labels[appsv1.ControllerRevisionHashLabelKey]] = true
	}
	h, err := planHistory(set, owned, live)
	if err != nil {
		return h, err
	}
	api := c.client.AppsV1().ControllerRevisions(set.Namespace)
	if h.create != nil {
		if _, err := api.Create(ctx, h.create, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return h, fmt.Errorf("creating ControllerRevision %s/%s: %w", set.Namespace, h.create.Name, err)
		}
	}
	if h.bump != nil {
		if _, err := api.Update(ctx, h.bump, metav1.UpdateOptions{}); err != nil {
			return h, fmt.Errorf("updating ControllerRevision %s/%s: %w", set.Namespace, h.bump.Name, err)
		}
	}
	return h, nil
}

// claimPods lists the set's pods, adopting matching orphans and releasing
// owned pods that no longer match, by ControllerRef rules. Only pods named
// like the set's own belong to it.
func (c *Controller) claimPods(ctx context.Context, set *appsv1.StatefulSet, sel labels.Selector) ([]*v1.Pod, error) {
	all, err := c.pods.Pods(set.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing pods of StatefulSet %s/%s: %w", set.Namespace, set.Name, err)
	}
	recheck := controllerref.Recheck(set, controllerKind.Kind, func(ctx context.Context) (metav1.Object, error) {
		return c.client.AppsV1().StatefulSets(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
	})
	member := func(pod *v1.Pod) bool {
		_, ok := ordinalOf(set, pod)
		return ok
	}
	return controllerref.NewPodManager(c.client.CoreV1(), set, controllerKind, sel, recheck).ClaimPods(ctx, all, member)
}

// apply performs the plan: claim owners, claims, then the pods of ordinals
// whose claims all exist, then deletes. Events use upstream's wording.
func (c *Controller) apply(ctx context.Context, set *appsv1.StatefulSet, p plan) error {
	var errs []error
	claimsAPI := c.client.CoreV1().PersistentVolumeClaims(set.Namespace)
	for _, u := range p.updateClaims {
		claim := u.claim.DeepCopy()
		claim.OwnerReferences = u.owners
		if _, err := claimsAPI.Update(ctx, claim, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("updating ownerReferences of claim %s/%s: %w", claim.Namespace, claim.Name, err))
		}
	}
	failedClaimPods := map[string]bool{}
	for _, claim := range p.createClaims {
		pod := p.claimPod[claim.Name]
		_, err := claimsAPI.Create(ctx, claim, metav1.CreateOptions{})
		switch {
		case err == nil:
			c.recorder.Eventf(set, v1.EventTypeNormal, "SuccessfulCreate", "create Claim %s Pod %s in StatefulSet %s success", claim.Name, pod, set.Name)
		case apierrors.IsAlreadyExists(err):
		default:
			failedClaimPods[pod] = true
			c.recorder.Eventf(set, v1.EventTypeWarning, "FailedCreate", "create Claim %s for Pod %s in StatefulSet %s failed error: %s", claim.Name, pod, set.Name, err)
			errs = append(errs, fmt.Errorf("creating claim %s/%s: %w", claim.Namespace, claim.Name, err))
		}
	}
	for _, pod := range p.createPods {
		if failedClaimPods[pod.Name] {
			continue
		}
		_, err := c.client.CoreV1().Pods(set.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		switch {
		case err == nil:
			c.recorder.Eventf(set, v1.EventTypeNormal, "SuccessfulCreate", "create Pod %s in StatefulSet %s successful", pod.Name, set.Name)
		case apierrors.IsAlreadyExists(err), apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause):
		default:
			c.recorder.Eventf(set, v1.EventTypeWarning, "FailedCreate", "create Pod %s in StatefulSet %s failed error: %s", pod.Name, set.Name, err)
			errs = append(errs, fmt.Errorf("creating pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
	}
	for _, pod := range p.deletePods {
		err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		switch {
		case err == nil:
			c.recorder.Eventf(set, v1.EventTypeNormal, "SuccessfulDelete", "delete Pod %s in StatefulSet %s successful", pod.Name, set.Name)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		default:
			c.recorder.Eventf(set, v1.EventTypeWarning, "FailedDelete", "delete Pod %s in StatefulSet %s failed error: %s", pod.Name, set.Name, err)
			errs = append(errs, fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
	}
	return errors.Join(errs...)
}

// updateStatus writes the status when it changed.
func (c *Controller) updateStatus(ctx context.Context, set *appsv1.StatefulSet, st appsv1.StatefulSetStatus) error {
	if reflect.DeepEqual(set.Status, st) {
		return nil
	}
	set.Status = st
	_, err := c.client.AppsV1().StatefulSets(set.Namespace).UpdateStatus(ctx, set, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating status of StatefulSet %s/%s: %w", set.Namespace, set.Name, err)
	}
	return nil
}
