package volumes

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestResourceFieldValue(t *testing.T) {
	pod := makePod(func(p *v1.Pod) {
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("100Mi")},
			Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")},
		}
		p.Spec.InitContainers = []v1.Container{{Name: "init"}}
	})
	node := func() (v1.ResourceList, error) {
		return v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}, nil
	}
	cases := []struct {
		container, res, divisor string
		want, wantErr           string
	}{
		{"c", "requests.cpu", "", "2", ""},
		{"c", "requests.cpu", "1m", "1500", ""},
		{"c", "requests.memory", "", "104857600", ""},
		{"c", "limits.memory", "1Mi", "1024", ""},
		{"c", "limits.cpu", "", "4", ""},
		{"init", "limits.memory", "1Gi", "8", ""},
		{"init", "requests.cpu", "", "0", ""},
		{"c", "limits.gpu", "", "", "unsupported container resource : limits.gpu"},
		{"nope", "limits.cpu", "", "", "container nope not found"},
	}
	for _, tc := range cases {
		t.Run(tc.container+" "+tc.res+"/"+tc.divisor, func(t *testing.T) {
			ref := &v1.ResourceFieldSelector{ContainerName: tc.container, Resource: tc.res}
			if tc.divisor != "" {
				ref.Divisor = resource.MustParse(tc.divisor)
			}
			got, err := resourceFieldValue(pod, ref, node)
			if got != tc.want || (err != nil) != (tc.wantErr != "") || (err != nil && err.Error() != tc.wantErr) {
				t.Errorf("got %q, %v; want %q, %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
	failing := func() (v1.ResourceList, error) { return nil, errors.New("no node") }
	if _, err := resourceFieldValue(pod, &v1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.memory"}, failing); err != nil {
		t.Errorf("a set limit must not read the node: %v", err)
	}
}

func TestPodFieldValue(t *testing.T) {
	pod := makePod(nil)
	cases := []struct{ path, want, wantErr string }{
		{"metadata.labels['tier']", "front", ""},
		{"metadata.labels['missing']", "", ""},
		{"metadata.annotations['note']", `say "hi"`, ""},
		{"metadata.name['x']", "", `fieldPath "metadata.name['x']" does not support subscript`},
		{"status.podIP", "", "unsupported fieldPath: status.podIP"},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			got, err := podFieldValue(pod, tc.path)
			if got != tc.want || errString(err) != map[bool]string{true: "<nil>", false: tc.wantErr}[tc.wantErr == ""] {
				t.Errorf("got %q, %v; want %q, %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestServiceAccountVolume(t *testing.T) {
	mount := func(p *v1.Pod) {
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "mine", MountPath: ServiceAccountMountPath}}
	}
	cases := []struct {
		name   string
		mutate func(*v1.Pod)
		want   bool
	}{
		{"default pod", nil, true},
		{"automount true", func(p *v1.Pod) { p.Spec.AutomountServiceAccountToken = ptr.To(true) }, true},
		{"automount false", func(p *v1.Pod) { p.Spec.AutomountServiceAccountToken = ptr.To(false) }, false},
		{"already has the volume", withVolume(v1.Volume{Name: "kube-api-access-abcde"}), false},
		{"every container mounts the path itself", mount, false},
		{"an init container still needs it", func(p *v1.Pod) { mount(p); p.Spec.InitContainers = []v1.Container{{Name: "i"}} }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vol, m, ok := ServiceAccountVolume(makePod(tc.mutate))
			if ok != tc.want {
				t.Fatalf("ok = %v, want %v", ok, tc.want)
			}
			if !ok {
				return
			}
			if len(vol.Name) != len("kube-api-access-xxxxx") || m.Name != vol.Name || !m.ReadOnly || m.MountPath != ServiceAccountMountPath {
				t.Errorf("volume %q mount %+v", vol.Name, m)
			}
			again, _, _ := ServiceAccountVolume(makePod(tc.mutate))
			if diff := cmp.Diff(vol, again); diff != "" {
				t.Errorf("not deterministic (-first +second):\n%s", diff)
			}
		})
	}
	if _, _, ok := ServiceAccountVolume(nil); ok {
		t.Error("nil pod got a volume")
	}
}

// TestServiceAccountVolumeFiles prepares the kube-api-access volume and
// checks that the three files appear as pods expect them.
func TestServiceAccountVolumeFiles(t *testing.T) {
	f := newFixture(t, makeConfigMap(RootCAConfigMap, map[string]string{"ca.crt": "PEM"}))
	pod := makePod(nil)
	vol, _, _ := ServiceAccountVolume(pod)
	pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
	paths, err := f.m.Prepare(t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"token": "-rw-r--r-- token-1-", "ca.crt": "-rw-r--r-- PEM", "namespace": "-rw-r--r-- ns"}
	if diff := cmp.Diff(want, readVolume(t, paths[vol.Name])); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}
