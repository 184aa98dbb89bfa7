package hpa

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

var now = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

// makePod is a running, ready pod of app=web started 10 minutes ago whose one container
// requests 100m CPU and 64Mi, after mutate.
func makePod(name string, mutate func(*v1.Pod)) *v1.Pod {
	started := metav1.NewTime(now.Add(-10 * time.Minute))
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "web", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")}}}}},
		Status: v1.PodStatus{
			Phase:      v1.PodRunning,
			StartTime:  &started,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(started.Add(5 * time.Second))}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func makePods(n int) []*v1.Pod {
	var pods []*v1.Pod
	for i := range n {
		pods = append(pods, makePod(fmt.Sprintf("web-%d", i), nil))
	}
	return pods
}

// cpu is a podMetrics of millicores per pod name, sampled a minute ago over 30s.
func cpu(usage map[string]int64) podMetrics {
	m := podMetrics{}
	for name, v := range usage {
		m[name] = podMetric{value: v, timestamp: now.Add(-time.Minute), window: 30 * time.Second}
	}
	return m
}

var defaultReadiness = readiness{cpuInitializationPeriod: DefaultCPUInitializationPeriod, initialReadinessDelay: DefaultInitialReadinessDelay}

func TestUtilizationReplicas(t *testing.T) {
	tol := tolerances{0.1, 0.1}
	tests := []struct {
		name        string
		current     int32
		pods        []*v1.Pod
		usage       map[string]int64
		target      int32
		tolerances  *tolerances
		want        int32
		wantUtil    int32
		wantRaw     int64
		wantErr     string
		mutatePods  func([]*v1.Pod)
		containerOf string
	}{
		{name: "scale up", current: 1, pods: makePods(1), usage: map[string]int64{"web-0": 100}, target: 50, want: 2, wantUtil: 100, wantRaw: 100},
		{name: "scale up three pods", current: 3, pods: makePods(3), usage: map[string]int64{"web-0": 90, "web-1": 80, "web-2": 100}, target: 50, want: 6, wantUtil: 90, wantRaw: 90},
		{name: "scale down", current: 4, pods: makePods(4), usage: map[string]int64{"web-0": 10, "web-1": 10, "web-2": 20, "web-3": 0}, target: 50, want: 1, wantUtil: 10, wantRaw: 10},
		{name: "within tolerance up", current: 2, pods: makePods(2), usage: map[string]int64{"web-0": 54, "web-1": 54}, target: 50, want: 2, wantUtil: 54, wantRaw: 54},
		{name: "within tolerance down", current: 2, pods: makePods(2), usage: map[string]int64{"web-0": 46, "web-1": 45}, target: 50, want: 2, wantUtil: 45, wantRaw: 45},
		{name: "just beyond tolerance", current: 2, pods: makePods(2), usage: map[string]int64{"web-0": 56, "web-1": 56}, target: 50, want: 3, wantUtil: 56, wantRaw: 56},
		{name: "a larger scale-up tolerance keeps the size", current: 2, pods: makePods(2), usage: map[string]int64{"web-0": 70, "web-1": 70}, target: 50,
			tolerances: &tolerances{0.1, 0.5}, want: 2, wantUtil: 70, wantRaw: 70},
		{name: "missing pod counts as using nothing on a scale-up", current: 3, pods: makePods(3), usage: map[string]int64{"web-0": 150, "web-1": 150}, target: 50,
			want: 6, wantUtil: 150, wantRaw: 150},
		{name: "missing pod counts as using its request on a scale-down", current: 3, pods: makePods(3), usage: map[string]int64{"web-0": 10, "web-1": 10}, target: 50,
			want: 3, wantUtil: 10, wantRaw: 10}, // with web-2 at its request: 40% of 50%, ceil(0.8*3) = 3
		{name: "missing pod that would flip the direction keeps the size", current: 2, pods: makePods(2), usage: map[string]int64{"web-0": 60}, target: 50,
			want: 2, wantUtil: 60, wantRaw: 60},
		{name: "pending pod counts as using nothing on a scale-up", current: 2, pods: makePods(2), usage: map[string]int64{"web-0": 200}, target: 50,
			mutatePods: func(p []*v1.Pod) { p[1].Status.Phase = v1.PodPending }, want: 4, wantUtil: 200, wantRaw: 200},
		{name: "unready pods counted as idle can cancel a scale-up", current: 2, pods: makePods(2), usage: map[string]int64{"web-0": 100, "web-1": 500}, target: 50,
			mutatePods: func(p []*v1.Pod) { p[1].Status.Conditions = nil }, want: 2, wantUtil: 100, wantRaw: 100},
		{name: "pending pod is left out on a scale-down", current: 2, pods: makePods(2), usage: map[string]int64{"web-0": 10}, target: 50,
			mutatePods: func(p []*v1.Pod) { p[1].Status.Phase = v1.PodPending }, want: 1, wantUtil: 10, wantRaw: 10},
		{name: "cpu of a pod not ready within its initialization period is unready", current: 2, pods: makePods(2), usage: map[string]int64{"web-0": 300, "web-1": 500}, target: 50,
			mutatePods: func(p []*v1.Pod) {
				start := metav1.NewTime(now.Add(-time.Minute))
				p[1].Status.StartTime = &start
				p[1].Status.Conditions[0].Status = v1.ConditionFalse
			}, want: 6, wantUtil: 300, wantRaw: 300},
		{name: "cpu sampled before the pod turned ready is unready", current: 2, pods: makePods(2), usage: map[string]int64{"web-0": 300, "web-1": 500}, target: 50,
			mutatePods: func(p []*v1.Pod) {
				start := metav1.NewTime(now.Add(-2 * time.Minute))
				p[1].Status.StartTime = &start
				p[1].Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-80 * time.Second))
			}, want: 6, wantUtil: 300, wantRaw: 300},
		{name: "a pod never ready after its initialization period is unready", current: 2, pods: makePods(2), usage: map[string]int64{"web-0": 300, "web-1": 500}, target: 50,
			mutatePods: func(p []*v1.Pod) {
				p[1].Status.Conditions[0].Status = v1.ConditionFalse
				p[1].Status.Conditions[0].LastTransitionTime = *p[1].Status.StartTime
			}, want: 6, wantUtil: 300, wantRaw: 300},
		{name: "a pod that was ready and is not now still counts", current: 2, pods: makePods(2), usage: map[string]int64{"web-0": 100, "web-1": 100}, target: 50,
			mutatePods: func(p []*v1.Pod) {
				p[1].Status.Conditions[0].Status = v1.ConditionFalse
				p[1].Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-time.Minute))
			}, want: 4, wantUtil: 100, wantRaw: 100},
		{name: "deleted and failed pods do not count", current: 3, pods: makePods(3), usage: map[string]int64{"web-0": 100, "web-1": 900, "web-2": 900}, target: 100,
			mutatePods: func(p []*v1.Pod) {
				p[1].DeletionTimestamp = &metav1.Time{Time: now}
				p[2].Status.Phase = v1.PodFailed
			}, want: 3, wantUtil: 100, wantRaw: 100},
		{name: "no usable metrics", current: 1, pods: makePods(1), usage: map[string]int64{"web-0": 100}, target: 50,
			mutatePods: func(p []*v1.Pod) { p[0].Status.Phase = v1.PodPending },
			wantErr:    "did not receive metrics for targeted pods (pods might be unready)"},
		{name: "a container without a request", current: 1, pods: makePods(1), usage: map[string]int64{"web-0": 100}, target: 50,
			mutatePods: func(p []*v1.Pod) { p[0].Spec.Containers = append(p[0].Spec.Containers, v1.Container{Name: "side"}) },
			wantErr:    "missing request for cpu in container side of Pod web-0"},
		{name: "the named container's request", current: 1, pods: makePods(1), usage: map[string]int64{"web-0": 100}, target: 50, containerOf: "side",
			mutatePods: func(p []*v1.Pod) {
				p[0].Spec.Containers = append(p[0].Spec.Containers, v1.Container{Name: "side", Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("400m")}}})
			}, want: 1, wantUtil: 25, wantRaw: 100},
		{name: "pod-level requests", current: 1, pods: makePods(1), usage: map[string]int64{"web-0": 100}, target: 50,
			mutatePods: func(p []*v1.Pod) {
				p[0].Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}
			}, want: 1, wantUtil: 10, wantRaw: 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mutatePods != nil {
				tc.mutatePods(tc.pods)
			}
			in := replicaInput{current: tc.current, pods: tc.pods, metrics: cpu(tc.usage), resource: v1.ResourceCPU, container: tc.containerOf,
				tolerances: tol, readiness: defaultReadiness, now: now}
			if tc.tolerances != nil {
				in.tolerances = *tc.tolerances
			}
			got, util, raw, err := utilizationReplicas(in, tc.target)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || util != tc.wantUtil || raw != tc.wantRaw {
				t.Errorf("replicas, utilization, raw = %d, %d, %d; want %d, %d, %d", got, util, raw, tc.want, tc.wantUtil, tc.wantRaw)
			}
		})
	}
}

func TestAverageValueReplicas(t *testing.T) {
	tests := []struct {
		name    string
		current int32
		usage   map[string]int64
		target  int64
		want    int32
		wantAvg int64
	}{
		{name: "scale up", current: 2, usage: map[string]int64{"web-0": 300, "web-1": 300}, target: 100, want: 6, wantAvg: 300},
		{name: "scale down", current: 2, usage: map[string]int64{"web-0": 20, "web-1": 20}, target: 100, want: 1, wantAvg: 20},
		{name: "within tolerance", current: 2, usage: map[string]int64{"web-0": 105, "web-1": 95}, target: 100, want: 2, wantAvg: 100},
		{name: "missing pod counts as on target on a scale-down", current: 2, usage: map[string]int64{"web-0": 20}, target: 100, want: 2, wantAvg: 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := replicaInput{current: tc.current, pods: makePods(2), metrics: cpu(tc.usage), resource: v1.ResourceMemory,
				tolerances: tolerances{0.1, 0.1}, readiness: defaultReadiness, now: now}
			got, avg, err := averageValueReplicas(in, tc.target)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || avg != tc.wantAvg {
				t.Errorf("replicas, average = %d, %d; want %d, %d", got, avg, tc.want, tc.wantAvg)
			}
		})
	}
}

func makePodMetrics(name string, containers map[string]v1.ResourceList) metricsv1beta1.PodMetrics {
	m := metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Timestamp: metav1.NewTime(now.Add(-time.Minute)), Window: metav1.Duration{Duration: 30 * time.Second}}
	for _, c := range slices.Sorted(maps.Keys(containers)) {
		m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: c, Usage: containers[c]})
	}
	return m
}

func TestUsageOf(t *testing.T) {
	items := []metricsv1beta1.PodMetrics{
		makePodMetrics("a", map[string]v1.ResourceList{
			"web":  {v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("10Mi")},
			"side": {v1.ResourceCPU: resource.MustParse("50m")},
		}),
		makePodMetrics("b", map[string]v1.ResourceList{"web": {v1.ResourceCPU: resource.MustParse("1")}}),
		makePodMetrics("empty", nil),
	}
	values := func(m podMetrics) map[string]int64 {
		out := map[string]int64{}
		for k, v := range m {
			out[k] = v.value
		}
		return out
	}
	if diff := cmp.Diff(map[string]int64{"a": 300, "b": 1000}, values(usageOf(items, v1.ResourceCPU, ""))); diff != "" {
		t.Errorf("pod cpu (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{"a": 250, "b": 1000}, values(usageOf(items, v1.ResourceCPU, "web"))); diff != "" {
		t.Errorf("container cpu (-want +got):\n%s", diff)
	}
	// A container without memory makes the pod's sum unknown.
	if diff := cmp.Diff(map[string]int64{}, values(usageOf(items, v1.ResourceMemory, ""))); diff != "" {
		t.Errorf("pod memory (-want +got):\n%s", diff)
	}
	got := usageOf(items, v1.ResourceCPU, "")["a"]
	if !got.timestamp.Equal(now.Add(-time.Minute)) || got.window != 30*time.Second {
		t.Errorf("sample time %v window %v", got.timestamp, got.window)
	}
}
