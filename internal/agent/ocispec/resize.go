package ocispec

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
)

// ContainerUpdate is the cgroup of container c as an in-place resize writes it to the
// running container (kubelet's UpdateContainerResources): cpu shares from the request
// (the limit when only a limit is set), the CFS quota and period, and the memory limit
// (with swap held to it on cgroup v2), the same values a new container of c would get
// (containerResources). A missing limit is written as unlimited (-1) so that the
// update always says what the cgroup holds.
func ContainerUpdate(c *v1.Container, cgroup2 bool) *specs.LinuxResources {
	r := containerResources(c, 0, cgroup2)
	r.Unified = nil
	if r.CPU.Quota == nil {
		unlimited := int64(-1)
		r.CPU.Quota = &unlimited
	}
	if r.Memory == nil {
		unlimited := int64(-1)
		r.Memory = &specs.LinuxMemory{Limit: &unlimited}
	}
	return r
}
