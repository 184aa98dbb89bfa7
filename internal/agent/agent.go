package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/tranche/tranche/internal/agent/status"
	"github.com/tranche/tranche/internal/tombstone"
)

// Runtime runs a pod's processes (internal/agent/runtime implements it).
type Runtime interface {
	// SyncPod makes the pod's processes match the pod and returns what runs.
	SyncPod(ctx context.Context, pod *v1.Pod, volumes map[string]string) (status.PodView, error)
	// KillPod stops the pod (preStop, SIGTERM, grace, SIGKILL) and removes its sandbox.
	KillPod(ctx context.Context, pod *v1.Pod, grace time.Duration) error
	// Changes carries the UIDs of pods whose processes or probes changed.
	Changes() <-chan types.UID
}

// Volumes prepares and removes a pod's volumes (internal/agent/volumes implements it).
type Volumes interface {
	Prepare(ctx context.Context, pod *v1.Pod) (map[string]string, error)
	Cleanup(ctx context.Context, pod *v1.Pod) error
}

// Config is the pod loop's configuration.
type Config struct {
	NodeName string
	Client   kubernetes.Interface
	Runtime  Runtime
	Volumes  Volumes
	Recorder record.EventRecorder
	Clock    clock.Clock
	Logger   *slog.Logger
	// Resync is how often every pod is synced even without events (kubelet: 10 s).
	Resync time.Duration
	// Effective, when set, returns the pod as the node runs it (with what admission
	// would have added, such as the service account token volume); the status is
	// still written on the API's pod.
	Effective func(*v1.Pod) *v1.Pod
}

// Pods keeps the pods bound to this node running and their status current: one
// informer on the node's pods, a work queue of pod keys, and one sync per key that
// prepares volumes, asks the runtime to converge, and writes the computed status only
// when it changed.
type Pods struct {
	cfg     Config
	log     *slog.Logger
	factory informers.SharedInformerFactory
	lister  corelisters.PodLister
	synced  cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// known maps pod keys to the last pod object seen, so a pod deleted from the API
	// while the agent was away still gets its processes stopped.
	known map[string]*v1.Pod
	// byUID maps runtime change notifications back to keys.
	byUID map[types.UID]string
	// queued is when an informer event first queued a key not yet synced since: the
	// start of its wait in the queue, which the debug log reports.
	queued map[string]time.Time
	// prepared is, per pod, the pod whose volumes were last prepared without error
	// and their paths (see volumesFor).
	prepared map[types.UID]preparedVolumes
	// syncing cancels the runtime sync in progress of a key (see sync).
	syncing map[string]context.CancelFunc
	// admission keeps kubelet's host-port admission (admit.go).
	admission admission
}

// preparedVolumes is a pod as its volumes were prepared, and their paths.
type preparedVolumes struct {
	pod   *v1.Pod
	paths map[string]string
}

// NewPods wires the loop to an informer on the node's pods.
func NewPods(cfg Config) *Pods {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Resync == 0 {
		cfg.Resync = 10 * time.Second
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
	}))
	inf := factory.Core().V1().Pods()
	p := &Pods{
		cfg: cfg, log: cfg.Logger, factory: factory, lister: inf.Lister(), synced: inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 10*time.Second)),
		known: map[string]*v1.Pod{}, byUID: map[types.UID]string{}, queued: map[string]time.Time{},
		prepared: map[types.UID]preparedVolumes{}, syncing: map[string]context.CancelFunc{},
	}
	enqueue := func(obj interface{}, deleted bool) {
		if pod := tombstone.As[*v1.Pod](obj); pod != nil {
			key := pod.Namespace + "/" + pod.Name
			p.mu.Lock()
			if _, ok := p.queued[key]; !ok {
				p.queued[key] = p.cfg.Clock.Now()
			}
			if cancel := p.syncing[key]; cancel != nil && (deleted || pod.DeletionTimestamp != nil) {
				cancel()
			}
			p.mu.Unlock()
			p.queue.Add(key)
		}
	}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { enqueue(obj, false) },
		UpdateFunc: func(_, obj interface{}) { enqueue(obj, false) },
		DeleteFunc: func(obj interface{}) { enqueue(obj, true) },
	})
	return p
}

// Run syncs pods with workers goroutines until ctx ends.
func (p *Pods) Run(ctx context.Context, workers int) {
	defer p.queue.ShutDown()
	p.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), p.synced) {
		return
	}
	for i := 0; i < workers; i++ {
		go func() {
			for p.next(ctx) {
			}
		}()
	}
	go p.forwardChanges(ctx)
	t := time.NewTicker(p.cfg.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.mu.Lock()
			for key := range p.known {
				p.queue.Add(key)
			}
			p.mu.Unlock()
		}
	}
}

// forwardChanges turns runtime notifications into immediate syncs, so a readiness
// change reaches the API without waiting for the resync.
func (p *Pods) forwardChanges(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case uid, ok := <-p.cfg.Runtime.Changes():
			if !ok {
				return
			}
			p.mu.Lock()
			key := p.byUID[uid]
			p.mu.Unlock()
			if key != "" {
				p.queue.Add(key)
			}
		}
	}
}

func (p *Pods) next(ctx context.Context) bool {
	key, quit := p.queue.Get()
	if quit {
		return false
	}
	defer p.queue.Done(key)
	retry, err := p.sync(ctx, key)
	switch {
	case err != nil:
		p.log.Warn("syncing pod", "pod", key, "err", err)
		p.queue.AddRateLimited(key)
	case retry > 0:
		p.queue.Forget(key)
		p.queue.AddAfter(key, retry)
	default:
		p.queue.Forget(key)
	}
	return true
}

// sync converges one pod; it returns a delay after which to look again, if any.
func (p *Pods) sync(ctx context.Context, key string) (time.Duration, error) {
	start := p.cfg.Clock.Now()
	p.mu.Lock()
	queuedAt, ok := p.queued[key]
	delete(p.queued, key)
	p.mu.Unlock()
	if !ok {
		queuedAt = start
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	pod, err := p.lister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		p.mu.Lock()
		old := p.known[key]
		p.mu.Unlock()
		if old != nil {
			// Deleted from the API without our confirmation (forced): stop at once.
			if err := p.stop(ctx, old, 0); err != nil {
				return 0, err
			}
			p.forget(key, old.UID)
		}
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	if old := p.known[key]; old != nil && old.UID != pod.UID {
		// Same name, new pod: the old one's processes go first.
		p.mu.Unlock()
		if err := p.stop(ctx, old, 0); err != nil {
			return 0, err
		}
		p.forget(key, old.UID)
		p.mu.Lock()
	}
	p.known[key], p.byUID[pod.UID] = pod, key
	p.mu.Unlock()

	if pod.DeletionTimestamp != nil {
		grace := time.Duration(0)
		if pod.DeletionGracePeriodSeconds != nil {
			grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		}
		if err := p.stop(ctx, pod, grace); err != nil {
			return 0, err
		}
		// Confirm: the API server removes a pod bound to a node once the node says so.
		err := p.cfg.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return 0, err
		}
		p.forget(key, pod.UID)
		return 0, nil
	}
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		// A finished pod keeps its record; its processes are gone already.
		return 0, nil
	}
	if rejected, err := p.admit(ctx, pod); rejected || err != nil {
		return 0, err
	}
	if len(pod.Status.ContainerStatuses) == 0 && len(pod.Status.InitContainerStatuses) == 0 {
		// Kubelet reports a pod it admitted at once, before its volumes, sandbox and
		// images: Pending, its containers waiting with ContainerCreating (PodInitializing
		// behind init containers). `kubectl get pods` then shows ContainerCreating during
		// a long pull, not a bare Pending. The sync goes on with the object the API
		// server returned, so that its own status write does not conflict.
		written, err := p.writeStatus(ctx, pod, status.PodView{})
		if err != nil {
			return 0, err
		}
		if written != nil {
			pod = written
			p.mu.Lock()
			if p.known[key] != nil && p.known[key].UID == pod.UID {
				p.known[key] = pod
			}
			p.mu.Unlock()
		}
	}
	run := pod
	if p.cfg.Effective != nil {
		run = p.cfg.Effective(pod)
	}
	vols, err := p.volumesFor(ctx, run)
	if err != nil {
		p.event(pod, v1.EventTypeWarning, "FailedMount", err.Error())
		view := status.PodView{SandboxReady: false}
		if _, uerr := p.writeStatus(ctx, pod, view); uerr != nil {
			return 0, uerr
		}
		return 2 * time.Second, nil
	}
	prepared := p.cfg.Clock.Now()
	// A deletion of the pod cancels this sync (see cancelSync), as kubelet's pod workers
	// cancel a sync when the pod is killed: a long image pull then does not hold up its
	// deletion. The key is queued again by the update that cancelled it.
	sctx, cancel := context.WithCancel(ctx)
	p.mu.Lock()
	p.syncing[key] = cancel
	p.mu.Unlock()
	view, err := p.cfg.Runtime.SyncPod(sctx, run, vols)
	p.mu.Lock()
	delete(p.syncing, key)
	p.mu.Unlock()
	cancelled := sctx.Err() != nil && ctx.Err() == nil
	cancel()
	if cancelled {
		return 0, nil
	}
	if err != nil {
		p.event(pod, v1.EventTypeWarning, "FailedSync", err.Error())
	}
	synced := p.cfg.Clock.Now()
	written, uerr := p.writeStatus(ctx, pod, view)
	if uerr != nil {
		return 0, errors.Join(err, uerr)
	}
	if written != nil {
		// Where a status change's time went: waiting in the queue (from the informer
		// event), volumes, the runtime, the status write.
		p.log.Debug("pod status written", "pod", key, "phase", written.Status.Phase, "ready", podReady(&written.Status), "queued", start.Sub(queuedAt),
			"volumes", prepared.Sub(start), "runtime", synced.Sub(prepared), "write", p.cfg.Clock.Since(synced))
	}
	if err != nil {
		return 2 * time.Second, nil
	}
	return 0, nil
}

// stop kills a pod's processes and removes its volumes.
func (p *Pods) stop(ctx context.Context, pod *v1.Pod, grace time.Duration) error {
	if err := p.cfg.Runtime.KillPod(ctx, pod, grace); err != nil {
		return fmt.Errorf("stopping pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if err := p.cfg.Volumes.Cleanup(ctx, pod); err != nil {
		return fmt.Errorf("removing volumes of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func (p *Pods) forget(key string, uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.prepared, uid)
	if cur := p.known[key]; cur != nil && cur.UID == uid {
		delete(p.known, key)
	}
	delete(p.byUID, uid)
}

// volumesFor prepares the pod's volumes, or, when they were prepared already for the
// same spec, labels and annotations (most syncs: the echo of the agent's own status
// write, resyncs), returns the same paths without asking the API again for the pod's
// ConfigMaps, Secrets and token. Their contents are kept current by the volumes'
// periodic refresh, as kubelet's volume manager mounts once and then resyncs.
func (p *Pods) volumesFor(ctx context.Context, pod *v1.Pod) (map[string]string, error) {
	p.mu.Lock()
	prev, ok := p.prepared[pod.UID]
	p.mu.Unlock()
	if ok && maps.Equal(prev.pod.Labels, pod.Labels) && maps.Equal(prev.pod.Annotations, pod.Annotations) &&
		apiequality.Semantic.DeepEqual(prev.pod.Spec, pod.Spec) {
		return prev.paths, nil
	}
	paths, err := p.cfg.Volumes.Prepare(ctx, pod)
	p.mu.Lock()
	if err == nil {
		p.prepared[pod.UID] = preparedVolumes{pod: pod, paths: paths}
	} else {
		delete(p.prepared, pod.UID)
	}
	p.mu.Unlock()
	return paths, err
}

// writeStatus computes the pod's status and writes it when it differs; written is the
// pod as the API server returned it, nil when none was written.
func (p *Pods) writeStatus(ctx context.Context, pod *v1.Pod, view status.PodView) (written *v1.Pod, err error) {
	st := status.Compute(pod, view, p.cfg.Clock.Now())
	if apiequality.Semantic.DeepEqual(st, pod.Status) {
		return nil, nil
	}
	next := pod.DeepCopy()
	next.Status = st
	written, err = p.cfg.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// The informer brings the newer object; the sync runs again then.
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return written, nil
}

// podReady reports whether st's Ready condition is True.
func podReady(st *v1.PodStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func (p *Pods) event(pod *v1.Pod, typ, reason, msg string) {
	if p.cfg.Recorder != nil {
		p.cfg.Recorder.Event(pod, typ, reason, msg)
	}
}
