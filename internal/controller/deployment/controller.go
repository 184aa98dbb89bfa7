// Package deployment implements the Deployment controller: it rolls a
// Deployment's pod template out through ReplicaSets (RollingUpdate within
// maxSurge/maxUnavailable, or Recreate), keeps revision history for
// `kubectl rollout history|undo`, scales proportionally mid-rollout, and
// reports the status and conditions `kubectl rollout status` waits on.
// Each sync is planDeployment (pure) followed by one apply step.
package deployment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/tranche/tranche/internal/controller/worker"
	"github.com/tranche/tranche/internal/tombstone"
)

// Config is what New needs.
type Config struct {
	// Client writes ReplicaSets and Deployment status.
	Client kubernetes.Interface
	// Informers provides Deployments, ReplicaSets and Pods; the caller
	// starts it after New.
	Informers informers.SharedInformerFactory
	// Recorder receives ScalingReplicaSet and failure events; nil drops them.
	Recorder record.EventRecorder
	// Clock is the time for conditions and progress deadlines; nil means
	// the real clock.
	Clock clock.Clock
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
}

// Controller reconciles Deployments with their ReplicaSets. Create it with
// New and start it with Run.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	clock    clock.Clock
	log      *slog.Logger

	dLister   appslisters.DeploymentLister
	rsLister  appslisters.ReplicaSetLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
}

// New builds the controller and registers its event handlers on
// cfg.Informers. It panics when Client or Informers is missing, a wiring
// mistake.
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("deployment.New: Client and Informers are required")
	}
	c := &Controller{client: cfg.Client, recorder: cfg.Recorder, clock: cfg.Clock, log: cfg.Logger}
	if c.recorder == nil {
		c.recorder = &record.FakeRecorder{}
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	// The default controller limiter backs a failing Deployment off
	// exponentially (5ms doubling up to 1000s): no hot loop.
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "deployment"})

	dInformer := cfg.Informers.Apps().V1().Deployments()
	rsInformer := cfg.Informers.Apps().V1().ReplicaSets()
	podInformer := cfg.Informers.Core().V1().Pods()
	c.dLister, c.rsLister, c.podLister = dInformer.Lister(), rsInformer.Lister(), podInformer.Lister()
	c.synced = []cache.InformerSynced{dInformer.Informer().HasSynced, rsInformer.Informer().HasSynced, podInformer.Informer().HasSynced}
	// Registration fails only on a stopped informer, which these fresh ones are not.
	_, _ = dInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, cur any) { c.enqueue(cur) },
		DeleteFunc: c.enqueue,
	})
	_, _ = rsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addRS,
		UpdateFunc: c.updateRS,
		DeleteFunc: c.deleteRS,
	})
	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.deletePod,
	})
	return c
}

// Run waits for the informer caches, runs workers sync workers and blocks
// until ctx ends. A Deployment that fails to sync is retried with the
// queue's backoff for as long as it fails.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop{Kind: "Deployment", Queue: c.queue, Synced: c.synced, Sync: c.sync, MaxRetries: math.MaxInt, Logger: c.log}.Run(ctx, workers)
}

// HasSynced reports whether the caches the controller reads are filled: the
// controller manager starts Run once they are.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.queue.Add(key)
}

// resolveRef returns the Deployment ref names, if cached with the same UID.
func (c *Controller) resolveRef(namespace string, ref *metav1.OwnerReference) *appsv1.Deployment {
	if ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return nil
	}
	d, err := c.dLister.Deployments(namespace).Get(ref.Name)
	if err != nil || d.UID != ref.UID {
		return nil
	}
	return d
}

// enqueueMatching wakes the Deployments selecting an orphan ReplicaSet.
func (c *Controller) enqueueMatching(rs *appsv1.ReplicaSet) {
	list, err := c.dLister.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, d := range list {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(rs.Labels)) {
			continue
		}
		c.enqueue(d)
	}
}

func (c *Controller) addRS(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		if d := c.resolveRef(rs.Namespace, ref); d != nil {
			c.enqueue(d)
		}
		return
	}
	c.enqueueMatching(rs)
}

func (c *Controller) updateRS(oldObj, curObj any) {
	old, ok1 := oldObj.(*appsv1.ReplicaSet)
	cur, ok2 := curObj.(*appsv1.ReplicaSet)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := (curRef == nil) != (oldRef == nil) || (curRef != nil && curRef.UID != oldRef.UID)
	if refChanged && oldRef != nil {
		if d := c.resolveRef(old.Namespace, oldRef); d != nil {
			c.enqueue(d)
		}
	}
	if curRef != nil {
		if d := c.resolveRef(cur.Namespace, curRef); d != nil {
			c.enqueue(d)
		}
		return
	}
	if refChanged || !labels.Equals(old.Labels, cur.Labels) {
		c.enqueueMatching(cur)
	}
}

func (c *Controller) deleteRS(obj any) {
	rs := tombstone.As[*appsv1.ReplicaSet](obj)
	if rs == nil {
		return
	}
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		if d := c.resolveRef(rs.Namespace, ref); d != nil {
			c.enqueue(d)
		}
	}
}

// deletePod wakes a Recreate Deployment whose old pods are going away: it
// waits for the last of them before creating new ones.
func (c *Controller) deletePod(obj any) {
	pod := tombstone.As[*v1.Pod](obj)
	if pod == nil {
		return
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs, err := c.rsLister.ReplicaSets(pod.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return
	}
	dref := metav1.GetControllerOfNoCopy(rs)
	if dref == nil {
		return
	}
	if d := c.resolveRef(rs.Namespace, dref); d != nil && d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.enqueue(d)
	}
}

// sync reconciles the Deployment key ("namespace/name") once.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	d, err := c.dLister.Deployments(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting deployment %s: %w", key, err)
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		// The API server rejects such selectors; retrying cannot help.
		c.recorder.Eventf(d, v1.EventTypeWarning, "SelectorInvalid", "invalid selector: %v", err)
		return nil
	}
	var rsList []*appsv1.ReplicaSet
	pods := map[types.UID][]*v1.Pod{}
	if selector.Empty() {
		c.recorder.Eventf(d, v1.EventTypeWarning, eventSelectingAll, "This deployment is selecting all pods. A non-empty selector is required.")
	} else {
		all, err := c.rsLister.ReplicaSets(namespace).List(labels.Everything())
		if err != nil {
			return fmt.Errorf("listing replicasets of deployment %s: %w", key, err)
		}
		rsList, err = c.claimReplicaSets(ctx, d, selector, all)
		if err != nil {
			return err
		}
		podList, err := c.podLister.Pods(namespace).List(selector)
		if err != nil {
			return fmt.Errorf("listing pods of deployment %s: %w", key, err)
		}
		pods = podsByRS(rsList, podList)
	}
	p := planDeployment(d, rsList, pods, c.clock.Now())
	if err := c.apply(ctx, d, p); err != nil {
		return err
	}
	if p.requeueAfter > 0 {
		c.queue.AddAfter(key, p.requeueAfter)
	}
	return nil
}

// podsByRS groups pods by the ReplicaSet of rsList controlling them.
func podsByRS(rsList []*appsv1.ReplicaSet, pods []*v1.Pod) map[types.UID][]*v1.Pod {
	out := make(map[types.UID][]*v1.Pod, len(rsList))
	for _, rs := range rsList {
		out[rs.UID] = nil
	}
	for _, pod := range pods {
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil {
			continue
		}
		if _, ok := out[ref.UID]; ok {
			out[ref.UID] = append(out[ref.UID], pod)
		}
	}
	return out
}

// claimReplicaSets applies the ControllerRef rules to the namespace's
// ReplicaSets (see claim) and returns those d owns afterwards.
func (c *Controller) claimReplicaSets(ctx context.Context, d *appsv1.Deployment, selector labels.Selector, all []*appsv1.ReplicaSet) ([]*appsv1.ReplicaSet, error) {
	cl := claim(d, selector, all)
	owned := cl.owned
	var errs []error
	if len(cl.adopt) > 0 {
		fresh, err := c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("rechecking deployment %s/%s before adoption: %w", d.Namespace, d.Name, err))
		case fresh.UID != d.UID:
			errs = append(errs, fmt.Errorf("original Deployment %s/%s is gone: got uid %s, wanted %s", d.Namespace, d.Name, fresh.UID, d.UID))
		case fresh.DeletionTimestamp != nil:
			errs = append(errs, fmt.Errorf("%s/%s has just been deleted at %v", d.Namespace, d.Name, fresh.DeletionTimestamp))
		default:
			for _, rs := range cl.adopt {
				patch := fmt.Appendf(nil,
					`{"metadata":{"ownerReferences":[{"apiVersion":%q,"kind":%q,"name":%q,"uid":%q,"controller":true,"blockOwnerDeletion":true}],"uid":%q}}`,
					controllerKind.GroupVersion().String(), controllerKind.Kind, d.Name, d.UID, rs.UID)
				adopted, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Patch(ctx, rs.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
				switch {
				case err == nil:
					owned = append(owned, adopted)
				case !apierrors.IsNotFound(err):
					errs = append(errs, fmt.Errorf("adopting replicaset %s/%s into deployment %s: %w", rs.Namespace, rs.Name, d.Name, err))
				}
			}
		}
	}
	for _, rs := range cl.release {
		patch := fmt.Appendf(nil, `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":%q}],"uid":%q}}`, d.UID, rs.UID)
		_, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Patch(ctx, rs.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("releasing replicaset %s/%s from deployment %s: %w", rs.Namespace, rs.Name, d.Name, err))
		}
	}
	return owned, errors.Join(errs...)
}

// claims is how the namespace's ReplicaSets split under the ControllerRef rules.
type claims struct {
	owned, adopt, release []*appsv1.ReplicaSet
}

// claim: a ReplicaSet controlled by another object is never touched; one
// d controls that stops matching is released; a matching orphan that is
// not being deleted is adopted. A Deployment being deleted does neither.
func claim(d *appsv1.Deployment, selector labels.Selector, all []*appsv1.ReplicaSet) claims {
	var cl claims
	deleting := d.DeletionTimestamp != nil
	for _, rs := range all {
		match := selector.Matches(labels.Set(rs.Labels))
		if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
			switch {
			case ref.UID != d.UID:
			case match:
				cl.owned = append(cl.owned, rs)
			case !deleting:
				cl.release = append(cl.release, rs)
			}
			continue
		}
		if deleting || !match || rs.DeletionTimestamp != nil || rs.Namespace != d.Namespace {
			continue
		}
		cl.adopt = append(cl.adopt, rs)
	}
	return cl
}

// apply carries out p for d, stopping at the first failed write: the
// rest of the plan was computed assuming it succeeded.
func (c *Controller) apply(ctx context.Context, d *appsv1.Deployment, p plan) error {
	rsClient := c.client.AppsV1().ReplicaSets(d.Namespace)
	for _, w := range p.writes {
		if w.create {
			if err := c.createRS(ctx, d, w.rs); err != nil {
				return err
			}
		} else if _, err := rsClient.Update(ctx, w.rs, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating replicaset %s/%s of deployment %s: %w", w.rs.Namespace, w.rs.Name, d.Name, err)
		}
		for _, msg := range w.events {
			c.recorder.Event(d, v1.EventTypeNormal, eventScalingReplicaSet, msg)
		}
	}
	if p.revision != "" {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{revisionAnnotation: p.revision}}})
		if err != nil {
			return fmt.Errorf("encoding revision of deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		updated, err := c.client.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("setting revision of deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		d = updated
	}
	for _, rs := range p.deletes {
		err := rsClient.Delete(ctx, rs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rs.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting old replicaset %s/%s of deployment %s: %w", rs.Namespace, rs.Name, d.Name, err)
		}
	}
	if p.status != nil {
		next := d.DeepCopy()
		next.Status = *p.status
		if _, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating status of deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
	}
	return nil
}

// createRS creates the new ReplicaSet. A name taken by a ReplicaSet of
// another template is a hash collision: status.collisionCount goes up so
// that the next sync computes another name.
func (c *Controller) createRS(ctx context.Context, d *appsv1.Deployment, rs *appsv1.ReplicaSet) error {
	_, err := c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	switch {
	case err == nil:
		return nil
	case apierrors.IsAlreadyExists(err):
		existing, gerr := c.rsLister.ReplicaSets(d.Namespace).Get(rs.Name)
		if gerr == nil {
			if ref := metav1.GetControllerOfNoCopy(existing); ref != nil && ref.UID == d.UID && equalIgnoreHash(&d.Spec.Template, &existing.Spec.Template) {
				return fmt.Errorf("replicaset %s/%s of deployment %s exists but is not cached yet: %w", rs.Namespace, rs.Name, d.Name, err)
			}
		}
		next := d.DeepCopy()
		next.Status.CollisionCount = new(int32(0))
		if d.Status.CollisionCount != nil {
			*next.Status.CollisionCount = *d.Status.CollisionCount + 1
		}
		if _, uerr := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); uerr != nil {
			return errors.Join(err, uerr)
		}
		return fmt.Errorf("hash collision creating replicaset %s/%s of deployment %s: %w", rs.Namespace, rs.Name, d.Name, err)
	case apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause):
		return fmt.Errorf("creating replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
	if hasProgressDeadline(d) {
		next := d.DeepCopy()
		setCondition(&next.Status, newCondition(appsv1.DeploymentProgressing, v1.ConditionFalse, reasonFailedRSCreate, msg, c.clock.Now()))
		// The create error is what the caller must see; a failed condition
		// write is retried with it.
		_, _ = c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	}
	c.recorder.Event(d, v1.EventTypeWarning, reasonFailedRSCreate, msg)
	return fmt.Errorf("creating replicaset %s/%s of deployment %s: %w", rs.Namespace, rs.Name, d.Name, err)
}
