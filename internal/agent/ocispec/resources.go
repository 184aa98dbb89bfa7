package ocispec

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
)

// CPU and OOM constants of kubelet (pkg/kubelet/cm/helpers_linux.go, pkg/kubelet/qos).
const (
	minShares     = 2
	maxShares     = 262144
	sharesPerCPU  = 1024
	milliPerCPU   = 1000
	quotaPeriod   = 100000 // µs, kubelet's default cpuCFSQuotaPeriod
	minQuota      = 1000   // µs, the kernel's minimum cfs quota
	guaranteedOOM = -997
	bestEffortOOM = 1000
	// criticalPriority is scheduling.SystemCriticalPriority.
	criticalPriority = 2000000000
)

// QOSClass is the pod's quality of service class as kubelet's GetPodQOS computes it:
// pod.Status.QOSClass when set, otherwise from the cpu and memory requests and limits
// of all containers, init containers included: none anywhere is BestEffort; every
// container with both cpu and memory limits and the summed requests equal to the summed
// limits is Guaranteed; anything else Burstable.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	requests := map[v1.ResourceName]int64{}
	limits := map[v1.ResourceName]int64{}
	guaranteed := true
	all := append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			if q, ok := c.Resources.Requests[name]; ok && !q.IsZero() {
				requests[name] += quantity(name, c.Resources.Requests)
			}
		}
		found := 0
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			if q, ok := c.Resources.Limits[name]; ok && !q.IsZero() {
				limits[name] += quantity(name, c.Resources.Limits)
				found++
			}
		}
		if found != 2 {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed && len(requests) == len(limits) {
		for name, r := range requests {
			if l, ok := limits[name]; !ok || l != r {
				guaranteed = false
				break
			}
		}
		if guaranteed {
			return v1.PodQOSGuaranteed
		}
	}
	return v1.PodQOSBurstable
}

// quantity is a cpu amount in millicores or any other resource in its unit.
func quantity(name v1.ResourceName, l v1.ResourceList) int64 {
	q, ok := l[name]
	if !ok {
		return 0
	}
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// OOMScoreAdj is the oom_score_adj kubelet gives container c of pod
// (pkg/kubelet/qos/policy.go): -997 for Guaranteed pods and node-critical pods, 1000
// for BestEffort, and for Burstable 1000 - 1000*memoryRequest/nodeMemory, where a
// sidecar (an init container with restartPolicy Always) uses at most the score of the
// pod's regular container with the smallest request, clamped to [3, 999] so a
// Burstable container always outranks a Guaranteed one and is outranked by BestEffort.
// A nodeMemory <= 0 counts the request as nothing.
func OOMScoreAdj(pod *v1.Pod, c *v1.Container, nodeMemory int64) int {
	if nodeCritical(pod) {
		return guaranteedOOM
	}
	switch QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		return guaranteedOOM
	case v1.PodQOSBestEffort:
		return bestEffortOOM
	}
	score := func(request int64) int64 {
		if nodeMemory <= 0 {
			return 1000
		}
		return 1000 - 1000*request/nodeMemory
	}
	adj := score(quantity(v1.ResourceMemory, c.Resources.Requests))
	if sidecar(pod, c) && len(pod.Spec.Containers) > 0 {
		least := quantity(v1.ResourceMemory, pod.Spec.Containers[0].Resources.Requests)
		for _, rc := range pod.Spec.Containers[1:] {
			least = min(least, quantity(v1.ResourceMemory, rc.Resources.Requests))
		}
		adj = min(adj, score(least))
	}
	if adj < 1000+guaranteedOOM {
		return 1000 + guaranteedOOM
	}
	if adj == bestEffortOOM {
		return bestEffortOOM - 1
	}
	return int(adj)
}

// nodeCritical is kubelet's IsNodeCriticalPod: a critical pod (mirror pod, or priority
// at least system-critical) of priority class system-node-critical.
func nodeCritical(pod *v1.Pod) bool {
	if pod.Spec.PriorityClassName != "system-node-critical" {
		return false
	}
	_, mirror := pod.Annotations[v1.MirrorPodAnnotationKey]
	return mirror || (pod.Spec.Priority != nil && *pod.Spec.Priority >= criticalPriority)
}

// sidecar reports whether c is one of pod's restartable init containers.
func sidecar(pod *v1.Pod, c *v1.Container) bool {
	if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
		return false
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			return true
		}
	}
	return false
}

// milliCPUToShares is kubelet's MilliCPUToShares: 1024 shares a CPU, in [2, 262144].
func milliCPUToShares(milli int64) uint64 {
	if milli == 0 {
		return minShares
	}
	shares := milli * sharesPerCPU / milliPerCPU
	return uint64(min(max(shares, minShares), maxShares))
}

// milliCPUToQuota is kubelet's MilliCPUToQuota: 0 (no quota) for no limit, else the
// limit's share of period, at least 1ms.
func milliCPUToQuota(milli, period int64) int64 {
	if milli == 0 {
		return 0
	}
	return max(milli*period/milliPerCPU, minQuota)
}

// containerResources is the cgroup of container c as kubelet's calculateLinuxResources
// asks for it and containerd's WithResources writes it: shares from the cpu request (the
// limit when only a limit is set), the CFS period always and a quota for a cpu limit,
// the memory limit, and pids.max when pidsLimit > 0. cgroup2 adds memory.oom.group=1
// (kubelet's singleProcessOOMKill defaults to false on cgroup v2, so an OOM kill takes
// the whole container) and no swap beyond the memory limit.
func containerResources(c *v1.Container, pidsLimit int64, cgroup2 bool) *specs.LinuxResources {
	cpuRequest, hasRequest := c.Resources.Requests[v1.ResourceCPU]
	cpuLimit, hasLimit := c.Resources.Limits[v1.ResourceCPU]
	var shares uint64
	if !hasRequest && hasLimit {
		shares = milliCPUToShares(cpuLimit.MilliValue())
	} else {
		shares = milliCPUToShares(cpuRequest.MilliValue())
	}
	period := uint64(quotaPeriod)
	r := &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: &shares, Period: &period}}
	if q := milliCPUToQuota(cpuLimit.MilliValue(), quotaPeriod); q != 0 {
		r.CPU.Quota = &q
	}
	if m := quantity(v1.ResourceMemory, c.Resources.Limits); m != 0 {
		r.Memory = &specs.LinuxMemory{Limit: &m}
		if cgroup2 {
			// containerd sets memory+swap to the limit (no swap) when the swap
			// controller exists, which is kubelet's default NoSwap; runc ignores it
			// on a cgroup v2 node without swap accounting.
			swap := m
			r.Memory.Swap = &swap
		}
	}
	if pidsLimit > 0 {
		r.Pids = &specs.LinuxPids{Limit: &pidsLimit}
	}
	if cgroup2 {
		r.Unified = map[string]string{"memory.oom.group": "1"}
	}
	return r
}

// PodResources is the pod-level cgroup as kubelet's ResourceConfigForPod computes it:
// requests and limits summed over the containers and sidecars, an init container
// counting by its maximum with the sidecars started before it, plus the pod's overhead.
// Guaranteed: shares, quota and period, memory limit. Burstable: shares; quota and
// period only when every container has a cpu limit; memory limit only when every
// container has one. BestEffort: 2 shares. Hugepages and the pod pids limit (a kubelet
// flag, not the pod's) are left out.
func PodResources(pod *v1.Pod) *specs.LinuxResources {
	requests := podSum(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Requests })
	cpuLimitsDeclared, memLimitsDeclared := true, true
	limits := podSum(pod, func(c *v1.Container) v1.ResourceList {
		if q := c.Resources.Limits[v1.ResourceCPU]; q.IsZero() {
			cpuLimitsDeclared = false
		}
		if q := c.Resources.Limits[v1.ResourceMemory]; q.IsZero() {
			memLimitsDeclared = false
		}
		return c.Resources.Limits
	})
	for name, q := range pod.Spec.Overhead {
		if name != v1.ResourceCPU && name != v1.ResourceMemory {
			continue
		}
		requests[name] += quantity(name, pod.Spec.Overhead)
		if _, ok := limits[name]; ok {
			limits[name] += quantity(name, v1.ResourceList{name: q})
		}
	}
	shares := milliCPUToShares(requests[v1.ResourceCPU])
	quota := milliCPUToQuota(limits[v1.ResourceCPU], quotaPeriod)
	period := uint64(quotaPeriod)
	mem := limits[v1.ResourceMemory]
	r := &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: &shares}}
	switch QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		r.CPU.Quota, r.CPU.Period = &quota, &period
		r.Memory = &specs.LinuxMemory{Limit: &mem}
	case v1.PodQOSBurstable:
		if cpuLimitsDeclared {
			r.CPU.Quota, r.CPU.Period = &quota, &period
		}
		if memLimitsDeclared {
			r.Memory = &specs.LinuxMemory{Limit: &mem}
		}
	default:
		s := uint64(minShares)
		r.CPU.Shares = &s
	}
	return r
}

// podSum is kubelet's PodRequests/PodLimits over cpu and memory (without overhead):
// regular containers and sidecars add up; each other init container needs its own
// amount plus the sidecars started before it, and the pod needs the larger of the two.
func podSum(pod *v1.Pod, list func(*v1.Container) v1.ResourceList) map[v1.ResourceName]int64 {
	names := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}
	sum := map[v1.ResourceName]int64{}
	add := func(dst map[v1.ResourceName]int64, l v1.ResourceList) {
		for _, n := range names {
			if _, ok := l[n]; ok {
				dst[n] += quantity(n, l)
			}
		}
	}
	for i := range pod.Spec.Containers {
		add(sum, list(&pod.Spec.Containers[i]))
	}
	sidecars := map[v1.ResourceName]int64{}
	initMax := map[v1.ResourceName]int64{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		l := list(c)
		need := map[v1.ResourceName]int64{}
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(sum, l)
			add(sidecars, l)
			for n, v := range sidecars {
				need[n] = v
			}
		} else {
			add(need, l)
			for n, v := range sidecars {
				need[n] += v
			}
		}
		for n, v := range need {
			if cur, ok := initMax[n]; !ok || v > cur {
				initMax[n] = v
			}
		}
	}
	for n, v := range initMax {
		if cur, ok := sum[n]; !ok || v > cur {
			sum[n] = v
		}
	}
	return sum
}
