package scheduler

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Requests the scheduler assumes for a container that names none, when it ranks
// nodes (never when it checks fit), as Kubernetes does so that request-less
// pods still spread instead of piling onto the first node.
const (
	defaultMilliCPURequest = 100               // 0.1 core
	defaultMemoryRequest   = 200 * 1024 * 1024 // 200 MiB
)

// resources is a pod's request or a node's capacity in the units the filters
// compare: milli-cores for cpu, bytes for memory and ephemeral storage, counts
// for extended resources.
type resources struct {
	milliCPU  int64
	memory    int64
	ephemeral int64
	scalar    map[v1.ResourceName]int64
}

// quantityOf converts one resource quantity to the unit resources uses.
func quantityOf(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// isScalar reports whether a resource other than cpu, memory, ephemeral
// storage and pods counts toward fit: extended resources, hugepages and
// attachable volumes.
func isScalar(name v1.ResourceName) bool {
	s := string(name)
	return strings.HasPrefix(s, v1.ResourceHugePagesPrefix) ||
		strings.HasPrefix(s, v1.ResourceAttachableVolumesPrefix) ||
		isExtended(s)
}

// isExtended reports whether s names an extended resource: domain-qualified,
// outside kubernetes.io, and usable in a quota as "requests.<name>".
func isExtended(s string) bool {
	if !strings.Contains(s, "/") || strings.Contains(s, "kubernetes.io/") || strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+s)) == 0
}

// add accumulates a resource list.
func (r *resources) add(list v1.ResourceList) {
	for name, q := range list {
		r.set(name, r.get(name)+quantityOf(name, q))
	}
}

// setMax raises every resource of r to at least the one in o.
func (r *resources) setMax(o resources) {
	r.milliCPU = max(r.milliCPU, o.milliCPU)
	r.memory = max(r.memory, o.memory)
	r.ephemeral = max(r.ephemeral, o.ephemeral)
	for name, v := range o.scalar {
		r.set(name, max(r.scalar[name], v))
	}
}

// plus returns r + o.
func (r resources) plus(o resources) resources {
	out := resources{milliCPU: r.milliCPU + o.milliCPU, memory: r.memory + o.memory, ephemeral: r.ephemeral + o.ephemeral}
	for name, v := range r.scalar {
		out.set(name, v)
	}
	for name, v := range o.scalar {
		out.set(name, out.scalar[name]+v)
	}
	return out
}

func (r *resources) get(name v1.ResourceName) int64 {
	switch name {
	case v1.ResourceCPU:
		return r.milliCPU
	case v1.ResourceMemory:
		return r.memory
	case v1.ResourceEphemeralStorage:
		return r.ephemeral
	}
	return r.scalar[name]
}

func (r *resources) set(name v1.ResourceName, v int64) {
	switch name {
	case v1.ResourceCPU:
		r.milliCPU = v
	case v1.ResourceMemory:
		r.memory = v
	case v1.ResourceEphemeralStorage:
		r.ephemeral = v
	default:
		if !isScalar(name) {
			return
		}
		if r.scalar == nil {
			r.scalar = map[v1.ResourceName]int64{}
		}
		r.scalar[name] = v
	}
}

// podRequests is what a pod occupies on its node while it runs, computed as
// Kubernetes does: regular containers and restartable init containers
// (sidecars) run together and add up; each ordinary init container runs alone
// beside the sidecars started before it, so the pod needs the larger of the
// two; the runtime overhead comes on top. With nonZero, cpu and memory that a
// container leaves unset count as the scheduler's defaults.
func podRequests(pod *v1.Pod, nonZero bool) resources {
	var sum resources
	for i := range pod.Spec.Containers {
		sum = sum.plus(containerRequests(&pod.Spec.Containers[i], nonZero))
	}
	var sidecars, initPeak resources
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		req := containerRequests(c, nonZero)
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sum = sum.plus(req)
			sidecars = sidecars.plus(req)
			initPeak.setMax(sidecars)
			continue
		}
		initPeak.setMax(req.plus(sidecars))
	}
	sum.setMax(initPeak)
	var overhead resources
	overhead.add(pod.Spec.Overhead)
	return sum.plus(overhead)
}

func containerRequests(c *v1.Container, nonZero bool) resources {
	var r resources
	r.add(c.Resources.Requests)
	if nonZero {
		if _, ok := c.Resources.Requests[v1.ResourceCPU]; !ok {
			r.milliCPU = defaultMilliCPURequest
		}
		if _, ok := c.Resources.Requests[v1.ResourceMemory]; !ok {
			r.memory = defaultMemoryRequest
		}
	}
	return r
}
