package runtime

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ContainerRef names a running container instance and the cgroups that account for it,
// what the node's resource statistics (kubelet's /stats/summary and /metrics/resource)
// are read from.
type ContainerRef struct {
	// Namespace, PodName and PodUID identify the container's pod.
	Namespace, PodName string
	PodUID             types.UID
	// Name is the container's name in the pod spec (init containers that keep running,
	// sidecars, and ephemeral containers included).
	Name string
	// ID is the runc container id of the running instance.
	ID string
	// Cgroup is the instance's cgroup path (cgroupfs layout, below PodCgroup), which a
	// restart replaces with a new one.
	Cgroup string
	// PodCgroup is the pod's cgroup path: its containers and, for a pod that shares its
	// PID namespace, its sandbox container.
	PodCgroup string
	// StartedAt is when the instance started.
	StartedAt time.Time
	// PodStartTime is the pod's status.startTime as the agent keeps it.
	PodStartTime time.Time
}

// Containers lists the running container instances of the node's pods, in no
// particular order. It only reads: each pod is locked in turn, never the manager and a
// pod together, so it may wait for a pod that is being synced but cannot deadlock with
// it.
func (m *Manager) Containers() []ContainerRef {
	m.mu.Lock()
	pods := make([]*podState, 0, len(m.pods))
	for _, ps := range m.pods {
		pods = append(pods, ps)
	}
	m.mu.Unlock()
	var out []ContainerRef
	for _, ps := range pods {
		ps.mu.Lock()
		if ps.pod != nil {
			for _, cs := range ps.groups() {
				for name, c := range cs {
					if c.inst == nil {
						continue
					}
					out = append(out, ContainerRef{
						Namespace: ps.pod.Namespace, PodName: ps.pod.Name, PodUID: ps.pod.UID,
						Name: name, ID: c.inst.id, Cgroup: c.inst.cgroup, PodCgroup: m.podCgroup(ps.pod.UID),
						StartedAt: c.startedAt, PodStartTime: ps.startTime,
					})
				}
			}
		}
		ps.mu.Unlock()
	}
	return out
}

// NodeCgroup is the cgroup path of the node, the parent of its pods' cgroups.
func (m *Manager) NodeCgroup() string { return m.nodeCgroup() }
