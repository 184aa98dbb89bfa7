package core

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// withImageVolume adds an image volume "img" of ref with policy, mounted at /img by
// the first container.
func withImageVolume(ref string, policy v1.PullPolicy) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: ref, PullPolicy: policy}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: "img", MountPath: "/img"})
	}
}

func TestDefaultImageVolumePullPolicy(t *testing.T) {
	for _, tc := range []struct {
		ref    string
		policy v1.PullPolicy
		want   v1.PullPolicy
	}{
		{"registry.k8s.io/e2e-test-images/kitten:1.8", "", v1.PullIfNotPresent},
		{"example.test/data:latest", "", v1.PullAlways},
		{"example.test/data", "", v1.PullAlways},
		{"example.test/data@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "", v1.PullIfNotPresent},
		{"example.test/data:latest", v1.PullNever, v1.PullNever},
		{"", "", v1.PullIfNotPresent},
	} {
		pod := makePod(withImageVolume(tc.ref, tc.policy))
		podDefault(pod)
		if got := pod.Spec.Volumes[0].Image.PullPolicy; got != tc.want {
			t.Errorf("%q with pullPolicy %q: defaulted to %q, want %q", tc.ref, tc.policy, got, tc.want)
		}
	}
}

func TestValidateImageVolume(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*v1.Pod)
		want   string
	}{{
		name: "valid, with a subPath",
		mutate: func(p *v1.Pod) {
			withImageVolume("example.test/data:1", "")(p)
			p.Spec.Containers[0].VolumeMounts[0].SubPath = "etc"
		},
	}, {
		name:   "reference required",
		mutate: withImageVolume("", v1.PullAlways),
		want:   `[spec.volumes[0].image.reference: Required value, spec.containers[0].volumeMounts[0].name: Not found: "img"]`,
	}, {
		name:   "pull policy not supported",
		mutate: withImageVolume("example.test/data:1", "Sometimes"),
		want:   `[spec.volumes[0].image.pullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never", spec.containers[0].volumeMounts[0].name: Not found: "img"]`,
	}, {
		name: "another volume type beside",
		mutate: func(p *v1.Pod) {
			withImageVolume("example.test/data:1", "")(p)
			p.Spec.Volumes[0].EmptyDir = &v1.EmptyDirVolumeSource{}
		},
		want: `[spec.volumes[0].image: Forbidden: may not specify more than 1 volume type, spec.containers[0].volumeMounts[0].name: Not found: "img"]`,
	}, {
		name: "bindMountOptions on an image volume",
		mutate: func(p *v1.Pod) {
			withImageVolume("example.test/data:1", "")(p)
			p.Spec.Containers[0].VolumeMounts[0].BindMountOptions = []string{"noexec"}
		},
		want: `spec.containers[0].volumeMounts[0].bindMountOptions: Invalid value: ["noexec"]: bindMountOptions may not be used with image volumes`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			pod := makePod(tc.mutate)
			podDefault(pod)
			if got := errString(ValidatePodSpec(&pod.Spec, field.NewPath("spec"))); got != tc.want {
				t.Errorf("ValidatePodSpec:\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}
