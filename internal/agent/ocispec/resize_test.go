package ocispec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
)

// The values an in-place resize writes are those kubelet computes and the e2e spec
// reads back: cpu.max's quota is MilliCPUToQuota of the limit (at least 1ms), the
// memory limit in bytes, and an absent limit is written as unlimited.
func TestContainerUpdate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       v1.ResourceRequirements
		cgroup2 bool
		want    *specs.LinuxResources
	}{
		{name: "request only: no quota, no memory limit", r: resources("20m", "35Mi", "", ""), want: &specs.LinuxResources{
			CPU:    &specs.LinuxCPU{Shares: u64(20), Period: u64(100000), Quota: i64(-1)},
			Memory: &specs.LinuxMemory{Limit: i64(-1)},
		}},
		{name: "limit added", r: resources("25m", "", "35m", ""), want: &specs.LinuxResources{
			CPU:    &specs.LinuxCPU{Shares: u64(25), Period: u64(100000), Quota: i64(3500)},
			Memory: &specs.LinuxMemory{Limit: i64(-1)},
		}},
		{name: "equivalent tiny values", r: resources("1m", "", "5m", ""), want: &specs.LinuxResources{
			CPU:    &specs.LinuxCPU{Shares: u64(2), Period: u64(100000), Quota: i64(1000)},
			Memory: &specs.LinuxMemory{Limit: i64(-1)},
		}},
		{name: "memory limit on cgroup v2: no swap, no oom group", r: resources("", "30Mi", "", "50Mi"), cgroup2: true, want: &specs.LinuxResources{
			CPU:    &specs.LinuxCPU{Shares: u64(2), Period: u64(100000), Quota: i64(-1)},
			Memory: &specs.LinuxMemory{Limit: i64(50 << 20), Swap: i64(50 << 20)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ContainerUpdate(&v1.Container{Resources: tc.r}, tc.cgroup2)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ContainerUpdate (-want +got):\n%s", diff)
			}
		})
	}
}
