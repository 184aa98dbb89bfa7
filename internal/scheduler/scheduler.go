package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tranche/tranche/internal/tombstone"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// DefaultSchedulerName is the spec.schedulerName the API server gives pods
// that name no scheduler.
const DefaultSchedulerName = "default-scheduler"

// assumeTTL bounds how long a binding the scheduler made is counted before the
// informers show it: long enough for any healthy watch, short enough that a
// lost binding does not hold a node's resources for good.
const assumeTTL = 30 * time.Second

// flushInterval is how often waiting pods are checked for an expired backoff.
const flushInterval = 100 * time.Millisecond

// Config is what the scheduler needs from its host.
type Config struct {
	// Client binds pods and updates their status. Required.
	Client kubernetes.Interface
	// Informers provides the Pod, Node and PodDisruptionBudget informers; New
	// registers them, the caller starts the factory. Required.
	Informers informers.SharedInformerFactory
	// Recorder receives the Scheduled, FailedScheduling and Preempted events.
	// Required.
	Recorder record.EventRecorder
	// Logger receives progress and errors; nil discards them.
	Logger *slog.Logger
	// SchedulerName selects the pods to schedule by spec.schedulerName;
	// empty means DefaultSchedulerName.
	SchedulerName string
	// Clock drives backoff and assumption expiry; nil means the real clock.
	Clock clock.WithTicker
}

// Scheduler binds pending pods to nodes, one at a time. Create it with New
// and drive it with Run.
type Scheduler struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	log      *slog.Logger
	name     string
	clock    clock.WithTicker
	nodes    corelisters.NodeLister
	pods     corelisters.PodLister
	pdbs     policylisters.PodDisruptionBudgetLister
	synced   []cache.InformerSynced
	queue    *schedulingQueue
	assumed  *assumedPods
	// nominated remembers the nominations this scheduler made until the
	// pods are bound or gone, ahead of the informers showing them.
	nominated *nominations
}

// New registers the scheduler's handlers on the factory's Pod and Node
// informers. It panics when a required Config field is missing or the
// informers are already stopped, which are wiring mistakes.
func New(cfg Config) *Scheduler {
	if cfg.Client == nil || cfg.Informers == nil || cfg.Recorder == nil {
		panic("scheduler.New: Client, Informers and Recorder are required")
	}
	s := &Scheduler{
		client: cfg.Client, recorder: cfg.Recorder, log: cfg.Logger,
		name: cfg.SchedulerName, clock: cfg.Clock,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.name == "" {
		s.name = DefaultSchedulerName
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	s.queue = newSchedulingQueue(s.clock)
	s.assumed = &assumedPods{pods: map[string]assumedPod{}}
	s.nominated = &nominations{nodes: map[string]string{}}
	podInf := cfg.Informers.Core().V1().Pods()
	nodeInf := cfg.Informers.Core().V1().Nodes()
	pdbInf := cfg.Informers.Policy().V1().PodDisruptionBudgets()
	s.pods, s.nodes, s.pdbs = podInf.Lister(), nodeInf.Lister(), pdbInf.Lister()
	// The registrations' HasSynced, unlike the informers', waits until the
	// handlers themselves have seen the initial list, so the queue holds
	// every pending pod before the first decision.
	podReg, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.onPod(nil, tombstone.As[*v1.Pod](obj)) },
		UpdateFunc: func(old, obj any) { s.onPod(tombstone.As[*v1.Pod](old), tombstone.As[*v1.Pod](obj)) },
		DeleteFunc: func(obj any) { s.onPodDelete(tombstone.As[*v1.Pod](obj)) },
	})
	if err != nil {
		panic(fmt.Sprintf("scheduler.New: pod informer: %v", err))
	}
	nodeReg, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { s.queue.moveAll() },
		UpdateFunc: func(old, obj any) {
			if o, n := asNode(old), asNode(obj); o == nil || n == nil || nodeChanged(o, n) {
				s.queue.moveAll()
			}
		},
	})
	if err != nil {
		panic(fmt.Sprintf("scheduler.New: node informer: %v", err))
	}
	s.synced = []cache.InformerSynced{podReg.HasSynced, nodeReg.HasSynced, pdbInf.Informer().HasSynced}
	return s
}

func asNode(obj any) *v1.Node {
	node, _ := obj.(*v1.Node)
	return node
}

// nodeChanged reports whether an update touched what the filters look at.
func nodeChanged(old, cur *v1.Node) bool {
	return readyStatus(old) != readyStatus(cur) ||
		old.Spec.Unschedulable != cur.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints) ||
		!equality.Semantic.DeepEqual(old.Labels, cur.Labels) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, cur.Status.Allocatable)
}

// responsible reports whether pod waits for this scheduler.
func (s *Scheduler) responsible(pod *v1.Pod) bool {
	name := pod.Spec.SchedulerName
	if name == "" {
		name = DefaultSchedulerName
	}
	return pod.Spec.NodeName == "" && name == s.name && pod.DeletionTimestamp == nil &&
		len(pod.Spec.SchedulingGates) == 0 && !isTerminal(pod)
}

func (s *Scheduler) onPod(old, pod *v1.Pod) {
	if pod == nil {
		return
	}
	key := cache.MetaObjectToName(pod).String()
	if pod.Spec.NodeName != "" {
		s.assumed.forget(key)
		s.nominated.forget(key)
		s.queue.remove(key)
		if old != nil && old.Spec.NodeName != "" && !isTerminal(old) && isTerminal(pod) {
			s.queue.moveAll()
		}
		return
	}
	if !s.responsible(pod) || s.assumed.has(key, s.clock.Now()) {
		s.queue.remove(key)
		return
	}
	s.queue.add(key, pod)
}

func (s *Scheduler) onPodDelete(pod *v1.Pod) {
	if pod == nil {
		return
	}
	key := cache.MetaObjectToName(pod).String()
	s.queue.remove(key)
	s.nominated.forget(key)
	wasAssumed := s.assumed.has(key, s.clock.Now())
	s.assumed.forget(key)
	if (pod.Spec.NodeName != "" || wasAssumed) && !isTerminal(pod) {
		s.queue.moveAll()
	}
}

// Run schedules pods until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	defer s.queue.close()
	if !cache.WaitForCacheSync(ctx.Done(), s.synced...) {
		return
	}
	s.log.Info("scheduler started", "schedulerName", s.name)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		t := s.clock.NewTicker(flushInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				s.queue.flush()
			}
		}
	}()
	go func() {
		defer wg.Done()
		for s.scheduleOne(ctx) {
		}
	}()
	<-ctx.Done()
	s.queue.close()
	wg.Wait()
}

// scheduleOne takes the next pending pod, decides, and applies the decision.
// It returns false once the queue is closed.
func (s *Scheduler) scheduleOne(ctx context.Context) bool {
	key, pod, ok := s.queue.pop()
	if !ok {
		return false
	}
	if s.assumed.has(key, s.clock.Now()) {
		s.queue.done(key)
		return true
	}
	snap, err := s.snapshot()
	if err != nil {
		s.log.Error("listing nodes and pods", "pod", key, "err", err)
		s.queue.failed(key)
		return true
	}
	// The pod as the API has it, for status writes; the one decided on
	// carries this scheduler's latest nomination.
	stored := pod
	if nnn, ok := s.nominated.get(key); ok && pod.Status.NominatedNodeName != nnn {
		pod = pod.DeepCopy()
		pod.Status.NominatedNodeName = nnn
	}
	node, err := schedule(pod, snap)
	if err != nil {
		s.log.Debug("pod unschedulable", "pod", key, "reason", err.Error())
		reason := v1.PodReasonSchedulerError
		nominate := pod.Status.NominatedNodeName
		if fe, ok := err.(*fitError); ok {
			reason = v1.PodReasonUnschedulable
			if p := fe.preemption; p != nil && !p.keepNomination {
				nominate = p.node
				if p.node == "" {
					s.nominated.forget(key)
				} else if perr := s.actuatePreemption(ctx, pod, p, snap); perr != nil {
					s.log.Warn("preemption", "pod", key, "node", p.node, "err", perr)
					nominate = pod.Status.NominatedNodeName
				}
			}
		}
		s.reportFailure(ctx, stored, reason, err.Error(), nominate)
		s.queue.failed(key)
		return true
	}
	if err := s.bind(ctx, pod, node); err != nil {
		s.assumed.forget(key)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			// Deleted, or bound by someone else, meanwhile: the informer
			// will tell, nothing to retry.
			s.log.Info("pod not bound", "pod", key, "node", node, "err", err)
			s.queue.done(key)
			return true
		}
		s.log.Warn("binding pod", "pod", key, "node", node, "err", err)
		s.reportFailure(ctx, stored, v1.PodReasonSchedulerError, "binding rejected: "+err.Error(), stored.Status.NominatedNodeName)
		s.queue.failed(key)
		return true
	}
	s.log.Info("pod scheduled", "pod", key, "node", node)
	s.recorder.Eventf(pod, v1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, node)
	s.queue.done(key)
	return true
}

// snapshot assembles the cluster from the informer caches plus the pods this
// scheduler bound that the caches do not show bound yet, with the pending
// pods nominated to nodes (this scheduler's own latest nominations first) and
// the PodDisruptionBudgets preemption weighs.
func (s *Scheduler) snapshot() (*snapshot, error) {
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	all, err := s.pods.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	bound := make([]*v1.Pod, 0, len(all))
	seen := make(map[string]bool, len(all))
	for _, p := range all {
		if p.Spec.NodeName != "" {
			bound = append(bound, p)
			seen[cache.MetaObjectToName(p).String()] = true
		}
	}
	for key, p := range s.assumed.list(s.clock.Now()) {
		if !seen[key] {
			bound = append(bound, p)
		}
	}
	pdbs, err := s.pdbs.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	snap := newSnapshot(nodes, bound)
	snap.pdbs, snap.now = pdbs, s.clock.Now()
	for _, p := range all {
		key := cache.MetaObjectToName(p).String()
		if p.Spec.NodeName != "" || seen[key] || s.assumed.has(key, snap.now) || p.DeletionTimestamp != nil {
			continue
		}
		nnn := p.Status.NominatedNodeName
		if mem, ok := s.nominated.get(key); ok {
			nnn = mem
		}
		snap.nominate(p, nnn)
	}
	return snap, nil
}

// bind assumes pod on node, then asks the API server to bind it there. The
// assumption comes first so that the informer event for the binding, which
// may arrive before Bind returns, finds it and ends it. The error is the API
// server's, unwrapped, because it becomes the FailedScheduling message.
func (s *Scheduler) bind(ctx context.Context, pod *v1.Pod, node string) error {
	key := cache.MetaObjectToName(pod).String()
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = node
	s.assumed.assume(key, assumed, s.clock.Now().Add(assumeTTL))
	b := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: node},
	}
	return s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{})
}

// reportFailure emits FailedScheduling and records the reason in the pod's
// PodScheduled condition and the node preemption nominated it for in
// status.nominatedNodeName, writing the status only when it changes.
func (s *Scheduler) reportFailure(ctx context.Context, pod *v1.Pod, reason, msg, nominate string) {
	s.recorder.Event(pod, v1.EventTypeWarning, "FailedScheduling", msg)
	cond := v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: reason, Message: msg}
	updated, changed := withCondition(pod, cond, metav1.NewTime(s.clock.Now()))
	if updated.Status.NominatedNodeName != nominate {
		if !changed {
			updated = updated.DeepCopy()
		}
		updated.Status.NominatedNodeName, changed = nominate, true
	}
	if !changed {
		return
	}
	err := patchStatus(ctx, s.client, pod, &updated.Status)
	if err != nil && !apierrors.IsNotFound(err) {
		s.log.Warn("updating PodScheduled condition", "pod", cache.MetaObjectToName(pod).String(), "err", err)
	}
}

// withCondition returns a copy of pod carrying cond, and whether that differs
// from the pod's current condition of the same type. The transition time
// moves only when the status does.
func withCondition(pod *v1.Pod, cond v1.PodCondition, now metav1.Time) (*v1.Pod, bool) {
	for i, c := range pod.Status.Conditions {
		if c.Type != cond.Type {
			continue
		}
		if c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message {
			return pod, false
		}
		out := pod.DeepCopy()
		cond.LastTransitionTime = c.LastTransitionTime
		if c.Status != cond.Status {
			cond.LastTransitionTime = now
		}
		out.Status.Conditions[i] = cond
		return out, true
	}
	out := pod.DeepCopy()
	cond.LastTransitionTime = now
	out.Status.Conditions = append(out.Status.Conditions, cond)
	return out, true
}

// assumedPod is a pod the scheduler bound, counted on its node until the
// informer shows the binding or the deadline passes.
type assumedPod struct {
	pod      *v1.Pod
	deadline time.Time
}

// assumedPods is the scheduler's memory of its own recent bindings, shared
// by the scheduling loop and the informer handlers.
type assumedPods struct {
	mu   sync.Mutex
	pods map[string]assumedPod
}

func (a *assumedPods) assume(key string, pod *v1.Pod, deadline time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pods[key] = assumedPod{pod: pod, deadline: deadline}
}

func (a *assumedPods) forget(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.pods, key)
}

func (a *assumedPods) has(key string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pods[key]
	return ok && now.Before(p.deadline)
}

// list returns the live assumptions by key and drops the expired ones.
func (a *assumedPods) list(now time.Time) map[string]*v1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]*v1.Pod, len(a.pods))
	for key, p := range a.pods {
		if !now.Before(p.deadline) {
			delete(a.pods, key)
			continue
		}
		out[key] = p.pod
	}
	return out
}
