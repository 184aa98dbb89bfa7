package allocator

import (
	"context"
	"log/slog"
	"math"
	"net/netip"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/tranche/tranche/internal/controller/worker"
)

// DefaultRepairInterval is how often RepairLoop runs Repair when nothing asks it
// sooner: kube-apiserver's interval for its ClusterIP and NodePort repair loops.
const DefaultRepairInterval = 3 * time.Minute

// Pauses of RepairLoop: after an IPAddress event, so that a burst of them makes one
// run; after a run that failed, before the next attempt, doubling while runs fail (a
// store without quorum) up to the interval.
const (
	repairDelay = time.Second
	repairRetry = time.Second
)

// repairKey is RepairLoop's only queue key: a run repairs everything.
const repairKey = "repair"

// RepairLoop keeps the allocations and the IPAddress objects agreeing with the Services
// while the controller manager runs (on the elected server only), as kube-apiserver's
// repair controllers do: Repair at once, then every Interval, and a second after an
// IPAddress object the allocator made is deleted while its Service still holds the
// address, or is changed to name something else, so that it comes back within
// seconds. A Service whose ClusterIP had lost its IPAddress gets kube-apiserver's
// warning event (ClusterIPNotAllocated, "Cluster IP [IPv4]: 10.96.0.20 is not
// allocated; repairing").
type RepairLoop struct {
	alloc    *Services
	interval time.Duration
	recorder record.EventRecorder
	log      *slog.Logger
	services corelisters.ServiceLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
}

// RepairLoopConfig is what NewRepairLoop needs.
type RepairLoopConfig struct {
	// Alloc is the allocator whose Repair the loop runs.
	Alloc *Services
	// Services and IPAddresses are the informers whose events start a run early.
	Services    coreinformers.ServiceInformer
	IPAddresses networkinginformers.IPAddressInformer
	// Interval between runs when nothing asks sooner (0: DefaultRepairInterval).
	Interval time.Duration
	// Recorder receives the events on repaired Services; nil drops them.
	Recorder record.EventRecorder
	// Logger receives the repair's logs; nil means slog.Default().
	Logger *slog.Logger
}

// NewRepairLoop registers the loop's event handlers on cfg's informers.
func NewRepairLoop(cfg RepairLoopConfig) (*RepairLoop, error) {
	r := &RepairLoop{alloc: cfg.Alloc, interval: cfg.Interval, services: cfg.Services.Lister()}
	r.log, _, r.recorder = worker.Defaults(cfg.Logger, nil, cfg.Recorder)
	if r.interval <= 0 {
		r.interval = DefaultRepairInterval
	}
	r.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[string](repairRetry, r.interval),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "service-allocator-repair"})
	if _, err := cfg.IPAddresses.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			o, okOld := old.(*networkingv1.IPAddress)
			c, okCur := cur.(*networkingv1.IPAddress)
			if okOld && okCur && o.Labels[networkingv1.LabelManagedBy] == ManagedBy &&
				(c.Labels[networkingv1.LabelManagedBy] != ManagedBy || !equality.Semantic.DeepEqual(o.Spec.ParentRef, c.Spec.ParentRef)) {
				r.queue.AddAfter(repairKey, repairDelay)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if ip, ok := obj.(*networkingv1.IPAddress); ok && r.stillHeld(ip) {
				r.queue.AddAfter(repairKey, repairDelay)
			}
		},
	}); err != nil {
		return nil, err
	}
	r.synced = []cache.InformerSynced{cfg.Services.Informer().HasSynced, cfg.IPAddresses.Informer().HasSynced}
	return r, nil
}

// stillHeld says whether the Service a deleted IPAddress of the allocator named still
// holds its address: then the deletion was not the allocator's (it deletes an object
// in the transaction that frees its address), and the object must come back.
func (r *RepairLoop) stillHeld(ip *networkingv1.IPAddress) bool {
	ref := ip.Spec.ParentRef
	if ip.Labels[networkingv1.LabelManagedBy] != ManagedBy || ref == nil || ref.Group != "" || ref.Resource != "services" {
		return false
	}
	svc, err := r.services.Services(ref.Namespace).Get(ref.Name)
	return err == nil && slices.Contains(svc.Spec.ClusterIPs, ip.Name)
}

// HasSynced reports whether the informers the loop listens to have synced.
func (r *RepairLoop) HasSynced() bool {
	for _, s := range r.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Run repairs at once, then as described on RepairLoop, until ctx ends; it returns
// once the run under way (if any) has. Runs go through the controllers' queue loop
// (worker.Loop), retried for as long as they fail.
func (r *RepairLoop) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() {
		worker.Loop{Kind: "service allocations", Queue: r.queue, Synced: r.synced, MaxRetries: math.MaxInt, Logger: r.log,
			Sync: func(ctx context.Context, _ string) error { return r.alloc.repair(ctx, r.log, r.notAllocated) }}.Run(ctx, 1)
	})
	wait.UntilWithContext(ctx, func(context.Context) { r.queue.Add(repairKey) }, r.interval)
	wg.Wait()
}

// notAllocated records kube-apiserver's event on a Service whose ClusterIP had no
// IPAddress object.
func (r *RepairLoop) notAllocated(o owner, ip string) {
	family := v1.IPv4Protocol
	if a, err := netip.ParseAddr(ip); err == nil && !a.Is4() {
		family = v1.IPv6Protocol
	}
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, UID: types.UID(o.UID)}}
	r.recorder.Eventf(svc, v1.EventTypeWarning, "ClusterIPNotAllocated", "Cluster IP [%v]: %s is not allocated; repairing", family, ip)
}
