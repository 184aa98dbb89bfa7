package core

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// resizeUpdate runs a write through pods/resize the way the API server does: the
// stored pod old, the client's pod changed by mutate, the subresource's strategy, the
// pod's defaults, then its validation.
func resizeUpdate(t *testing.T, old *v1.Pod, mutate func(*v1.Pod)) (*v1.Pod, string) {
	t.Helper()
	sub := PodResource().Subresources["resize"]
	if sub == nil {
		t.Fatal("pods have no resize subresource")
	}
	pod := old.DeepCopy()
	mutate(pod)
	sub.PrepareForUpdate(pod, old)
	PodResource().Default(pod)
	return pod, errString(sub.ValidateUpdate(pod, old))
}

// resizeRes builds requirements from "cpu=100m,memory=64Mi"-style lists ("" is none).
func resizeRes(requests, limits string) v1.ResourceRequirements {
	parse := func(s string) v1.ResourceList {
		if s == "" {
			return nil
		}
		l := v1.ResourceList{}
		for _, kv := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(kv, "=")
			l[v1.ResourceName(k)] = resource.MustParse(v)
		}
		return l
	}
	return v1.ResourceRequirements{Requests: parse(requests), Limits: parse(limits)}
}

// resizablePod is a stored Burstable pod whose container "app" runs and reports its
// resources, as on a node that supports resize.
func resizablePod(mutate func(*v1.Pod)) *v1.Pod {
	return storedPod(func(p *v1.Pod) {
		p.Spec.Containers[0].Resources = resizeRes("cpu=100m,memory=64Mi", "cpu=200m,memory=128Mi")
		p.Status.QOSClass = v1.PodQOSBurstable
		r := p.Spec.Containers[0].Resources
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", Resources: &r,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
		if mutate != nil {
			mutate(p)
		}
	})
}

func TestPodResize(t *testing.T) {
	setApp := func(requests, limits string) func(*v1.Pod) {
		return func(p *v1.Pod) { p.Spec.Containers[0].Resources = resizeRes(requests, limits) }
	}
	tests := []struct {
		name   string
		old    func(*v1.Pod)
		mutate func(*v1.Pod)
		want   string // a part of the error, "" for none
		check  func(t *testing.T, got *v1.Pod)
	}{{
		name:   "cpu and memory up",
		mutate: setApp("cpu=150m,memory=96Mi", "cpu=300m,memory=256Mi"),
		check: func(t *testing.T, got *v1.Pod) {
			if q := got.Spec.Containers[0].Resources.Limits[v1.ResourceMemory]; q.String() != "256Mi" {
				t.Errorf("memory limit = %s, want 256Mi", q.String())
			}
		},
	}, {
		name:   "memory limit down",
		mutate: setApp("cpu=100m,memory=64Mi", "cpu=200m,memory=100Mi"),
	}, {
		name:   "adding a limit keeps Burstable",
		old:    setApp("cpu=100m", ""),
		mutate: setApp("cpu=150m", "cpu=300m"),
	}, {
		name:   "QoS class may not change",
		old:    func(p *v1.Pod) { p.Spec.InitContainers = nil },
		mutate: setApp("cpu=200m,memory=128Mi", "cpu=200m,memory=128Mi"),
		want:   "spec: Invalid value: \"Burstable\": Pod QOS Class may not change as a result of resizing",
	}, {
		name:   "requests cannot be removed",
		old:    setApp("cpu=100m,memory=64Mi", ""),
		mutate: setApp("cpu=100m", ""),
		want:   "spec.containers[0].resources.requests: Forbidden: resource requests cannot be removed",
	}, {
		name:   "limits cannot be removed",
		mutate: setApp("cpu=100m,memory=64Mi", "cpu=200m"),
		want:   "spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed",
	}, {
		name: "only cpu and memory are mutable",
		mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests[v1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
		},
		want: "spec: Forbidden: only cpu and memory resources are mutable",
	}, {
		name:   "other changes are dropped, not refused",
		mutate: func(p *v1.Pod) { p.Spec.Containers[0].Image = "nginx:2"; p.Labels = map[string]string{"a": "b"} },
		check: func(t *testing.T, got *v1.Pod) {
			if got.Spec.Containers[0].Image != "nginx:1.27" || got.Labels["a"] != "" {
				t.Errorf("resize kept image %q and labels %v", got.Spec.Containers[0].Image, got.Labels)
			}
		},
	}, {
		name: "containers may not be added",
		mutate: func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "two", Image: "busybox"})
		},
		want: "spec.containers: Forbidden: containers may not be added or removed on resize",
	}, {
		name:   "containers may not be renamed",
		mutate: func(p *v1.Pod) { p.Spec.Containers[0].Name = "other" },
		want:   "spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize",
	}, {
		// v1.37 lets a resize change cpu and memory only, not the policy.
		name: "resize policy may not change",
		mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}
		},
		want: "spec: Forbidden: only cpu and memory resources are mutable",
	}, {
		name: "static pods cannot be resized",
		old: func(p *v1.Pod) {
			p.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "x"}
		},
		mutate: setApp("cpu=150m,memory=64Mi", "cpu=200m,memory=128Mi"),
		want:   "Forbidden: static pods cannot be resized",
	}, {
		name: "a node without resize support",
		old: func(p *v1.Pod) {
			p.Status.ContainerStatuses[0].Resources = nil
		},
		mutate: setApp("cpu=150m,memory=64Mi", "cpu=200m,memory=128Mi"),
		want:   "spec: Forbidden: Pod running on node without support for resize",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := resizablePod(tc.old)
			got, errs := resizeUpdate(t, old, tc.mutate)
			if tc.want == "" && errs != "" {
				t.Fatalf("unexpected errors: %s", errs)
			}
			if tc.want != "" && !strings.Contains(errs, tc.want) {
				t.Fatalf("errors %q do not contain %q", errs, tc.want)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// A plain update still may not change resources.
func TestPodUpdateRefusesResources(t *testing.T) {
	old := resizablePod(nil)
	pod := old.DeepCopy()
	pod.Spec.Containers[0].Resources = resizeRes("cpu=150m,memory=64Mi", "cpu=200m,memory=128Mi")
	errs := errString(PodResource().ValidateUpdate(pod, old))
	if !strings.Contains(errs, "pod updates may not change fields other than") {
		t.Fatalf("errors = %q, want the pod update refusal", errs)
	}
}

// The resize write keeps the stored metadata but the resourceVersion precondition.
func TestPodResizeKeepsMetadata(t *testing.T) {
	old := resizablePod(func(p *v1.Pod) { p.Generation = 3; p.UID = "u1" })
	got, errs := resizeUpdate(t, old, func(p *v1.Pod) {
		p.Spec.Containers[0].Resources = resizeRes("cpu=150m,memory=64Mi", "cpu=200m,memory=128Mi")
		p.ObjectMeta = metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, ResourceVersion: "9"}
	})
	if errs != "" {
		t.Fatal(errs)
	}
	if got.UID != "u1" || got.Generation != 3 || got.ResourceVersion != "9" {
		t.Errorf("metadata uid=%q generation=%d resourceVersion=%q, want u1, 3 (the handlers bump it), 9", got.UID, got.Generation, got.ResourceVersion)
	}
}
