package worker

import (
	"fmt"
	"log/slog"

	"github.com/tranche/tranche/internal/tombstone"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Defaults replaces what a controller's Config leaves nil: slog.Default(), the real
// clock, and a recorder that drops events. Controllers call it first in New so that
// they all mean the same by "nil".
func Defaults(logger *slog.Logger, clk clock.WithTicker, rec record.EventRecorder) (*slog.Logger, clock.WithTicker, record.EventRecorder) {
	if logger == nil {
		logger = slog.Default()
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if rec == nil {
		rec = &record.FakeRecorder{}
	}
	return logger, clk, rec
}

// NewQueue returns the key queue a controller syncs from: client-go's default controller
// rate limiter (per-key exponential backoff and an overall bucket), named for its metrics,
// timed by clk so that tests with a fake clock control its delays.
func NewQueue(name string, clk clock.WithTicker) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name, Clock: clk})
}

// AllSynced reports whether every cache in synced is filled: a controller's HasSynced.
func AllSynced(synced []cache.InformerSynced) bool {
	for _, f := range synced {
		if !f() {
			return false
		}
	}
	return true
}

// Watch makes handle see every object inf adds, updates (the new version) or deletes
// (possibly a cache.DeletedFinalStateUnknown). It panics when the informer refuses the
// handler, which only happens once it has been stopped: a wiring mistake at start-up.
func Watch(inf cache.SharedIndexInformer, handle func(obj any)) {
	must(inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, cur any) { handle(cur) },
		DeleteFunc: handle,
	}))
}

// WatchChanges is Watch for handlers that need both versions: handle(nil, obj) on an add,
// handle(old, cur) on an update and handle(obj, nil) on a delete.
func WatchChanges(inf cache.SharedIndexInformer, handle func(old, cur any)) {
	must(inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { handle(nil, obj) },
		UpdateFunc: handle,
		DeleteFunc: func(obj any) { handle(obj, nil) },
	}))
}

func must(_ cache.ResourceEventHandlerRegistration, err error) {
	if err != nil {
		panic(fmt.Sprintf("adding an informer event handler: %v", err))
	}
}

// Enqueue adds obj's namespace/name key to q; obj may be a deletion tombstone. Objects
// without metadata are ignored.
func Enqueue(q workqueue.TypedInterface[string], obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		q.Add(key)
	}
}

// Pods unpacks the two sides of a WatchChanges pod event, opening a tombstone: old and
// cur are nil for an add and a delete respectively, and pod is whichever is known (cur
// first). pod is nil when neither side is a pod.
func Pods(old, cur any) (oldPod, curPod, pod *v1.Pod) {
	oldPod, curPod = tombstone.As[*v1.Pod](old), tombstone.As[*v1.Pod](cur)
	pod = curPod
	if pod == nil {
		pod = oldPod
	}
	return oldPod, curPod, pod
}

// OwnerKey says who controls obj (a pod, a Job, ...): hasController is false for an
// orphan; otherwise key is "namespace/name" of its controller when that controller is
// of kind gvk, and "" when it belongs to another kind (which a controller of gvk must
// leave alone).
func OwnerKey(obj metav1.Object, gvk schema.GroupVersionKind) (key string, hasController bool) {
	ref := metav1.GetControllerOf(obj)
	if ref == nil {
		return "", false
	}
	if ref.Kind != gvk.Kind || ref.APIVersion != gvk.GroupVersion().String() {
		return "", true
	}
	return obj.GetNamespace() + "/" + ref.Name, true
}

// Selects reports whether a workload's selector picks a pod with these labels. A
// selector that is invalid or empty selects nothing, as upstream: adopting every pod
// of a namespace is never what an empty selector means.
func Selects(sel *metav1.LabelSelector, podLabels map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(podLabels))
}

// PodObservation is what one pod event counts for Expectations. A deletion is observed
// once, when the pod first shows a deletionTimestamp (or, for a pod deleted at once,
// when it goes), as upstream: a pod whose node is gone may stay terminating for good and
// must not freeze its owner until the expectations expire. A pod first seen already
// terminating counts as deleted, not created.
func PodObservation(old, cur *v1.Pod) (adds, dels int) {
	switch {
	case old == nil && cur != nil:
		if cur.DeletionTimestamp != nil {
			return 0, 1
		}
		return 1, 0
	case cur == nil:
		if old.DeletionTimestamp == nil {
			return 0, 1
		}
	case old.DeletionTimestamp == nil && cur.DeletionTimestamp != nil:
		return 0, 1
	}
	return 0, 0
}
