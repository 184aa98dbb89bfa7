package runtime

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/events"

	"github.com/tranche/tranche/internal/agent/ocispec"
	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/agent/status"
)

// In-place pod resize (kubelet's allocation manager and kuberuntime's resize): a pod's
// containers run with the resources the agent allocated to them, which start as the
// spec's. When the spec's differ (a write through pods/resize), the agent checks that
// the pod, with its new requests, fits the node beside the other pods' allocations; if
// so the new resources are allocated and actuated at once: written to the running
// containers' cgroups and to the pod's, or, for a container whose resizePolicy says
// RestartContainer for a resource that changed, by restarting it. A resize that does
// not fit stays pending (PodResizePending, reason Deferred, kubelet's message) and is
// tried again at every sync. The status reports the allocation (allocatedResources),
// what the cgroups hold (resources) and PodResizeInProgress while a restart is under
// way.

// resizeState is a pod's allocation, guarded by the pod's mutex.
type resizeState struct {
	// allocated are the resources admitted per container name (init containers
	// included); nil until the pod's first sync.
	allocated map[string]v1.ResourceRequirements
	// actual are the resources in each running instance's cgroup, by container name.
	actual map[string]actualResources
	// restarting names the containers stopped to take new resources: they start
	// again whatever the restart policy and back-off.
	restarting map[string]bool
	// pending is the PodResizePending condition of a resize not allocated; nil if none.
	pending *v1.PodCondition
	// inProgress is the PodResizeInProgress condition while an allocated resize is
	// being actuated; nil if none.
	inProgress *v1.PodCondition
}

// actualResources are the resources a container instance's cgroup holds.
type actualResources struct {
	id        string
	resources v1.ResourceRequirements
}

// allocationBook holds every pod's allocated requests for the fit check of a resize,
// by pod UID. Its zero value is ready to use.
type allocationBook struct {
	mu    sync.Mutex
	byPod map[types.UID]v1.ResourceList
}

func (b *allocationBook) set(uid types.UID, requests v1.ResourceList) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byPod == nil {
		b.byPod = map[types.UID]v1.ResourceList{}
	}
	b.byPod[uid] = requests
}

// used sums the requests of the pods in live other than uid.
func (b *allocationBook) used(uid types.UID, live map[types.UID]bool) (milliCPU, memory int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for u, r := range b.byPod {
		if u == uid || !live[u] {
			if !live[u] {
				delete(b.byPod, u)
			}
			continue
		}
		milliCPU += r.Cpu().MilliValue()
		memory += r.Memory().Value()
	}
	return milliCPU, memory
}

// resizeReasonDeferred is kubelet's reason for a resize that does not fit the node now.
const resizeReasonDeferred = v1.PodReasonDeferred

// desiredResources are the spec's resources of pod's containers by name.
func desiredResources(pod *v1.Pod) map[string]v1.ResourceRequirements {
	out := map[string]v1.ResourceRequirements{}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			out[cs[i].Name] = *cs[i].Resources.DeepCopy()
		}
	}
	return out
}

// allocatedFromStatus is a pod's allocation when the agent first sees it: the spec's
// resources, except for containers whose status (written by an earlier agent) reports
// an allocation, which keep its requests and the limits their cgroup holds, so that a
// new agent neither takes a pending resize for allocated nor loses an actuated one.
func allocatedFromStatus(pod *v1.Pod) map[string]v1.ResourceRequirements {
	out := desiredResources(pod)
	for _, st := range append(append([]v1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if _, ok := out[st.Name]; !ok || st.Resources == nil {
			continue
		}
		r := v1.ResourceRequirements{Requests: st.AllocatedResources.DeepCopy(), Limits: st.Resources.Limits.DeepCopy()}
		out[st.Name] = r
	}
	return out
}

// withResources returns a copy of pod whose containers have the given resources.
func withResources(pod *v1.Pod, res map[string]v1.ResourceRequirements) *v1.Pod {
	out := pod.DeepCopy()
	for _, cs := range [][]v1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range cs {
			if r, ok := res[cs[i].Name]; ok {
				cs[i].Resources = *r.DeepCopy()
			}
		}
	}
	return out
}

// resizeFit is kubelet's resource fit for a resize (the scheduler's NodeResourcesFit
// as the predicate admit handler runs it): the pod's requests against the node's
// allocatable less what the other pods have allocated, cpu first, then memory; "" when
// it fits, else InsufficientResourceError's message.
func resizeFit(requests v1.ResourceList, usedCPU, usedMemory, allocCPU, allocMemory int64) string {
	if cpu := requests.Cpu().MilliValue(); cpu > 0 && cpu > allocCPU-usedCPU {
		return fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", v1.ResourceCPU, cpu, usedCPU, allocCPU)
	}
	if mem := requests.Memory().Value(); mem > 0 && mem > allocMemory-usedMemory {
		return fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", v1.ResourceMemory, mem, usedMemory, allocMemory)
	}
	return ""
}

// podRequests are the pod's effective requests (init containers by their maximum,
// sidecars added, overhead), as kubelet's admission counts them.
func podRequests(pod *v1.Pod) v1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// needsRestart reports whether going from old to next changes a resource whose resize
// policy in c is RestartContainer.
func needsRestart(c *v1.Container, old, next v1.ResourceRequirements) bool {
	for _, p := range c.ResizePolicy {
		if p.RestartPolicy != v1.RestartContainer {
			continue
		}
		if !old.Requests[p.ResourceName].Equal(next.Requests[p.ResourceName]) ||
			!old.Limits[p.ResourceName].Equal(next.Limits[p.ResourceName]) {
			return true
		}
	}
	return false
}

// syncResize allocates the pod's resources (on its first sync, the spec's; later, a
// changed spec's when they fit), actuates them in the running containers and the pod's
// cgroup, and leaves ps.pod with the allocated resources, which is what the runtime
// runs. ps.mu is held.
func (m *Manager) syncResize(ps *podState) {
	r := &ps.resize
	desired := desiredResources(ps.pod)
	if r.allocated == nil {
		r.allocated, r.actual, r.restarting = allocatedFromStatus(ps.pod), map[string]actualResources{}, map[string]bool{}
	}
	// Instances started since the last sync run with what was allocated then.
	for _, c := range ps.allRunning() {
		if a, ok := r.actual[c.name]; !ok || a.id != c.inst.id {
			alloc := r.allocated[c.name]
			r.actual[c.name] = actualResources{id: c.inst.id, resources: *alloc.DeepCopy()}
			delete(r.restarting, c.name)
		}
	}
	old := r.allocated
	if !apiequality.Semantic.DeepEqual(desired, old) {
		live := map[types.UID]bool{}
		m.mu.Lock()
		for uid := range m.pods {
			if !m.killed[uid] {
				live[uid] = true
			}
		}
		m.mu.Unlock()
		usedCPU, usedMem := m.allocations.used(ps.pod.UID, live)
		cpu, mem := nodeResources()
		msg := resizeFit(podRequests(ps.pod), usedCPU, usedMem, cpu.MilliValue(), mem.Value())
		if msg == "" {
			r.allocated, r.pending = desired, nil
			r.inProgress = &v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue,
				ObservedGeneration: ps.pod.Generation, LastTransitionTime: metav1.NewTime(m.cfg.Clock.Now())}
			m.event(ps.pod, v1.EventTypeNormal, events.ResizeStarted, events.PodResizeStartedMsg(klog.Background(), ps.pod, ps.pod.Generation))
		} else if r.pending == nil || r.pending.Message != msg || r.pending.ObservedGeneration != ps.pod.Generation {
			r.pending = &v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: resizeReasonDeferred,
				Message: msg, ObservedGeneration: ps.pod.Generation, LastTransitionTime: metav1.NewTime(m.cfg.Clock.Now())}
			m.event(ps.pod, v1.EventTypeWarning, events.ResizeDeferred, events.PodResizePendingMsg(klog.Background(), ps.pod, resizeReasonDeferred, msg, ps.pod.Generation))
		}
	} else {
		r.pending = nil
	}
	ps.pod = withResources(ps.pod, r.allocated)
	m.allocations.set(ps.pod.UID, podRequests(ps.pod))
	if ps.sandboxReady {
		m.actuateResize(ps)
	}
	if r.inProgress != nil && len(r.restarting) == 0 && m.resizeActuated(ps) {
		m.event(ps.pod, v1.EventTypeNormal, events.ResizeCompleted, events.PodResizeCompletedMsg(klog.Background(), ps.pod, r.inProgress.ObservedGeneration))
		r.inProgress = nil
	}
	for name := range r.restarting {
		if c := ps.containers[name]; c != nil && c.inst == nil {
			// It starts again in this sync; the next one sees it run and ends the
			// resize.
			m.later(ps, time.Second)
			break
		}
		if c := ps.inits[name]; c != nil && c.inst == nil {
			m.later(ps, time.Second)
			break
		}
	}
}

// allRunning are the pod's containers and init containers with a running instance,
// in name order.
func (ps *podState) allRunning() []*container {
	var out []*container
	for _, cs := range []map[string]*container{ps.inits, ps.containers} {
		for _, name := range slices.Sorted(maps.Keys(cs)) {
			if c := cs[name]; c.inst != nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// resizeActuated reports whether every running container's cgroup holds its
// allocation.
func (m *Manager) resizeActuated(ps *podState) bool {
	for _, c := range ps.allRunning() {
		if !apiequality.Semantic.DeepEqual(ps.resize.actual[c.name].resources, ps.resize.allocated[c.name]) {
			return false
		}
	}
	return true
}

// actuateResize brings the running containers' cgroups, and the pod's, to the
// allocation, as kuberuntime's doPodResizeAction does: unless a memory limit would go
// below what is in use (then the resize stays in progress with reason Error and
// kubelet's message, and is tried again at the next sync), the pod's cgroup is widened
// first to the larger of its current and new limits, then each container is updated
// (or restarted when its resize policy asks for it), then the pod's cgroup gets its new
// values. ps.mu is held.
func (m *Manager) actuateResize(ps *podState) {
	r := &ps.resize
	var changed []*container
	current := maps.Clone(r.allocated)
	for _, c := range ps.allRunning() {
		if a, ok := r.actual[c.name]; ok {
			current[c.name] = a.resources
		}
		if !apiequality.Semantic.DeepEqual(r.actual[c.name].resources, r.allocated[c.name]) && !r.restarting[c.name] {
			changed = append(changed, c)
		}
	}
	if len(changed) == 0 {
		return
	}
	cgroup2 := runc.Cgroup2()
	podPath := m.podCgroup(ps.pod.UID)
	now := ocispec.PodResources(withResources(ps.pod, current))
	next := ocispec.PodResources(ps.pod)
	if err := m.checkMemoryDecrease(ps, changed, now, next); err != nil {
		m.cfg.Logger.Warn("resize: allocated resize is not currently feasible", "pod", podID(ps.pod), "err", err)
		if r.inProgress == nil || r.inProgress.Reason != v1.PodReasonError || r.inProgress.Message != err.Error() {
			m.event(ps.pod, v1.EventTypeWarning, events.ResizeError, events.PodResizeErrorMsg(klog.Background(), ps.pod, ps.pod.Generation, err.Error()))
		}
		r.inProgress = &v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, Reason: v1.PodReasonError,
			Message: err.Error(), ObservedGeneration: ps.pod.Generation, LastTransitionTime: metav1.NewTime(m.cfg.Clock.Now())}
		return
	}
	if err := runc.UpdateCgroup(podPath, widest(now, next)); err != nil {
		m.cfg.Logger.Warn("resize: widening the pod cgroup", "pod", podID(ps.pod), "err", err)
	}
	for _, c := range changed {
		spec := containerSpec(ps.pod, c.name)
		if spec == nil {
			continue
		}
		a := r.actual[c.name]
		if needsRestart(spec, a.resources, r.allocated[c.name]) {
			r.restarting[c.name] = true
			inst := c.inst
			m.cfg.Logger.Info("resize: restarting container for its resize policy", "pod", podID(ps.pod), "container", c.name)
			go m.stopInstance(ps, c, inst, gracePeriod(ps.pod), 0)
			continue
		}
		if err := runc.UpdateCgroup(c.inst.cgroup, ocispec.ContainerUpdate(spec, cgroup2)); err != nil {
			m.cfg.Logger.Warn("resize: updating a container's cgroup", "pod", podID(ps.pod), "container", c.name, "err", err)
			continue
		}
		alloc := r.allocated[c.name]
		r.actual[c.name] = actualResources{id: a.id, resources: *alloc.DeepCopy()}
	}
	if err := runc.UpdateCgroup(podPath, next); err != nil {
		m.cfg.Logger.Warn("resize: updating the pod cgroup", "pod", podID(ps.pod), "err", err)
	}
}

// checkMemoryDecrease is kuberuntime's validateMemoryResizeAction: a memory limit that
// is added or lowered, the pod's or a container's updated in place, must stay above
// what the cgroup uses now. The message is kubelet's, which names the pod's usage for a
// container too.
func (m *Manager) checkMemoryDecrease(ps *podState, changed []*container, now, next *specs.LinuxResources) error {
	podDecreasing := next.Memory != nil && next.Memory.Limit != nil &&
		(now.Memory == nil || now.Memory.Limit == nil || *next.Memory.Limit < *now.Memory.Limit)
	decreasing := map[string]int64{}
	var names []string
	for _, c := range changed {
		spec := containerSpec(ps.pod, c.name)
		if spec == nil || needsRestart(spec, ps.resize.actual[c.name].resources, ps.resize.allocated[c.name]) {
			continue
		}
		wantQ := ps.resize.allocated[c.name].Limits[v1.ResourceMemory]
		haveQ := ps.resize.actual[c.name].resources.Limits[v1.ResourceMemory]
		want, have := wantQ.Value(), haveQ.Value()
		if want != 0 && (have == 0 || want < have) {
			decreasing[c.name] = want
			names = append(names, c.name)
		}
	}
	if !podDecreasing && len(decreasing) == 0 {
		return nil
	}
	podStats, err := runc.Stats(m.podCgroup(ps.pod.UID))
	if err != nil {
		return fmt.Errorf("unable to read memory usage for pod %q", podID(ps.pod))
	}
	var errs []error
	if podDecreasing && podStats.MemoryUsage >= uint64(*next.Memory.Limit) {
		errs = append(errs, fmt.Errorf("attempting to set pod memory limit (%d) below current usage (%d)", *next.Memory.Limit, podStats.MemoryUsage))
	}
	for _, name := range names {
		c := ps.containers[name]
		if c == nil {
			c = ps.inits[name]
		}
		st, err := runc.Stats(c.inst.cgroup)
		if err != nil {
			errs = append(errs, fmt.Errorf("missing container %q memory usage", name))
		} else if st.MemoryUsage >= uint64(decreasing[name]) {
			errs = append(errs, fmt.Errorf("attempting to set container %q memory limit (%d) below current usage (%d)", name, decreasing[name], podStats.MemoryUsage))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cannot decrease memory limits: %w", utilerrors.NewAggregate(errs))
	}
	return nil
}

// widest is the pod cgroup that admits both a and b: the larger quota and memory
// limit (none when either has none), b's shares.
func widest(a, b *specs.LinuxResources) *specs.LinuxResources {
	out := &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: b.CPU.Shares}}
	if a.CPU.Quota != nil && b.CPU.Quota != nil {
		q := max(*a.CPU.Quota, *b.CPU.Quota)
		out.CPU.Quota, out.CPU.Period = &q, b.CPU.Period
	}
	if a.Memory != nil && a.Memory.Limit != nil && b.Memory != nil && b.Memory.Limit != nil {
		l := max(*a.Memory.Limit, *b.Memory.Limit)
		out.Memory = &specs.LinuxMemory{Limit: &l}
	}
	return out
}

// resizeView is what the status reports of the pod's allocation. ps.mu is held.
func (ps *podState) resizeView() status.ResizeView {
	r := &ps.resize
	if r.allocated == nil {
		return status.ResizeView{}
	}
	v := status.ResizeView{Allocated: map[string]v1.ResourceRequirements{}, Actual: map[string]v1.ResourceRequirements{}}
	for name, res := range r.allocated {
		v.Allocated[name] = *res.DeepCopy()
	}
	for _, c := range ps.allRunning() {
		if a, ok := r.actual[c.name]; ok && a.id == c.inst.id {
			v.Actual[c.name] = *a.resources.DeepCopy()
		}
	}
	if r.pending != nil {
		v.Pending = r.pending.DeepCopy()
	}
	if r.inProgress != nil {
		v.InProgress = r.inProgress.DeepCopy()
	}
	return v
}
