package core

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// debugger is the ephemeral container kubectl debug --image=busybox:1.37 --target=app
// adds, changed by mutate.
func debugger(name string, mutate func(*v1.EphemeralContainer)) v1.EphemeralContainer {
	ec := v1.EphemeralContainer{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{
			Name: name, Image: "busybox:1.37", TerminationMessagePolicy: v1.TerminationMessageReadFile,
		},
		TargetContainerName: "app",
	}
	if mutate != nil {
		mutate(&ec)
	}
	return ec
}

// addDebugger returns a pod mutation appending debugger(name, mutate).
func addDebugger(name string, mutate func(*v1.EphemeralContainer)) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, debugger(name, mutate))
	}
}

// ephemeralUpdate runs a write through pods/ephemeralcontainers the way the API server
// does: the stored pod old, the client's pod changed by mutate, the subresource's
// strategy, the pod's defaults, then its validation.
func ephemeralUpdate(t *testing.T, old *v1.Pod, mutate func(*v1.Pod)) (*v1.Pod, string) {
	t.Helper()
	sub := PodResource().Subresources["ephemeralcontainers"]
	if sub == nil {
		t.Fatal("pods have no ephemeralcontainers subresource")
	}
	pod := old.DeepCopy()
	mutate(pod)
	sub.PrepareForUpdate(pod, old)
	PodResource().Default(pod)
	return pod, errString(sub.ValidateUpdate(pod, old))
}

// storedPod is a created pod with an init container "setup" and a volume "data".
func storedPod(mutate func(*v1.Pod)) *v1.Pod {
	res := PodResource()
	pod := makePod(func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{{Name: "setup", Image: "busybox:1.37"}}
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.ResourceVersion = "7"
	})
	res.PrepareForCreate(pod)
	res.Default(pod)
	if mutate != nil {
		mutate(pod)
		res.Default(pod)
	}
	return pod
}

func TestPodEphemeralContainersUpdate(t *testing.T) {
	const forbidden = "cannot be set for an Ephemeral Container"
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	withDebugger := func(p *v1.Pod) { p.Spec.EphemeralContainers = []v1.EphemeralContainer{debugger("dbg", nil)} }
	tests := []struct {
		name       string
		old        func(*v1.Pod)
		mutate     func(*v1.Pod)
		want       string
		wantPrefix bool
	}{{
		name:   "kubectl debug's container targeting a container",
		mutate: addDebugger("dbg", nil),
	}, {
		name:   "targeting an init container",
		mutate: addDebugger("dbg", func(ec *v1.EphemeralContainer) { ec.TargetContainerName = "setup" }),
	}, {
		name: "without a target, interactive, with env and a mount",
		mutate: addDebugger("dbg", func(ec *v1.EphemeralContainer) {
			ec.TargetContainerName = ""
			ec.Stdin, ec.TTY = true, true
			ec.Env = []v1.EnvVar{{Name: "A", Value: "b"}}
			ec.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
			ec.SecurityContext = &v1.SecurityContext{RunAsUser: ptr.To[int64](1000)}
		}),
	}, {
		name:   "a second one after the first",
		old:    withDebugger,
		mutate: addDebugger("dbg2", nil),
	}, {
		name:   "target that is no container of the pod",
		mutate: addDebugger("dbg", func(ec *v1.EphemeralContainer) { ec.TargetContainerName = "nope" }),
		want:   `spec.ephemeralContainers[0].targetContainerName: Not found: "nope"`,
	}, {
		name:   "target that is another ephemeral container",
		old:    withDebugger,
		mutate: addDebugger("dbg2", func(ec *v1.EphemeralContainer) { ec.TargetContainerName = "dbg" }),
		want:   `spec.ephemeralContainers[1].targetContainerName: Not found: "dbg"`,
	}, {
		name: "ports",
		mutate: addDebugger("dbg", func(ec *v1.EphemeralContainer) {
			ec.Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		}),
		want: "spec.ephemeralContainers[0].ports: Forbidden: " + forbidden,
	}, {
		name: "probes",
		mutate: addDebugger("dbg", func(ec *v1.EphemeralContainer) {
			ec.LivenessProbe, ec.ReadinessProbe, ec.StartupProbe = probe, probe.DeepCopy(), probe.DeepCopy()
		}),
		want: "[spec.ephemeralContainers[0].livenessProbe: Forbidden: " + forbidden +
			", spec.ephemeralContainers[0].readinessProbe: Forbidden: " + forbidden +
			", spec.ephemeralContainers[0].startupProbe: Forbidden: " + forbidden + "]",
	}, {
		name: "resources",
		mutate: addDebugger("dbg", func(ec *v1.EphemeralContainer) {
			ec.Resources = resources("cpu=100m", "")
		}),
		want: "spec.ephemeralContainers[0].resources: Forbidden: " + forbidden,
	}, {
		name: "lifecycle",
		mutate: addDebugger("dbg", func(ec *v1.EphemeralContainer) {
			ec.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		}),
		want: "spec.ephemeralContainers[0].lifecycle: Forbidden: " + forbidden,
	}, {
		name: "restart and resize policies",
		mutate: addDebugger("dbg", func(ec *v1.EphemeralContainer) {
			ec.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
			ec.ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceCPU, RestartPolicy: v1.NotRequired}}
		}),
		want: "[spec.ephemeralContainers[0].resizePolicy: Forbidden: " + forbidden +
			", spec.ephemeralContainers[0].restartPolicy: Forbidden: " + forbidden + "]",
	}, {
		name: "subPath mounts",
		mutate: addDebugger("dbg", func(ec *v1.EphemeralContainer) {
			ec.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/a", SubPath: "x"}, {Name: "data", MountPath: "/b", SubPathExpr: "$(POD)"}}
		}),
		want: "[spec.ephemeralContainers[0].volumeMounts[0].subPath: Forbidden: " + forbidden +
			", spec.ephemeralContainers[0].volumeMounts[1].subPathExpr: Forbidden: " + forbidden + "]",
	}, {
		name:   "mount of a volume the pod lacks",
		mutate: addDebugger("dbg", func(ec *v1.EphemeralContainer) { ec.VolumeMounts = []v1.VolumeMount{{Name: "nope", MountPath: "/x"}} }),
		want:   `spec.ephemeralContainers[0].volumeMounts[0].name: Not found: "nope"`,
	}, {
		name:   "no image",
		mutate: addDebugger("dbg", func(ec *v1.EphemeralContainer) { ec.Image = "" }),
		want:   "spec.ephemeralContainers[0].image: Required value",
	}, {
		name:   "image with whitespace",
		mutate: addDebugger("dbg", func(ec *v1.EphemeralContainer) { ec.Image = "busybox:1.37 " }),
		want:   `spec.ephemeralContainers[0].image: Invalid value: "busybox:1.37 ": must not have leading or trailing whitespace`,
	}, {
		name:   "terminationMessagePolicy",
		mutate: addDebugger("dbg", func(ec *v1.EphemeralContainer) { ec.TerminationMessagePolicy = "Sometimes" }),
		want:   `spec.ephemeralContainers[0].terminationMessagePolicy: Unsupported value: "Sometimes": supported values: "File", "FallbackToLogsOnError"`,
	}, {
		name:   "no name",
		mutate: addDebugger("", nil),
		want:   "spec.ephemeralContainers[0].name: Required value",
	}, {
		name:   "name of a container",
		mutate: addDebugger("app", nil),
		want:   `spec.ephemeralContainers[0].name: Duplicate value: "app"`,
	}, {
		name:   "name of an init container",
		mutate: addDebugger("setup", nil),
		want:   `spec.ephemeralContainers[0].name: Duplicate value: "setup"`,
	}, {
		name:   "name of another ephemeral container",
		mutate: func(p *v1.Pod) { addDebugger("dbg", nil)(p); addDebugger("dbg", nil)(p) },
		want:   `spec.ephemeralContainers[1].name: Duplicate value: "dbg"`,
	}, {
		name:   "name that is no DNS label",
		mutate: addDebugger("Debug_1", nil),
		want:   `spec.ephemeralContainers[0].name: Invalid value: "Debug_1": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
	}, {
		name:   "removing one",
		old:    withDebugger,
		mutate: func(p *v1.Pod) { p.Spec.EphemeralContainers = nil },
		want:   "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"dbg\" may not be removed\n",
	}, {
		name:       "changing one",
		old:        withDebugger,
		mutate:     func(p *v1.Pod) { p.Spec.EphemeralContainers[0].Image = "busybox:1.36" },
		want:       "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"dbg\" may not be changed\n",
		wantPrefix: true,
	}, {
		name: "reordering is no change",
		old: func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{debugger("a", nil), debugger("b", nil)}
		},
		mutate: func(p *v1.Pod) {
			p.Spec.EphemeralContainers[0], p.Spec.EphemeralContainers[1] = p.Spec.EphemeralContainers[1], p.Spec.EphemeralContainers[0]
		},
	}, {
		name:   "a static pod's mirror",
		old:    func(p *v1.Pod) { p.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "x"} },
		mutate: addDebugger("dbg", nil),
		want:   "[]: Forbidden: static pods do not support ephemeral containers",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, got := ephemeralUpdate(t, storedPod(tc.old), tc.mutate)
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

// TestPodEphemeralContainersWriteOnlyTheirPart: whatever else a write through the
// subresource carries is dropped, and the new container gets a container's defaults.
func TestPodEphemeralContainersWriteOnlyTheirPart(t *testing.T) {
	old := storedPod(nil)
	pod, errs := ephemeralUpdate(t, old, func(p *v1.Pod) {
		p.ResourceVersion = "9"
		p.Labels = map[string]string{"sneaky": "yes"}
		p.Spec.Containers[0].Image = "nginx:1.28"
		p.Spec.NodeName = "elsewhere"
		p.Status.Phase = v1.PodFailed
		p.Spec.EphemeralContainers = []v1.EphemeralContainer{debugger("dbg", func(ec *v1.EphemeralContainer) { ec.TerminationMessagePolicy = "" })}
	})
	if errs != "" {
		t.Fatal(errs)
	}
	want := old.DeepCopy()
	want.ResourceVersion = "9"
	ec := debugger("dbg", nil)
	ec.ImagePullPolicy = v1.PullIfNotPresent
	ec.TerminationMessagePath = v1.TerminationMessagePathDefault
	want.Spec.EphemeralContainers = []v1.EphemeralContainer{ec}
	if d := cmp.Diff(want, pod); d != "" {
		t.Errorf("stored pod (-want +got):\n%s", d)
	}
}

// TestPodUpdateMayNotTouchEphemeralContainers: a pod update that adds, changes or
// removes an ephemeral container gets the error of any other forbidden spec change.
func TestPodUpdateMayNotTouchEphemeralContainers(t *testing.T) {
	const forbidden = "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"
	withDebugger := func(p *v1.Pod) { p.Spec.EphemeralContainers = []v1.EphemeralContainer{debugger("dbg", nil)} }
	for _, tc := range []struct {
		name   string
		old    func(*v1.Pod)
		mutate func(*v1.Pod)
	}{
		{"add", nil, addDebugger("dbg", nil)},
		{"change", withDebugger, func(p *v1.Pod) { p.Spec.EphemeralContainers[0].Image = "busybox:1.36" }},
		{"remove", withDebugger, func(p *v1.Pod) { p.Spec.EphemeralContainers = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := storedPod(tc.old)
			pod := old.DeepCopy()
			tc.mutate(pod)
			PodResource().Default(pod)
			got := errString(PodResource().ValidateUpdate(pod, old))
			if !strings.HasPrefix(got, forbidden) || !strings.Contains(got, `"ephemeralContainers"`) {
				t.Errorf("ValidateUpdate:\n got: %s\nwant prefix %s and a diff naming ephemeralContainers", got, forbidden)
			}
		})
	}
	// A pod that has one may still be updated otherwise.
	old := storedPod(withDebugger)
	pod := old.DeepCopy()
	pod.Spec.Containers[0].Image = "nginx:1.28"
	if got := errString(PodResource().ValidateUpdate(pod, old)); got != "" {
		t.Errorf("image update of a pod with an ephemeral container: %s", got)
	}
}
