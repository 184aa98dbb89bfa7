package core

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
)

// testNow is the fixed clock of the table tests.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func resources(req, lim string) v1.ResourceRequirements {
	parse := func(s string) v1.ResourceList {
		if s == "" {
			return nil
		}
		list := v1.ResourceList{}
		for _, kv := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(kv, "=")
			list[v1.ResourceName(k)] = resource.MustParse(v)
		}
		return list
	}
	return v1.ResourceRequirements{Requests: parse(req), Limits: parse(lim)}
}

func TestPodQOSClass(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.Pod)
		want   v1.PodQOSClass
	}{{
		name:   "no resources",
		mutate: func(*v1.Pod) {},
		want:   v1.PodQOSBestEffort,
	}, {
		name:   "only extended resources",
		mutate: func(p *v1.Pod) { p.Spec.Containers[0].Resources = resources("example.com/gpu=1", "example.com/gpu=1") },
		want:   v1.PodQOSBestEffort,
	}, {
		name:   "requests only",
		mutate: func(p *v1.Pod) { p.Spec.Containers[0].Resources = resources("cpu=100m", "") },
		want:   v1.PodQOSBurstable,
	}, {
		name:   "requests equal limits",
		mutate: func(p *v1.Pod) { p.Spec.Containers[0].Resources = resources("cpu=1,memory=1Gi", "cpu=1,memory=1Gi") },
		want:   v1.PodQOSGuaranteed,
	}, {
		name: "limits only, requests defaulted from them",
		mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = resources("", "cpu=1,memory=1Gi")
			podDefault(p)
		},
		want: v1.PodQOSGuaranteed,
	}, {
		name:   "limit on cpu only",
		mutate: func(p *v1.Pod) { p.Spec.Containers[0].Resources = resources("cpu=1", "cpu=1") },
		want:   v1.PodQOSBurstable,
	}, {
		name: "one guaranteed container, one best effort",
		mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = resources("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "side", Image: "x"})
		},
		want: v1.PodQOSBurstable,
	}, {
		name: "init container counts",
		mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "x", Resources: resources("memory=1Mi", "")}}
		},
		want: v1.PodQOSBurstable,
	}, {
		name: "pod-level resources decide",
		mutate: func(p *v1.Pod) {
			r := resources("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")
			p.Spec.Resources = &r
		},
		want: v1.PodQOSGuaranteed,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodQOSClass(makePod(tc.mutate)); got != tc.want {
				t.Errorf("PodQOSClass = %s, want %s", got, tc.want)
			}
		})
	}
	if got := PodQOSClass(nil); got != v1.PodQOSBestEffort {
		t.Errorf("PodQOSClass(nil) = %s", got)
	}
}

func TestPodPrepareForCreate(t *testing.T) {
	pod := makePod(func(p *v1.Pod) {
		p.Spec.Containers[0].Resources = resources("", "cpu=500m,memory=64Mi")
		p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/wait"}}
		p.Status = v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.9", Message: "client-set"}
	})
	res := PodResource()
	res.PrepareForCreate(pod)
	want := v1.PodStatus{
		Phase:    v1.PodPending,
		QOSClass: v1.PodQOSGuaranteed,
		Conditions: []v1.PodCondition{{
			Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "SchedulingGated",
			Message: "Scheduling is blocked due to non-empty scheduling gates",
		}},
	}
	if d := cmp.Diff(want, pod.Status); d != "" {
		t.Errorf("status after PrepareForCreate (-want +got):\n%s", d)
	}
}

func TestPodDefault(t *testing.T) {
	pod := makePod(func(p *v1.Pod) {
		p.Spec.HostNetwork = true
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 8080}}
		p.Spec.Containers[0].Resources = resources("cpu=100m", "cpu=1,memory=128Mi")
		p.Status.PodIPs = []v1.PodIP{{IP: "10.244.1.5"}, {IP: "fd00::5"}}
	})
	PodResource().Default(pod)
	c := pod.Spec.Containers[0]
	checks := []struct {
		name      string
		got, want interface{}
	}{
		{"enableServiceLinks", pod.Spec.EnableServiceLinks, ptr.To(true)},
		{"hostPort from containerPort", c.Ports[0].HostPort, int32(8080)},
		{"explicit request kept", c.Resources.Requests.Cpu().String(), "100m"},
		{"missing request from limit", c.Resources.Requests.Memory().String(), "128Mi"},
		{"podIP from podIPs", pod.Status.PodIP, "10.244.1.5"},
		{"no service account invented", pod.Spec.ServiceAccountName, ""},
	}
	for _, tc := range checks {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestPodValidateCreate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.Pod)
		want   string
	}{{
		name:   "valid",
		mutate: func(*v1.Pod) {},
	}, {
		name:   "image with whitespace",
		mutate: func(p *v1.Pod) { p.Spec.Containers[0].Image = " nginx" },
		want:   `spec.containers[0].image: Invalid value: " nginx": must not have leading or trailing whitespace`,
	}, {
		name: "hostNetwork hostPort must match",
		mutate: func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 81}}
		},
		want: "spec.containers[0].ports[0].hostPort: Invalid value: 81: must match `containerPort` when `hostNetwork` is true",
	}, {
		name: "ephemeral containers on create",
		mutate: func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", Image: "busybox"}}}
		},
		want: "spec.ephemeralContainers: Forbidden: cannot be set on create",
	}, {
		name: "nodeName with scheduling gates",
		mutate: func(p *v1.Pod) {
			p.Spec.NodeName = "node-1"
			p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "gate"}}
		},
		want: "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared",
	}}
	res := PodResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := makePod(tc.mutate)
			res.PrepareForCreate(pod)
			res.Default(pod)
			if got := errString(res.Validate(pod)); got != tc.want {
				t.Errorf("Validate:\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

func TestPodValidateUpdate(t *testing.T) {
	const forbidden = "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"
	tests := []struct {
		name       string
		old        func(*v1.Pod)
		mutate     func(*v1.Pod)
		want       string
		wantPrefix bool
	}{{
		name:   "image change allowed",
		mutate: func(p *v1.Pod) { p.Spec.Containers[0].Image = "nginx:1.28" },
	}, {
		name:   "label change is metadata, not spec",
		mutate: func(p *v1.Pod) { p.Labels = map[string]string{"a": "b"} },
	}, {
		name: "port change forbidden",
		mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 81, Protocol: v1.ProtocolTCP}}
		},
		want:       forbidden,
		wantPrefix: true,
	}, {
		name:       "nodeName only through binding",
		mutate:     func(p *v1.Pod) { p.Spec.NodeName = "node-2" },
		want:       forbidden,
		wantPrefix: true,
	}, {
		name:   "adding a container",
		mutate: func(p *v1.Pod) { p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "b", Image: "x"}) },
		want:   "spec.containers: Forbidden: pod updates may not add or remove containers",
	}, {
		name:   "activeDeadlineSeconds set",
		mutate: func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) },
	}, {
		name:   "activeDeadlineSeconds decreased",
		old:    func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) },
		mutate: func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](30) },
	}, {
		name:   "activeDeadlineSeconds increased",
		old:    func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) },
		mutate: func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](90) },
		want:   "spec.activeDeadlineSeconds: Invalid value: 90: must be less than or equal to previous value",
	}, {
		name:   "activeDeadlineSeconds removed",
		old:    func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) },
		mutate: func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = nil },
		want:   "spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value",
	}, {
		name: "toleration added",
		old:  func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Key: "a", Operator: v1.TolerationOpExists}} },
		mutate: func(p *v1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: "b", Operator: v1.TolerationOpExists})
		},
	}, {
		name:   "toleration removed",
		old:    func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Key: "a", Operator: v1.TolerationOpExists}} },
		mutate: func(p *v1.Pod) { p.Spec.Tolerations = nil },
		want:   "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds",
	}, {
		name:   "grace period to 1 when negative",
		old:    func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](-1) },
		mutate: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1) },
	}}
	res := PodResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := makePod(tc.old)
			res.PrepareForCreate(old)
			res.Default(old)
			pod := old.DeepCopy()
			tc.mutate(pod)
			res.Default(pod)
			got := errString(res.ValidateUpdate(pod, old))
			if tc.wantPrefix {
				if !strings.HasPrefix(got, tc.want) || len(got) == len(tc.want) {
					t.Errorf("ValidateUpdate:\n got: %s\nwant prefix (and a diff): %s", got, tc.want)
				}
				return
			}
			if got != tc.want {
				t.Errorf("ValidateUpdate:\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

func TestPodValidateStatusUpdate(t *testing.T) {
	tests := []struct {
		name   string
		old    func(*v1.Pod)
		mutate func(*v1.Pod)
		want   string
	}{{
		name: "running with IPs",
		mutate: func(p *v1.Pod) {
			p.Status.Phase = v1.PodRunning
			p.Status.PodIP = "10.244.1.7"
			p.Status.PodIPs = []v1.PodIP{{IP: "10.244.1.7"}, {IP: "fd00::7"}}
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: "example.com/gate", Status: v1.ConditionTrue}}
		},
	}, {
		name:   "unknown phase",
		mutate: func(p *v1.Pod) { p.Status.Phase = "Sleeping" },
		want:   `status.phase: Unsupported value: "Sleeping": supported values: "Pending", "Running", "Succeeded", "Failed", "Unknown"`,
	}, {
		name:   "podIPs of one family",
		mutate: func(p *v1.Pod) { p.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}} },
		want:   `status.podIPs: Invalid value: ["10.0.0.1","10.0.0.2"]: may specify no more than one IP for each IP family`,
	}, {
		name:   "invalid IP",
		mutate: func(p *v1.Pod) { p.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.300"}} },
		want:   `status.podIPs[0]: Invalid value: "10.0.0.300": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`,
	}, {
		name:   "condition type",
		mutate: func(p *v1.Pod) { p.Status.Conditions = []v1.PodCondition{{Type: "no good"}} },
		want:   `status.conditions[0].type: Invalid value: "no good": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
	}, {
		name:   "qosClass immutable",
		mutate: func(p *v1.Pod) { p.Status.QOSClass = v1.PodQOSGuaranteed },
		want:   `status.qosClass: Invalid value: "Guaranteed": field is immutable`,
	}, {
		name: "terminated container may not run again under Never",
		old: func(p *v1.Pod) {
			p.Spec.RestartPolicy = v1.RestartPolicyNever
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}}}
		},
		mutate: func(p *v1.Pod) {
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
		},
		want: "status.containerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state",
	}, {
		name: "ephemeral container statuses the node agent writes",
		old: func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", Image: "busybox"}}}
			p.Status.EphemeralContainerStatuses = []v1.ContainerStatus{waiting("dbg", "ContainerCreating")}
		},
		mutate: func(p *v1.Pod) {
			p.Status.EphemeralContainerStatuses = []v1.ContainerStatus{{Name: "dbg", Image: "busybox:1.37", ImageID: "sha256:1",
				ContainerID: "tranche://1", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(testNow)}}}}
		},
	}, {
		name: "a terminated ephemeral container never runs again, even under Always",
		old: func(p *v1.Pod) {
			p.Status.EphemeralContainerStatuses = []v1.ContainerStatus{terminated("dbg", "Completed", 0)}
		},
		mutate: func(p *v1.Pod) {
			p.Status.EphemeralContainerStatuses = []v1.ContainerStatus{running("dbg", false, 0)}
		},
		want: "status.ephemeralContainerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state",
	}}
	res := PodResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := makePod(nil)
			res.PrepareForCreate(old)
			if tc.old != nil {
				tc.old(old)
			}
			pod := old.DeepCopy()
			tc.mutate(pod)
			res.Status.PrepareForUpdate(pod, old)
			if got := errString(res.Status.ValidateUpdate(pod, old)); got != tc.want {
				t.Errorf("status ValidateUpdate:\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

func running(name string, ready bool, restarts int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, Ready: ready, RestartCount: restarts, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}

func waiting(name, reason string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}}
}

func terminated(name, reason string, code int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: reason, ExitCode: code}}}
}

func TestPodRow(t *testing.T) {
	created := metav1.NewTime(testNow.Add(-10 * time.Minute))
	tests := []struct {
		name   string
		mutate func(*v1.Pod)
		want   []interface{}
	}{{
		name:   "pending, not scheduled",
		mutate: func(p *v1.Pod) { p.Status.Phase = v1.PodPending },
		want:   []interface{}{"web", "0/1", "Pending", "0", "10m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "container creating",
		mutate: func(p *v1.Pod) {
			p.Spec.NodeName = "node-1"
			p.Status.Phase = v1.PodPending
			p.Status.ContainerStatuses = []v1.ContainerStatus{waiting("app", "ContainerCreating")}
		},
		want: []interface{}{"web", "0/1", "ContainerCreating", "0", "10m", "<none>", "node-1", "<none>", "<none>"},
	}, {
		name: "running and ready, restarted 3 times 5 minutes ago",
		mutate: func(p *v1.Pod) {
			p.Spec.NodeName = "node-1"
			p.Status.Phase = v1.PodRunning
			p.Status.PodIPs = []v1.PodIP{{IP: "10.244.1.5"}}
			st := running("app", true, 3)
			st.LastTerminationState.Terminated = &v1.ContainerStateTerminated{FinishedAt: metav1.NewTime(testNow.Add(-5 * time.Minute))}
			p.Status.ContainerStatuses = []v1.ContainerStatus{st}
		},
		want: []interface{}{"web", "1/1", "Running", "3 (5m ago)", "10m", "10.244.1.5", "node-1", "<none>", "<none>"},
	}, {
		name: "crash loop",
		mutate: func(p *v1.Pod) {
			p.Status.Phase = v1.PodRunning
			st := waiting("app", "CrashLoopBackOff")
			st.RestartCount = 4
			p.Status.ContainerStatuses = []v1.ContainerStatus{st}
		},
		want: []interface{}{"web", "0/1", "CrashLoopBackOff", "4", "10m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "completed",
		mutate: func(p *v1.Pod) {
			p.Status.Phase = v1.PodSucceeded
			p.Status.ContainerStatuses = []v1.ContainerStatus{terminated("app", "Completed", 0)}
		},
		want: []interface{}{"web", "0/1", "Completed", "0", "10m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "error",
		mutate: func(p *v1.Pod) {
			p.Status.Phase = v1.PodFailed
			p.Status.ContainerStatuses = []v1.ContainerStatus{terminated("app", "Error", 1)}
		},
		want: []interface{}{"web", "0/1", "Error", "0", "10m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "exit code without reason",
		mutate: func(p *v1.Pod) {
			p.Status.Phase = v1.PodFailed
			p.Status.ContainerStatuses = []v1.ContainerStatus{terminated("app", "", 2)}
		},
		want: []interface{}{"web", "0/1", "ExitCode:2", "0", "10m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "first of two init containers running",
		mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i1", Image: "x"}, {Name: "i2", Image: "x"}}
			p.Status.Phase = v1.PodPending
			p.Status.InitContainerStatuses = []v1.ContainerStatus{running("i1", false, 0), waiting("i2", "PodInitializing")}
			p.Status.ContainerStatuses = []v1.ContainerStatus{waiting("app", "PodInitializing")}
		},
		want: []interface{}{"web", "0/1", "Init:0/2", "0", "10m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "init container crash looping",
		mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i1", Image: "x"}}
			p.Status.Phase = v1.PodPending
			st := waiting("i1", "CrashLoopBackOff")
			st.RestartCount = 2
			p.Status.InitContainerStatuses = []v1.ContainerStatus{st}
		},
		want: []interface{}{"web", "0/1", "Init:CrashLoopBackOff", "2", "10m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "init done, main container initializing",
		mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i1", Image: "x"}}
			p.Status.Phase = v1.PodPending
			p.Status.InitContainerStatuses = []v1.ContainerStatus{terminated("i1", "Completed", 0)}
			p.Status.ContainerStatuses = []v1.ContainerStatus{waiting("app", "PodInitializing")}
		},
		want: []interface{}{"web", "0/1", "PodInitializing", "0", "10m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "sidecar counts as a container",
		mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "x", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}}
			p.Status.Phase = v1.PodRunning
			side := running("proxy", true, 0)
			side.Started = ptr.To(true)
			p.Status.InitContainerStatuses = []v1.ContainerStatus{side}
			p.Status.ContainerStatuses = []v1.ContainerStatus{running("app", true, 0)}
		},
		want: []interface{}{"web", "2/2", "Running", "0", "10m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "terminating",
		mutate: func(p *v1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: testNow}
			p.Status.Phase = v1.PodRunning
			p.Status.ContainerStatuses = []v1.ContainerStatus{running("app", true, 0)}
		},
		want: []interface{}{"web", "1/1", "Terminating", "0", "10m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "deleted on a lost node",
		mutate: func(p *v1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: testNow}
			p.Status.Phase = v1.PodRunning
			p.Status.Reason = "NodeLost"
		},
		want: []interface{}{"web", "0/1", "Unknown", "0", "10m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "readiness gates and nominated node",
		mutate: func(p *v1.Pod) {
			p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/a"}, {ConditionType: "example.com/b"}}
			p.Status.Phase = v1.PodPending
			p.Status.NominatedNodeName = "node-3"
			p.Status.Conditions = []v1.PodCondition{{Type: "example.com/a", Status: v1.ConditionTrue}}
		},
		want: []interface{}{"web", "0/1", "Pending", "0", "10m", "<none>", "<none>", "node-3", "1/2"},
	}, {
		name: "scheduling gated",
		mutate: func(p *v1.Pod) {
			p.Status.Phase = v1.PodPending
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "SchedulingGated"}}
		},
		want: []interface{}{"web", "0/1", "SchedulingGated", "0", "10m", "<none>", "<none>", "<none>", "<none>"},
	}}
	res := PodResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := makePod(func(p *v1.Pod) { p.CreationTimestamp = created })
			tc.mutate(pod)
			got := res.Row(pod, testNow)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Row (-want +got):\n%s", d)
			}
			if len(got) != len(res.Columns) {
				t.Errorf("Row has %d cells for %d columns", len(got), len(res.Columns))
			}
		})
	}
}

func TestPodFields(t *testing.T) {
	pod := makePod(func(p *v1.Pod) {
		p.Spec.NodeName = "node-1"
		p.Spec.HostNetwork = true
		p.Status.Phase = v1.PodRunning
		p.Status.PodIPs = []v1.PodIP{{IP: "10.244.1.5"}, {IP: "fd00::5"}}
	})
	PodResource().Default(pod)
	want := fields.Set{
		"spec.nodeName": "node-1", "spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler",
		"spec.serviceAccountName": "", "spec.hostNetwork": "true", "status.phase": "Running",
		"status.podIP": "10.244.1.5", "status.podIPs": "10.244.1.5,fd00::5", "status.nominatedNodeName": "",
	}
	if d := cmp.Diff(want, PodResource().Fields(pod)); d != "" {
		t.Errorf("Fields (-want +got):\n%s", d)
	}
}

func TestPodResourceIdentity(t *testing.T) {
	res := PodResource()
	got := []interface{}{res.GVK.String(), res.Plural, res.ShortNames, res.Categories, res.Namespaced, res.Status != nil}
	want := []interface{}{"/v1, Kind=Pod", "pods", []string{"po"}, []string{"all"}, true, true}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("identity (-want +got):\n%s", d)
	}
	names := make([]string, 0, len(res.Columns))
	for _, c := range res.Columns {
		if c.Priority == 0 {
			names = append(names, strings.ToUpper(c.Name))
		}
	}
	if d := cmp.Diff([]string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}, names); d != "" {
		t.Errorf("columns (-want +got):\n%s", d)
	}
}

// FuzzValidatePod decodes arbitrary JSON into a pod and runs every hook a create, an
// update and a table read would: none may panic.
func FuzzValidatePod(f *testing.F) {
	seeds := []*v1.Pod{
		makePod(nil),
		makePod(func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}}
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}}}
			p.Spec.Containers[0].Resources = resources("cpu=1", "cpu=2,memory=1Gi")
			p.Status.InitContainerStatuses = []v1.ContainerStatus{terminated("init", "", 3)}
		}),
	}
	for _, s := range seeds {
		b, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"spec":{"containers":[{"livenessProbe":{"httpGet":{}},"env":[{"valueFrom":{}}]}],"volumes":[{}]},"status":{"podIPs":[{}],"hostIPs":[{}]}}`))
	f.Add([]byte(`{"metadata":{"deletionTimestamp":"2025-01-01T00:00:00Z"},"spec":{"securityContext":null,"dnsPolicy":"None"}}`))
	res := PodResource()
	f.Fuzz(func(t *testing.T, data []byte) {
		pod := &v1.Pod{}
		if err := json.Unmarshal(data, pod); err != nil {
			return
		}
		old := pod.DeepCopy()
		res.Row(pod, testNow)
		res.Fields(pod)
		res.Validate(pod)
		res.ValidateUpdate(pod, old)
		res.Status.PrepareForUpdate(pod, old)
		res.Status.ValidateUpdate(pod, old)
		res.PrepareForCreate(pod)
		res.Default(pod)
		res.Validate(pod)
		res.ValidateUpdate(pod, old)
		res.Row(pod, testNow)
	})
}
