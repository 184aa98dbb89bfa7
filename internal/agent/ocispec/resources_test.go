package ocispec

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	crv1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const nodeMemory = 8_000_000_000

func withResources(r v1.ResourceRequirements) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.Containers[0].Resources = r }
}

func withContainer(name string, r v1.ResourceRequirements) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: name, Resources: r}) }
}

func withInit(name string, sidecar bool, r v1.ResourceRequirements) func(*v1.Pod) {
	return func(p *v1.Pod) {
		c := v1.Container{Name: name, Resources: r}
		if sidecar {
			always := v1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
}

func TestQOSClass(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{"nothing", makePod(), v1.PodQOSBestEffort},
		{"requests equal limits", makePod(withResources(resources("1", "1Gi", "1", "1Gi"))), v1.PodQOSGuaranteed},
		{"limits only (no API defaulting)", makePod(withResources(resources("", "", "1", "1Gi"))), v1.PodQOSBurstable},
		{"cpu limit missing", makePod(withResources(resources("1", "1Gi", "", "1Gi"))), v1.PodQOSBurstable},
		{"requests below limits", makePod(withResources(resources("500m", "1Gi", "1", "1Gi"))), v1.PodQOSBurstable},
		{"request only", makePod(withResources(resources("100m", "", "", ""))), v1.PodQOSBurstable},
		{"second container best effort", makePod(withResources(resources("1", "1Gi", "1", "1Gi")), withContainer("b", v1.ResourceRequirements{})), v1.PodQOSBurstable},
		{"init container counts", makePod(withInit("init", false, resources("100m", "", "", ""))), v1.PodQOSBurstable},
		{"status wins", makePod(func(p *v1.Pod) { p.Status.QOSClass = v1.PodQOSGuaranteed }), v1.PodQOSGuaranteed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := QOSClass(tc.pod); got != tc.want {
				t.Errorf("QOSClass = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestOOMScoreAdj(t *testing.T) {
	prio := int32(2000001000)
	for _, tc := range []struct {
		name      string
		pod       *v1.Pod
		container string
		want      int
	}{
		{"best effort", makePod(), "app", 1000},
		{"guaranteed", makePod(withResources(resources("1", "1Gi", "1", "1Gi"))), "app", -997},
		// kubelet's examples: 1000 - 1000*request/capacity.
		{"burstable half the node", makePod(withResources(resources("", "4000000000", "", ""))), "app", 500},
		{"burstable a tenth", makePod(withResources(resources("", "800000000", "", ""))), "app", 900},
		{"burstable no memory request: 999 not 1000", makePod(withResources(resources("100m", "", "", ""))), "app", 999},
		{"burstable whole node: clamped to 3", makePod(withResources(resources("", "8000000000", "", ""))), "app", 3},
		{"burstable above the node: clamped to 3", makePod(withResources(resources("", "16000000000", "", ""))), "app", 3},
		{"node critical best effort", makePod(func(p *v1.Pod) {
			p.Spec.PriorityClassName = "system-node-critical"
			p.Spec.Priority = &prio
		}), "app", -997},
		{"sidecar capped by the smallest regular container", makePod(
			withResources(resources("", "4000000000", "", "")),
			withContainer("b", resources("", "6000000000", "", "")),
			withInit("proxy", true, resources("", "800000000", "", "")),
		), "proxy", 500},
		{"sidecar with a bigger request keeps its own", makePod(
			withResources(resources("", "800000000", "", "")),
			withInit("proxy", true, resources("", "4000000000", "", "")),
		), "proxy", 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c *v1.Container
			for _, list := range [][]v1.Container{tc.pod.Spec.Containers, tc.pod.Spec.InitContainers} {
				for i := range list {
					if list[i].Name == tc.container {
						c = &list[i]
					}
				}
			}
			if got := OOMScoreAdj(tc.pod, c, nodeMemory); got != tc.want {
				t.Errorf("OOMScoreAdj = %d, want %d", got, tc.want)
			}
		})
	}
}

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

func TestContainerResources(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       v1.ResourceRequirements
		pids    int64
		cgroup2 bool
		want    *specs.LinuxResources
	}{
		{name: "best effort: 2 shares", want: &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: u64(2), Period: u64(100000)}}},
		{name: "request 250m", r: resources("250m", "", "", ""), want: &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: u64(256), Period: u64(100000)}}},
		{name: "tiny request: at least 2", r: resources("1m", "", "", ""), want: &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: u64(2), Period: u64(100000)}}},
		{name: "limit only: shares from limit", r: resources("", "", "1500m", "128Mi"), want: &specs.LinuxResources{
			CPU:    &specs.LinuxCPU{Shares: u64(1536), Period: u64(100000), Quota: i64(150000)},
			Memory: &specs.LinuxMemory{Limit: i64(128 << 20)},
		}},
		{name: "tiny limit: quota at least 1ms", r: resources("1m", "", "5m", ""), want: &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: u64(2), Period: u64(100000), Quota: i64(1000)}}},
		{name: "pids and cgroup v2", r: resources("", "", "", "64Mi"), pids: 1024, cgroup2: true, want: &specs.LinuxResources{
			CPU:     &specs.LinuxCPU{Shares: u64(2), Period: u64(100000)},
			Memory:  &specs.LinuxMemory{Limit: i64(64 << 20), Swap: i64(64 << 20)},
			Pids:    &specs.LinuxPids{Limit: i64(1024)},
			Unified: map[string]string{"memory.oom.group": "1"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := containerResources(&v1.Container{Resources: tc.r}, tc.pids, tc.cgroup2)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("containerResources (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodResources(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want *specs.LinuxResources
	}{
		{"best effort", makePod(), &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: u64(2)}}},
		{"guaranteed, two containers", makePod(
			withResources(resources("500m", "256Mi", "500m", "256Mi")),
			withContainer("b", resources("250m", "128Mi", "250m", "128Mi")),
		), &specs.LinuxResources{
			CPU:    &specs.LinuxCPU{Shares: u64(768), Quota: i64(75000), Period: u64(100000)},
			Memory: &specs.LinuxMemory{Limit: i64(384 << 20)},
		}},
		{"burstable, one container without limits: no quota, no memory limit", makePod(
			withResources(resources("500m", "256Mi", "1", "512Mi")),
			withContainer("b", resources("100m", "", "", "")),
		), &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: u64(614)}}},
		{"burstable, all limited", makePod(
			withResources(resources("500m", "256Mi", "1", "512Mi")),
		), &specs.LinuxResources{
			CPU:    &specs.LinuxCPU{Shares: u64(512), Quota: i64(100000), Period: u64(100000)},
			Memory: &specs.LinuxMemory{Limit: i64(512 << 20)},
		}},
		{"init container bigger than the rest wins", makePod(
			withResources(resources("100m", "", "", "")),
			withInit("init", false, resources("2", "", "", "")),
		), &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: u64(2048)}}},
		{"sidecar adds up and counts for later init containers", makePod(
			withResources(resources("100m", "", "", "")),
			withInit("proxy", true, resources("200m", "", "", "")),
			withInit("init", false, resources("250m", "", "", "")),
		), &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: u64(460)}}},
		{"overhead", makePod(
			withResources(resources("500m", "256Mi", "500m", "256Mi")),
			func(p *v1.Pod) { p.Spec.Overhead = resources("100m", "64Mi", "", "").Requests },
		), &specs.LinuxResources{
			CPU:    &specs.LinuxCPU{Shares: u64(614), Quota: i64(60000), Period: u64(100000)},
			Memory: &specs.LinuxMemory{Limit: i64(320 << 20)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PodResources(tc.pod)); diff != "" {
				t.Errorf("PodResources (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMinOOMScoreAdj: on a host where runc cannot lower a score (no CAP_SYS_RESOURCE),
// a Guaranteed container's -997 is raised to the floor, so that runc can start it; a
// score above the floor is kept, and without a floor kubelet's score stands.
func TestMinOOMScoreAdj(t *testing.T) {
	q := func(s string) v1.ResourceList {
		return v1.ResourceList{v1.ResourceCPU: resource.MustParse(s), v1.ResourceMemory: resource.MustParse("64Mi")}
	}
	guaranteed := makePod(withResources(v1.ResourceRequirements{Requests: q("100m"), Limits: q("100m")}))
	bestEffort := makePod()
	for _, tc := range []struct {
		name  string
		pod   *v1.Pod
		floor *int
		want  int
	}{
		{"guaranteed, no floor", guaranteed, nil, -997},
		{"guaranteed, floor 0", guaranteed, ptr(0), 0},
		{"guaranteed, floor -500", guaranteed, ptr(-500), -500},
		{"best effort, floor 0", bestEffort, ptr(0), 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := makeInput(t, tc.pod, crv1.Config{Cmd: []string{"sh"}})
			in.NodeMemory = nodeMemory
			in.MinOOMScoreAdj = tc.floor
			got := mustSpec(t, in).Process.OOMScoreAdj
			if got == nil || *got != tc.want {
				t.Errorf("oomScoreAdj %v, want %d", got, tc.want)
			}
		})
	}
	if floor, err := MinOOMScoreAdj(allCaps); err != nil || floor != nil {
		t.Errorf("MinOOMScoreAdj with CAP_SYS_RESOURCE = %v, %v; want no floor", floor, err)
	}
	floor, err := MinOOMScoreAdj([]string{"CAP_CHOWN"})
	own, _ := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil || floor == nil || fmt.Sprint(*floor) != strings.TrimSpace(string(own)) {
		t.Errorf("MinOOMScoreAdj without CAP_SYS_RESOURCE = %v, %v; want this process's score %s", floor, err, own)
	}
}
