package status

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/registry/core"
)

var (
	now       = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	created   = metav1.NewTime(now.Add(-10 * time.Minute))
	scheduled = metav1.NewTime(now.Add(-10 * time.Minute))
	started   = metav1.NewTime(now.Add(-9 * time.Minute))
)

func makePod(mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", CreationTimestamp: created},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			NodeName:      "node-1",
			Containers:    []v1.Container{{Name: "app", Image: "nginx:1.27"}},
		},
		Status: v1.PodStatus{
			Phase:      v1.PodPending,
			Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: scheduled}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func makeView(mutate func(*PodView)) PodView {
	v := PodView{SandboxReady: true, PodIPs: []string{"10.244.1.5"}, HostIPs: []string{"10.240.0.2"}, StartTime: started.Time}
	if mutate != nil {
		mutate(&v)
	}
	return v
}

func runningView(ready bool) ContainerView {
	return ContainerView{
		ID: "c1", Image: "docker.io/library/nginx:1.27", ImageID: "tranche://debian-program/docker.io/library/nginx:1.27",
		State:   v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}},
		Started: true, Ready: ready,
	}
}

func terminated(code int32, reason string, at time.Time) v1.ContainerState {
	return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		ExitCode: code, Reason: reason, StartedAt: metav1.NewTime(at.Add(-time.Second)), FinishedAt: metav1.NewTime(at), ContainerID: "tranche://c0",
	}}
}

func crashLooping(restarts int32) ContainerView {
	return ContainerView{
		ID: "c3", Image: "docker.io/library/busybox:1.36",
		State:        v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container=app pod=web_ns(u1)"}},
		LastState:    terminated(1, "", now.Add(-2*time.Minute)),
		RestartCount: restarts,
	}
}

// row is what kubectl get pods prints for the pod with the computed status.
func row(pod *v1.Pod, s v1.PodStatus) []string {
	p := pod.DeepCopy()
	p.Status = s
	cells := core.PodResource().Row(p, now)
	return []string{cells[1].(string), cells[2].(string), cells[3].(string)}
}

// condSummary is "Type=Status(Reason)" per condition, in order.
func condSummary(conds []v1.PodCondition) []string {
	var out []string
	for _, c := range conds {
		s := string(c.Type) + "=" + string(c.Status)
		if c.Reason != "" {
			s += "(" + c.Reason + ")"
		}
		out = append(out, s)
	}
	return out
}

func TestComputeAsKubectlShowsIt(t *testing.T) {
	initPod := func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{{Name: "init-db", Image: "busybox:1.36"}}
	}
	tests := []struct {
		name      string
		pod       *v1.Pod
		view      PodView
		wantRow   []string
		wantPhase v1.PodPhase
		wantConds []string
	}{{
		name:      "sandbox being created",
		pod:       makePod(nil),
		view:      makeView(func(v *PodView) { v.SandboxReady = false; v.PodIPs = nil }),
		wantRow:   []string{"0/1", "ContainerCreating", "0"},
		wantPhase: v1.PodPending,
		wantConds: []string{"PodReadyToStartContainers=False", "Initialized=True", "Ready=False(ContainersNotReady)", "ContainersReady=False(ContainersNotReady)", "PodScheduled=True"},
	}, {
		name:      "running and ready",
		pod:       makePod(nil),
		view:      makeView(func(v *PodView) { v.Containers = map[string]ContainerView{"app": runningView(true)} }),
		wantRow:   []string{"1/1", "Running", "0"},
		wantPhase: v1.PodRunning,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=True", "ContainersReady=True", "PodScheduled=True"},
	}, {
		name:      "running, readiness failing",
		pod:       makePod(nil),
		view:      makeView(func(v *PodView) { v.Containers = map[string]ContainerView{"app": runningView(false)} }),
		wantRow:   []string{"0/1", "Running", "0"},
		wantPhase: v1.PodRunning,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(ContainersNotReady)", "ContainersReady=False(ContainersNotReady)", "PodScheduled=True"},
	}, {
		name: "running, startup probe not passed yet",
		pod:  makePod(nil),
		view: makeView(func(v *PodView) {
			c := runningView(true)
			c.Started = false
			v.Containers = map[string]ContainerView{"app": c}
		}),
		wantRow:   []string{"0/1", "Running", "0"},
		wantPhase: v1.PodRunning,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(ContainersNotReady)", "ContainersReady=False(ContainersNotReady)", "PodScheduled=True"},
	}, {
		name:      "crash loop",
		pod:       makePod(nil),
		view:      makeView(func(v *PodView) { v.Containers = map[string]ContainerView{"app": crashLooping(4)} }),
		wantRow:   []string{"0/1", "CrashLoopBackOff", "4 (2m ago)"},
		wantPhase: v1.PodRunning,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(ContainersNotReady)", "ContainersReady=False(ContainersNotReady)", "PodScheduled=True"},
	}, {
		name: "completed",
		pod:  makePod(func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever }),
		view: makeView(func(v *PodView) {
			v.Containers = map[string]ContainerView{"app": {ID: "c1", State: terminated(0, "", now.Add(-time.Minute))}}
		}),
		wantRow:   []string{"0/1", "Completed", "0"},
		wantPhase: v1.PodSucceeded,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(PodCompleted)", "ContainersReady=False(PodCompleted)", "PodScheduled=True"},
	}, {
		name: "error",
		pod:  makePod(func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever }),
		view: makeView(func(v *PodView) {
			v.Containers = map[string]ContainerView{"app": {ID: "c1", State: terminated(1, "", now.Add(-time.Minute))}}
		}),
		wantRow:   []string{"0/1", "Error", "0"},
		wantPhase: v1.PodFailed,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(PodFailed)", "ContainersReady=False(PodFailed)", "PodScheduled=True"},
	}, {
		name: "OnFailure restarts a failed container",
		pod:  makePod(func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyOnFailure }),
		view: makeView(func(v *PodView) {
			v.Containers = map[string]ContainerView{"app": {ID: "c1", State: terminated(2, "", now.Add(-time.Second))}}
		}),
		wantRow:   []string{"0/1", "Error", "0"},
		wantPhase: v1.PodRunning,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(ContainersNotReady)", "ContainersReady=False(ContainersNotReady)", "PodScheduled=True"},
	}, {
		name: "deleted pod whose containers stopped",
		pod:  makePod(nil),
		view: makeView(func(v *PodView) {
			v.Terminal = true
			v.Containers = map[string]ContainerView{"app": {ID: "c1", State: terminated(0, "", now)}}
		}),
		wantRow:   []string{"0/1", "Completed", "0"},
		wantPhase: v1.PodSucceeded,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(PodCompleted)", "ContainersReady=False(PodCompleted)", "PodScheduled=True"},
	}, {
		name:      "init container running",
		pod:       makePod(initPod),
		view:      makeView(func(v *PodView) { v.InitContainers = map[string]ContainerView{"init-db": runningView(false)} }),
		wantRow:   []string{"0/1", "Init:0/1", "0"},
		wantPhase: v1.PodPending,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=False(ContainersNotInitialized)", "Ready=False(ContainersNotReady)", "ContainersReady=False(ContainersNotReady)", "PodScheduled=True"},
	}, {
		name:      "init container not started",
		pod:       makePod(initPod),
		view:      makeView(nil),
		wantRow:   []string{"0/1", "Init:0/1", "0"},
		wantPhase: v1.PodPending,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=False(ContainersNotInitialized)", "Ready=False(ContainersNotReady)", "ContainersReady=False(ContainersNotReady)", "PodScheduled=True"},
	}, {
		name:      "init container crash looping",
		pod:       makePod(initPod),
		view:      makeView(func(v *PodView) { v.InitContainers = map[string]ContainerView{"init-db": crashLooping(2)} }),
		wantRow:   []string{"0/1", "Init:CrashLoopBackOff", "2 (2m ago)"},
		wantPhase: v1.PodPending,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=False(ContainersNotInitialized)", "Ready=False(ContainersNotReady)", "ContainersReady=False(ContainersNotReady)", "PodScheduled=True"},
	}, {
		name: "init container failed, restartPolicy Never",
		pod:  makePod(func(p *v1.Pod) { initPod(p); p.Spec.RestartPolicy = v1.RestartPolicyNever }),
		view: makeView(func(v *PodView) {
			v.InitContainers = map[string]ContainerView{"init-db": {ID: "i1", State: terminated(1, "", now)}}
		}),
		wantRow:   []string{"0/1", "Init:Error", "0"},
		wantPhase: v1.PodFailed,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=False(ContainersNotInitialized)", "Ready=False(PodFailed)", "ContainersReady=False(PodFailed)", "PodScheduled=True"},
	}, {
		name: "initialized, app starting",
		pod:  makePod(initPod),
		view: makeView(func(v *PodView) {
			v.InitContainers = map[string]ContainerView{"init-db": {ID: "i1", State: terminated(0, "", now)}}
		}),
		wantRow:   []string{"0/1", "PodInitializing", "0"},
		wantPhase: v1.PodPending,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(ContainersNotReady)", "ContainersReady=False(ContainersNotReady)", "PodScheduled=True"},
	}, {
		name: "job pod with an init container completed",
		pod:  makePod(func(p *v1.Pod) { initPod(p); p.Spec.RestartPolicy = v1.RestartPolicyNever }),
		view: makeView(func(v *PodView) {
			v.SandboxReady = false
			v.InitContainers = map[string]ContainerView{"init-db": {ID: "i1", State: terminated(0, "", now.Add(-time.Minute))}}
			v.Containers = map[string]ContainerView{"app": {ID: "c1", State: terminated(0, "", now)}}
		}),
		wantRow:   []string{"0/1", "Completed", "0"},
		wantPhase: v1.PodSucceeded,
		wantConds: []string{"PodReadyToStartContainers=False", "Initialized=True(PodCompleted)", "Ready=False(PodCompleted)", "ContainersReady=False(PodCompleted)", "PodScheduled=True"},
	}, {
		name: "sidecar started, app running",
		pod: makePod(func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "tranche", RestartPolicy: new(v1.ContainerRestartPolicyAlways)}}
		}),
		view: makeView(func(v *PodView) {
			v.InitContainers = map[string]ContainerView{"proxy": runningView(true)}
			v.Containers = map[string]ContainerView{"app": runningView(true)}
		}),
		wantRow:   []string{"2/2", "Running", "0"},
		wantPhase: v1.PodRunning,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=True", "ContainersReady=True", "PodScheduled=True"},
	}, {
		name: "readiness gate not set",
		pod: makePod(func(p *v1.Pod) {
			p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
		}),
		view:      makeView(func(v *PodView) { v.Containers = map[string]ContainerView{"app": runningView(true)} }),
		wantRow:   []string{"1/1", "Running", "0"},
		wantPhase: v1.PodRunning,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(ReadinessGatesNotReady)", "ContainersReady=True", "PodScheduled=True"},
	}, {
		name: "readiness gate True",
		pod: makePod(func(p *v1.Pod) {
			p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
			p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: "example.com/lb", Status: v1.ConditionTrue})
		}),
		view:      makeView(func(v *PodView) { v.Containers = map[string]ContainerView{"app": runningView(true)} }),
		wantRow:   []string{"1/1", "Running", "0"},
		wantPhase: v1.PodRunning,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=True", "ContainersReady=True", "PodScheduled=True", "example.com/lb=True"},
	}, {
		name: "a terminal phase is kept",
		pod:  makePod(func(p *v1.Pod) { p.Status.Phase = v1.PodFailed; p.Status.Reason = "Evicted" }),
		view: makeView(func(v *PodView) {
			v.Containers = map[string]ContainerView{"app": {ID: "c1", State: terminated(137, "", now)}}
		}),
		wantRow:   []string{"0/1", "Error", "0"},
		wantPhase: v1.PodFailed,
		wantConds: []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=False(PodFailed)", "ContainersReady=False(PodFailed)", "PodScheduled=True"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Compute(tt.pod, tt.view, now)
			if s.Phase != tt.wantPhase {
				t.Errorf("phase = %s, want %s", s.Phase, tt.wantPhase)
			}
			if diff := cmp.Diff(tt.wantRow, row(tt.pod, s)); diff != "" {
				t.Errorf("kubectl READY/STATUS/RESTARTS (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantConds, condSummary(s.Conditions)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestComputeWholeStatus(t *testing.T) {
	pod := makePod(func(p *v1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "a-sidecar-like", Image: "busybox:1.36"})
		p.Status.Conditions = []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: scheduled},
			{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue, LastTransitionTime: started},
			{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: started},
		}
		p.Status.QOSClass = v1.PodQOSBestEffort
	})
	view := makeView(func(v *PodView) {
		v.Containers = map[string]ContainerView{"app": runningView(true)}
	})
	nowT := metav1.NewTime(now)
	want := v1.PodStatus{
		Phase: v1.PodRunning,
		Conditions: []v1.PodCondition{
			{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue, LastTransitionTime: started},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: nowT},
			{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [a-sidecar-like]", LastTransitionTime: nowT},
			{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [a-sidecar-like]", LastTransitionTime: nowT},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: scheduled},
		},
		HostIP:    "10.240.0.2",
		HostIPs:   []v1.HostIP{{IP: "10.240.0.2"}},
		PodIP:     "10.244.1.5",
		PodIPs:    []v1.PodIP{{IP: "10.244.1.5"}},
		StartTime: &started,
		QOSClass:  v1.PodQOSBestEffort,
		ContainerStatuses: []v1.ContainerStatus{{
			Name:    "a-sidecar-like",
			Image:   "busybox:1.36",
			State:   v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			Started: new(false),
		}, {
			Name:        "app",
			Image:       "docker.io/library/nginx:1.27",
			ImageID:     "tranche://debian-program/docker.io/library/nginx:1.27",
			ContainerID: "tranche://c1",
			State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}},
			Ready:       true,
			Started:     new(true),
		}},
	}
	if diff := cmp.Diff(want, Compute(pod, view, now)); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestComputeKeepsWhatTheAgentDoesNotKnow(t *testing.T) {
	start := metav1.NewTime(now.Add(-time.Hour))
	pod := makePod(func(p *v1.Pod) {
		p.Status.StartTime = &start
		p.Status.PodIP, p.Status.PodIPs = "10.244.1.9", []v1.PodIP{{IP: "10.244.1.9"}}
		p.Status.HostIP, p.Status.HostIPs = "10.240.0.3", []v1.HostIP{{IP: "10.240.0.3"}}
		p.Status.NominatedNodeName = "node-2"
	})
	s := Compute(pod, PodView{}, now)
	if !s.StartTime.Equal(&start) || s.PodIP != "10.244.1.9" || len(s.PodIPs) != 1 || s.HostIP != "10.240.0.3" || s.NominatedNodeName != "node-2" {
		t.Errorf("status lost kept fields: %+v", s)
	}
	if s := Compute(makePod(nil), PodView{}, now); !s.StartTime.Time.Equal(now) {
		t.Errorf("start time = %v, want now", s.StartTime)
	}
	if s := Compute(nil, PodView{}, now); s.Phase != "" {
		t.Errorf("nil pod gave %+v", s)
	}
}

func TestQOSClass(t *testing.T) {
	res := func(req, lim v1.ResourceList) v1.ResourceRequirements {
		return v1.ResourceRequirements{Requests: req, Limits: lim}
	}
	cpuMem := func(cpu, mem string) v1.ResourceList {
		l := v1.ResourceList{}
		if cpu != "" {
			l[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	tests := []struct {
		name string
		res  []v1.ResourceRequirements
		want v1.PodQOSClass
	}{
		{"nothing", []v1.ResourceRequirements{{}}, v1.PodQOSBestEffort},
		{"only other resources", []v1.ResourceRequirements{res(v1.ResourceList{"example.com/gpu": resource.MustParse("1")}, nil)}, v1.PodQOSBestEffort},
		{"requests only", []v1.ResourceRequirements{res(cpuMem("100m", ""), nil)}, v1.PodQOSBurstable},
		{"limits equal requests", []v1.ResourceRequirements{res(cpuMem("1", "1Gi"), cpuMem("1", "1Gi"))}, v1.PodQOSGuaranteed},
		{"limits without requests", []v1.ResourceRequirements{res(nil, cpuMem("1", "1Gi"))}, v1.PodQOSGuaranteed},
		{"limits above requests", []v1.ResourceRequirements{res(cpuMem("500m", "1Gi"), cpuMem("1", "1Gi"))}, v1.PodQOSBurstable},
		{"one container without memory limit", []v1.ResourceRequirements{res(nil, cpuMem("1", "1Gi")), res(nil, cpuMem("1", ""))}, v1.PodQOSBurstable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := makePod(func(p *v1.Pod) {
				p.Spec.Containers = nil
				for i, r := range tt.res {
					p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: r})
				}
			})
			if got := QOSClass(pod); got != tt.want {
				t.Errorf("QOSClass = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestComputeEphemeralContainers: an ephemeral container gets a status of its own and
// changes neither the pod's readiness nor its phase.
func TestComputeEphemeralContainers(t *testing.T) {
	now := time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC)
	pod := makePod(func(p *v1.Pod) {
		p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: "busybox:1.37"}}}
	})
	base := PodView{SandboxReady: true, PodIPs: []string{"10.244.0.5"}, Containers: map[string]ContainerView{}}
	for _, c := range pod.Spec.Containers {
		base.Containers[c.Name] = ContainerView{ID: "c1", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(now)}}, Started: true, Ready: true}
	}
	without := Compute(pod, base, now)
	view := base
	view.EphemeralContainers = map[string]ContainerView{"debugger": {ID: "e1",
		State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}}}
	with := Compute(pod, view, now)
	if len(with.EphemeralContainerStatuses) != 1 {
		t.Fatalf("ephemeral statuses: %+v, want one", with.EphemeralContainerStatuses)
	}
	st := with.EphemeralContainerStatuses[0]
	if st.Name != "debugger" || st.ContainerID != ContainerIDPrefix+"e1" || st.State.Terminated == nil || st.State.Terminated.Reason != "Error" {
		t.Errorf("ephemeral status: %+v", st)
	}
	if with.Phase != without.Phase || !cmp.Equal(conditionStatuses(with), conditionStatuses(without)) {
		t.Errorf("phase %s, conditions %v with the ended ephemeral container; want %s, %v as without it", with.Phase, conditionStatuses(with), without.Phase, conditionStatuses(without))
	}
}

func conditionStatuses(s v1.PodStatus) map[v1.PodConditionType]v1.ConditionStatus {
	out := map[v1.PodConditionType]v1.ConditionStatus{}
	for _, c := range s.Conditions {
		out[c.Type] = c.Status
	}
	return out
}

// TestComputeIsStableThroughTheAPI: the API keeps times to the second, so a status
// computed from sub-second times must equal what the API gives back, or the agent
// writes it again on every sync.
func TestComputeIsStableThroughTheAPI(t *testing.T) {
	fine := now.Add(123456789 * time.Nanosecond)
	pod := makePod(nil)
	view := makeView(func(v *PodView) {
		v.StartTime = fine.Add(-time.Minute)
		run := runningView(true)
		run.State.Running.StartedAt = metav1.NewTime(fine.Add(-30 * time.Second))
		run.LastState = terminated(1, "", fine.Add(-40*time.Second))
		v.Containers = map[string]ContainerView{"app": run}
	})
	st := Compute(pod, view, fine)
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var stored v1.PodStatus
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(st, stored) {
		t.Errorf("the computed status differs from what the API stores of it:\n%s", cmp.Diff(stored, st))
	}
	pod.Status = stored
	if again := Compute(pod, view, fine.Add(time.Second)); !apiequality.Semantic.DeepEqual(again, stored) {
		t.Errorf("recomputed unchanged, the status differs from the stored one:\n%s", cmp.Diff(stored, again))
	}
}

// TestInitContainersReadyOnceSucceeded: an init container that exited 0 is Ready, one
// that failed or still runs is not, and a sidecar's readiness is its probe's while it
// runs (kubelet's prober manager, UpdatePodStatus).
func TestInitContainersReadyOnceSucceeded(t *testing.T) {
	pod := makePod(func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{
			{Name: "done", Image: "busybox"},
			{Name: "failed", Image: "busybox"},
			{Name: "running", Image: "busybox"},
			{Name: "sidecar", Image: "busybox", RestartPolicy: new(v1.ContainerRestartPolicyAlways)},
		}
	})
	view := makeView(func(v *PodView) {
		v.InitContainers = map[string]ContainerView{
			"done":    {ID: "i1", State: terminated(0, "", now)},
			"failed":  {ID: "i2", State: terminated(1, "", now)},
			"running": runningView(true),
			"sidecar": runningView(true),
		}
	})
	got := map[string]bool{}
	for _, st := range Compute(pod, view, now).InitContainerStatuses {
		got[st.Name] = st.Ready
	}
	want := map[string]bool{"done": true, "failed": false, "running": false, "sidecar": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("init containers' Ready (-want +got):\n%s", diff)
	}
}

// TestComputeDeadlineExceeded: a pod the agent stopped at its activeDeadlineSeconds is
// Failed with kubelet's reason and message, even when its container exited 0.
func TestComputeDeadlineExceeded(t *testing.T) {
	pod := makePod(nil)
	view := makeView(func(v *PodView) {
		v.Terminal = true
		v.FailedReason, v.FailedMessage = "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
		v.Containers = map[string]ContainerView{"app": {ID: "c1", State: terminated(0, "", now)}}
	})
	s := Compute(pod, view, now)
	if s.Phase != v1.PodFailed || s.Reason != "DeadlineExceeded" || s.Message != view.FailedMessage {
		t.Errorf("phase %s reason %q message %q, want Failed DeadlineExceeded with kubelet's message", s.Phase, s.Reason, s.Message)
	}
}
