package runtime

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func reqs(cpu, mem string) v1.ResourceList {
	l := v1.ResourceList{}
	if cpu != "" {
		l[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return l
}

// resizeFit says what kubelet's admission says for a resize: cpu first, in millicores,
// then memory in bytes, against the allocatable less the other pods' requests.
func TestResizeFit(t *testing.T) {
	const alloc, mem = 4000, 8 << 30
	for _, tc := range []struct {
		name           string
		requests       v1.ResourceList
		usedCPU, usedM int64
		want           string
	}{
		{name: "fits", requests: reqs("1", "1Gi"), usedCPU: 2000, usedM: 1 << 30},
		{name: "fits exactly", requests: reqs("2", ""), usedCPU: 2000},
		{name: "cpu beyond node capacity", requests: reqs("5", "1Gi"), usedCPU: 2000,
			want: "Node didn't have enough resource: cpu, requested: 5000, used: 2000, capacity: 4000"},
		{name: "cpu beyond what the others leave", requests: reqs("2500m", ""), usedCPU: 2000,
			want: "Node didn't have enough resource: cpu, requested: 2500, used: 2000, capacity: 4000"},
		{name: "memory", requests: reqs("100m", "8Gi"), usedM: 1 << 30,
			want: "Node didn't have enough resource: memory, requested: 8589934592, used: 1073741824, capacity: 8589934592"},
		{name: "no requests always fit", requests: reqs("", ""), usedCPU: 9000, usedM: 9 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resizeFit(tc.requests, tc.usedCPU, tc.usedM, alloc, mem); got != tc.want {
				t.Errorf("resizeFit = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNeedsRestart(t *testing.T) {
	restartMemory := &v1.Container{ResizePolicy: []v1.ContainerResizePolicy{
		{ResourceName: v1.ResourceCPU, RestartPolicy: v1.NotRequired},
		{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer},
	}}
	old := v1.ResourceRequirements{Requests: reqs("100m", "32Mi"), Limits: reqs("", "64Mi")}
	for _, tc := range []struct {
		name string
		c    *v1.Container
		next v1.ResourceRequirements
		want bool
	}{
		{name: "cpu only, NotRequired", c: restartMemory, next: v1.ResourceRequirements{Requests: reqs("200m", "32Mi"), Limits: reqs("", "64Mi")}},
		{name: "memory limit, RestartContainer", c: restartMemory, next: v1.ResourceRequirements{Requests: reqs("100m", "32Mi"), Limits: reqs("", "48Mi")}, want: true},
		{name: "equivalent quantity", c: restartMemory, next: v1.ResourceRequirements{Requests: reqs("0.1", "32Mi"), Limits: reqs("", "67108864")}},
		{name: "no policy: in place", c: &v1.Container{}, next: v1.ResourceRequirements{Requests: reqs("100m", "64Mi"), Limits: reqs("", "64Mi")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := needsRestart(tc.c, old, tc.next); got != tc.want {
				t.Errorf("needsRestart = %v, want %v", got, tc.want)
			}
		})
	}
}

// The pod cgroup is first widened to admit both the old and the new containers.
func TestWidest(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	i := func(v int64) *int64 { return &v }
	period := u(100000)
	a := &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: u(100), Quota: i(20000), Period: period}, Memory: &specs.LinuxMemory{Limit: i(64 << 20)}}
	b := &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: u(50), Quota: i(10000), Period: period}, Memory: &specs.LinuxMemory{Limit: i(128 << 20)}}
	want := &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: u(50), Quota: i(20000), Period: period}, Memory: &specs.LinuxMemory{Limit: i(128 << 20)}}
	if diff := cmp.Diff(want, widest(a, b)); diff != "" {
		t.Errorf("widest (-want +got):\n%s", diff)
	}
	noLimits := &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: u(2)}}
	if diff := cmp.Diff(noLimits, widest(a, noLimits)); diff != "" {
		t.Errorf("widest with an unlimited side (-want +got):\n%s", diff)
	}
}

// A new agent takes the allocation an earlier one reported, not a pending resize.
func TestAllocatedFromStatus(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{
		{Name: "app", Resources: v1.ResourceRequirements{Requests: reqs("500m", "32Mi"), Limits: reqs("1", "")}},
		{Name: "new", Resources: v1.ResourceRequirements{Requests: reqs("10m", "")}},
	}}}
	pod.Status.ContainerStatuses = []v1.ContainerStatus{
		{Name: "app", AllocatedResources: reqs("100m", "32Mi"), Resources: &v1.ResourceRequirements{Requests: reqs("100m", "32Mi"), Limits: reqs("200m", "")}},
		{Name: "new"},
	}
	want := map[string]v1.ResourceRequirements{
		"app": {Requests: reqs("100m", "32Mi"), Limits: reqs("200m", "")},
		"new": {Requests: reqs("10m", "")},
	}
	if diff := cmp.Diff(want, allocatedFromStatus(pod)); diff != "" {
		t.Errorf("allocatedFromStatus (-want +got):\n%s", diff)
	}
}
