// Package status computes a Pod's status from what the node agent knows about it (its
// sandbox and each container's runtime state and probe results), following kubelet's
// rules so that kubectl reads a tranche pod exactly as a real one: phase, conditions,
// container statuses, IPs, start time and QoS class. Compute is pure; the agent sends
// its result to the API server.
package status

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ContainerIDPrefix is the runtime prefix of container IDs in statuses ("tranche://<id>").
const ContainerIDPrefix = "tranche://"

// Waiting reasons kubelet reports before a container has a runtime state.
const (
	ReasonContainerCreating = "ContainerCreating"
	ReasonPodInitializing   = "PodInitializing"
)

// Condition reasons kubelet uses.
const (
	reasonContainersNotInitialized = "ContainersNotInitialized"
	reasonContainersNotReady       = "ContainersNotReady"
	reasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
	reasonPodCompleted             = "PodCompleted"
	reasonPodFailed                = "PodFailed"
)

// PodView is the agent's knowledge of one pod.
type PodView struct {
	// SandboxReady is true once the pod's network namespace, addresses and /etc files
	// are in place (PodReadyToStartContainers).
	SandboxReady bool
	// PodIPs and HostIPs are the pod's and node's addresses, primary first.
	PodIPs  []string
	HostIPs []string
	// StartTime is when the agent accepted the pod; zero means now (kept afterwards
	// from the pod's status).
	StartTime time.Time
	// Containers and InitContainers hold the containers that have runtime state, by
	// name; a container missing here has not been created yet.
	Containers     map[string]ContainerView
	InitContainers map[string]ContainerView
	// EphemeralContainers are the debugging containers added through
	// pods/ephemeralcontainers; they count for neither readiness nor phase.
	EphemeralContainers map[string]ContainerView
	// Terminal is true when the pod's containers are stopped for good (the pod is
	// being deleted or evicted): its phase then becomes Succeeded or Failed whatever
	// the restart policy.
	Terminal bool
	// FailedReason, when set, is why the agent stopped the pod for good (kubelet's
	// eviction reasons, e.g. DeadlineExceeded): its phase is then Failed with this
	// reason and FailedMessage, whatever its containers' exit codes.
	FailedReason, FailedMessage string
	// Resize is the pod's in-place resize: allocated and actual resources, and the
	// resize conditions (resize.go).
	Resize ResizeView
}

// ContainerView is the runtime state of one container.
type ContainerView struct {
	// ID is the runtime's id of the current (or last) instance.
	ID string
	// Image and ImageID are reported as given (images.Plan gives both); an empty
	// Image reports the spec's.
	Image   string
	ImageID string
	// State is the current state: Waiting (with reason, e.g. CrashLoopBackOff),
	// Running or Terminated. A Terminated state without a reason gets kubelet's
	// (Completed for exit code 0, Error otherwise).
	State v1.ContainerState
	// LastState is the previous instance's termination, if any.
	LastState v1.ContainerState
	// RestartCount counts restarts of the container.
	RestartCount int32
	// Started is true once the startup probe succeeded (at once without one).
	Started bool
	// Ready is the readiness probe's result (true without one); it only counts while
	// the container runs.
	Ready bool
}

// Compute returns the status of pod as kubelet would report it from view at now. It
// keeps from pod.Status what the agent does not own: conditions of other types (like
// PodScheduled and readiness gates), each condition's lastTransitionTime while its status
// is unchanged, a terminal phase, start time, QoS class and the nominated node.
func Compute(pod *v1.Pod, view PodView, now time.Time) v1.PodStatus {
	if pod == nil {
		return v1.PodStatus{}
	}
	old := pod.Status
	hasInit := len(pod.Spec.InitContainers) > 0
	s := v1.PodStatus{
		NominatedNodeName: old.NominatedNodeName,
		QOSClass:          old.QOSClass,
		// The status describes this generation of the spec (kubelet since v1.33).
		ObservedGeneration: pod.Generation,
	}
	if s.QOSClass == "" {
		s.QOSClass = QOSClass(pod)
	}
	s.InitContainerStatuses = containerStatuses(pod.Spec.InitContainers, view.InitContainers, view.SandboxReady, hasInit)
	s.ContainerStatuses = containerStatuses(pod.Spec.Containers, view.Containers, view.SandboxReady, hasInit)
	initReady(pod.Spec.InitContainers, s.InitContainerStatuses)
	if n := len(pod.Spec.EphemeralContainers); n > 0 {
		ecs := make([]v1.Container, n)
		for i, ec := range pod.Spec.EphemeralContainers {
			ecs[i] = v1.Container(ec.EphemeralContainerCommon)
		}
		s.EphemeralContainerStatuses = containerStatuses(ecs, view.EphemeralContainers, view.SandboxReady, false)
	}
	// Kubelet lists regular containers by name and init containers in spec order.
	sort.SliceStable(s.ContainerStatuses, func(i, j int) bool { return s.ContainerStatuses[i].Name < s.ContainerStatuses[j].Name })

	s.Phase = phase(pod, s.InitContainerStatuses, s.ContainerStatuses, view.Terminal)
	if view.FailedReason != "" {
		s.Phase, s.Reason, s.Message = v1.PodFailed, view.FailedReason, view.FailedMessage
	}
	if old.Phase == v1.PodSucceeded || old.Phase == v1.PodFailed {
		// A terminal phase is final.
		s.Phase, s.Reason, s.Message = old.Phase, old.Reason, old.Message
	}

	switch {
	case old.StartTime != nil:
		s.StartTime = old.StartTime.DeepCopy()
	case !view.StartTime.IsZero():
		s.StartTime = &metav1.Time{Time: view.StartTime}
	default:
		s.StartTime = &metav1.Time{Time: now}
	}
	for _, ip := range view.HostIPs {
		s.HostIPs = append(s.HostIPs, v1.HostIP{IP: ip})
	}
	if len(s.HostIPs) > 0 {
		s.HostIP = s.HostIPs[0].IP
	} else {
		s.HostIP, s.HostIPs = old.HostIP, append([]v1.HostIP(nil), old.HostIPs...)
	}
	for _, ip := range view.PodIPs {
		s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
	}
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	} else {
		// A torn-down sandbox does not take the pod's address out of its status.
		s.PodIP, s.PodIPs = old.PodIP, append([]v1.PodIP(nil), old.PodIPs...)
	}

	s.Conditions = conditions(pod, &s, view.SandboxReady, now)
	resizeStatus(pod, view.Resize, &s)
	normalizeTimes(&s)
	return s
}

// normalizeTimes cuts every time in s to whole seconds, as kubelet's status manager
// does (normalizeStatus): the API stores times to the second, so a status with finer
// times never equals the stored one and every sync would write it again.
func normalizeTimes(s *v1.PodStatus) {
	cut := func(t *metav1.Time) {
		if t != nil {
			*t = t.Rfc3339Copy()
		}
	}
	cut(s.StartTime)
	for i := range s.Conditions {
		cut(&s.Conditions[i].LastProbeTime)
		cut(&s.Conditions[i].LastTransitionTime)
	}
	for _, sts := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range sts {
			for _, st := range []*v1.ContainerState{&sts[i].State, &sts[i].LastTerminationState} {
				if r := st.Running; r != nil {
					cut(&r.StartedAt)
				}
				if t := st.Terminated; t != nil {
					cut(&t.StartedAt)
					cut(&t.FinishedAt)
				}
			}
		}
	}
}

// containerStatuses builds the statuses of containers in spec order; containers the
// runtime has not created yet wait with ContainerCreating, or PodInitializing in a pod
// with init containers, as kubelet reports them.
func containerStatuses(containers []v1.Container, views map[string]ContainerView, sandboxReady, hasInit bool) []v1.ContainerStatus {
	if len(containers) == 0 {
		return nil
	}
	out := make([]v1.ContainerStatus, 0, len(containers))
	for _, c := range containers {
		st := v1.ContainerStatus{Name: c.Name, Image: c.Image, Started: new(false)}
		v, ok := views[c.Name]
		if !ok {
			reason := ReasonContainerCreating
			if hasInit {
				reason = ReasonPodInitializing
			}
			st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}
			out = append(out, st)
			continue
		}
		if v.Image != "" {
			st.Image = v.Image
		}
		st.ImageID = v.ImageID
		if v.ID != "" {
			st.ContainerID = ContainerIDPrefix + v.ID
		}
		st.State = withTerminationReason(v.State)
		st.LastTerminationState = withTerminationReason(v.LastState)
		st.RestartCount = v.RestartCount
		running := st.State.Running != nil
		st.Started = new(running && v.Started)
		st.Ready = running && v.Started && v.Ready
		out = append(out, st)
	}
	return out
}

// initReady marks an init container (not a sidecar) Ready once it has succeeded, as
// kubelet's prober manager does (UpdatePodStatus); a sidecar's readiness is that of a
// running container, already set.
func initReady(containers []v1.Container, statuses []v1.ContainerStatus) {
	for i := range statuses {
		if i >= len(containers) || isSidecar(&containers[i]) {
			continue
		}
		t := statuses[i].State.Terminated
		statuses[i].Ready = t != nil && t.ExitCode == 0
	}
}

// withTerminationReason fills a terminated state's reason the way kubelet does when the
// runtime gives none.
func withTerminationReason(st v1.ContainerState) v1.ContainerState {
	st = *st.DeepCopy()
	if t := st.Terminated; t != nil && t.Reason == "" {
		if t.ExitCode == 0 {
			t.Reason = "Completed"
		} else {
			t.Reason = "Error"
		}
	}
	return st
}

func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

func findStatus(statuses []v1.ContainerStatus, name string) (v1.ContainerStatus, bool) {
	for _, s := range statuses {
		if s.Name == name {
			return s, true
		}
	}
	return v1.ContainerStatus{}, false
}

// phase is kubelet's pod phase: Pending while init containers (or sidecars) have not
// finished starting, Running while some container runs or will be restarted, and, once
// every container stopped for good, Succeeded or Failed.
func phase(pod *v1.Pod, initStatuses, statuses []v1.ContainerStatus, terminal bool) v1.PodPhase {
	// Every spec container has a status here: one not created yet waits without a
	// previous termination, which counts as pending.
	pendingInit, pendingSidecars, failedInit := 0, 0, 0
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		st, _ := findStatus(initStatuses, c.Name)
		if isSidecar(c) {
			switch {
			case st.State.Running != nil:
				if st.Started == nil || !*st.Started {
					pendingSidecars++
				}
			case st.State.Waiting != nil && st.LastTerminationState.Terminated == nil:
				pendingSidecars++
			}
			continue
		}
		switch {
		case st.State.Terminated != nil:
			if st.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case st.State.Waiting != nil && st.LastTerminationState.Terminated != nil:
			if st.LastTerminationState.Terminated.ExitCode != 0 {
				failedInit++
			}
		default:
			pendingInit++
		}
	}
	unknown, running, stopped, succeeded := 0, 0, 0, 0
	for _, c := range pod.Spec.Containers {
		st, _ := findStatus(statuses, c.Name)
		switch {
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			stopped++
			if st.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case st.State.Waiting != nil:
			if st.LastTerminationState.Terminated != nil {
				stopped++
			}
		default:
			unknown++
		}
	}
	if failedInit > 0 && pod.Spec.RestartPolicy == v1.RestartPolicyNever {
		return v1.PodFailed
	}
	switch {
	case pendingInit > 0 || (pendingSidecars > 0 && !terminal):
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if terminal {
			if stopped == succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		if pod.Spec.RestartPolicy == v1.RestartPolicyAlways || pod.Spec.RestartPolicy == "" {
			// Every container is on its way to a restart.
			return v1.PodRunning
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		if pod.Spec.RestartPolicy == v1.RestartPolicyNever {
			return v1.PodFailed
		}
		// OnFailure: the failed containers restart.
		return v1.PodRunning
	default:
		return v1.PodPending
	}
}

// conditions returns kubelet's four conditions, in the order a real pod shows them,
// followed by the conditions kubelet does not own, kept from the old status.
func conditions(pod *v1.Pod, s *v1.PodStatus, sandboxReady bool, now time.Time) []v1.PodCondition {
	oldConds := pod.Status.Conditions
	sandbox := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse}
	if sandboxReady {
		sandbox.Status = v1.ConditionTrue
	}
	containersReady := containersReadyCondition(pod, s)
	out := []v1.PodCondition{
		sandbox,
		initializedCondition(pod, s),
		readyCondition(pod, containersReady),
		containersReady,
	}
	for i := range out {
		out[i].ObservedGeneration = pod.Generation
		out[i].LastTransitionTime = metav1.Time{Time: now}
		for _, o := range oldConds {
			if o.Type == out[i].Type && o.Status == out[i].Status {
				out[i].LastTransitionTime = o.LastTransitionTime
			}
		}
	}
	for _, o := range oldConds {
		switch o.Type {
		case v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady:
		default:
			out = append(out, *o.DeepCopy())
		}
	}
	return out
}

// list formats names as kubelet's messages do: "[a b]".
func list(names []string) string { return fmt.Sprintf("%s", names) }

func initializedCondition(pod *v1.Pod, s *v1.PodStatus) v1.PodCondition {
	done := v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
	if len(pod.Spec.InitContainers) == 0 {
		return done
	}
	// Compute gives every spec container a status, so none is of unknown status here.
	var incomplete []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		st, _ := findStatus(s.InitContainerStatuses, c.Name)
		if isSidecar(c) {
			if st.Started == nil || !*st.Started {
				incomplete = append(incomplete, c.Name)
			}
			continue
		}
		if st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
			incomplete = append(incomplete, c.Name)
		}
	}
	if s.Phase == v1.PodSucceeded {
		done.Reason = reasonPodCompleted
		return done
	}
	// Once a regular container has started, the pod was initialized; sidecars
	// restarting later do not undo that.
	for _, st := range s.ContainerStatuses {
		if st.State.Running != nil || st.State.Terminated != nil || st.LastTerminationState.Terminated != nil {
			return done
		}
	}
	if len(incomplete) == 0 {
		return done
	}
	return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionFalse, Reason: reasonContainersNotInitialized, Message: "containers with incomplete status: " + list(incomplete)}
}

func containersReadyCondition(pod *v1.Pod, s *v1.PodStatus) v1.PodCondition {
	var unready []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if st, _ := findStatus(s.InitContainerStatuses, c.Name); isSidecar(c) && !st.Ready {
			unready = append(unready, c.Name)
		}
	}
	for _, c := range pod.Spec.Containers {
		if st, _ := findStatus(s.ContainerStatuses, c.Name); !st.Ready {
			unready = append(unready, c.Name)
		}
	}
	switch {
	case s.Phase == v1.PodSucceeded:
		return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: reasonPodCompleted}
	case s.Phase == v1.PodFailed:
		return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: reasonPodFailed}
	case len(unready) > 0:
		return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: reasonContainersNotReady, Message: "containers with unready status: " + list(unready)}
	}
	return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue}
}

// readyCondition is ContainersReady, further held False by readiness gates whose
// condition (set by some controller in the pod's status) is missing or not True.
func readyCondition(pod *v1.Pod, containersReady v1.PodCondition) v1.PodCondition {
	if containersReady.Status != v1.ConditionTrue {
		return v1.PodCondition{Type: v1.PodReady, Status: containersReady.Status, Reason: containersReady.Reason, Message: containersReady.Message}
	}
	var msgs []string
	for _, rg := range pod.Spec.ReadinessGates {
		var found *v1.PodCondition
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == rg.ConditionType {
				found = &pod.Status.Conditions[i]
			}
		}
		switch {
		case found == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(rg.ConditionType)))
		case found.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(rg.ConditionType), found.Status))
		}
	}
	if len(msgs) > 0 {
		return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: reasonReadinessGatesNotReady, Message: strings.Join(msgs, ", ")}
	}
	return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
}

// QOSClass is the pod's quality-of-service class as Kubernetes defines it: BestEffort
// when no container requests or limits cpu or memory, Guaranteed when every container
// has cpu and memory limits equal to its requests, Burstable otherwise.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	guaranteed := true
	all := append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for name, q := range c.Resources.Requests {
			if name != v1.ResourceCPU && name != v1.ResourceMemory || q.IsZero() {
				continue
			}
			addMax(requests, name, q)
		}
		seen := 0
		for name, q := range c.Resources.Limits {
			if name != v1.ResourceCPU && name != v1.ResourceMemory || q.IsZero() {
				continue
			}
			seen++
			addMax(limits, name, q)
		}
		if seen != 2 {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for _, c := range all {
			for name, req := range c.Resources.Requests {
				if name != v1.ResourceCPU && name != v1.ResourceMemory {
					continue
				}
				if lim, ok := c.Resources.Limits[name]; !ok || lim.Cmp(req) != 0 {
					guaranteed = false
				}
			}
		}
	}
	if guaranteed {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// addMax records q for name, keeping the larger of two (only presence and equality
// matter for the class).
func addMax(l v1.ResourceList, name v1.ResourceName, q resource.Quantity) {
	if cur, ok := l[name]; !ok || q.Cmp(cur) > 0 {
		l[name] = q.DeepCopy()
	}
}
