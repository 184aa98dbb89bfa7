package runtime

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
)

// imageVolumeEnv is a fake start env for planPod with an image volume "img" of ref mounted by its container as
// mount says, and the volume's directory, as the volume manager makes it, in the pod
// state. The directory stands for the mounted image: the fake runner mounts nothing,
// so what a test puts there is what "the image" holds.
func imageVolumeEnv(t *testing.T, ref string, mount v1.VolumeMount, mutate func(*v1.Pod)) (*fakeStartEnv, string) {
	t.Helper()
	pod := planPod(func(pod *v1.Pod) {
		pod.Spec.Volumes = []v1.Volume{{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: ref, PullPolicy: v1.PullIfNotPresent}}}}
		mount.Name = "img"
		pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{mount}
		if mutate != nil {
			mutate(pod)
		}
	})
	e := newFakeStartEnv(t, pod)
	dir := filepath.Join(t.TempDir(), "kubernetes.io~image", "img")
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etc", "os-release"), []byte("NAME=x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.ps.volumes = map[string]string{"img": dir}
	return e, dir
}

// mountAt is the spec's mount at dest.
func mountAt(t *testing.T, spec specs.Spec, dest string) specs.Mount {
	t.Helper()
	for _, m := range spec.Mounts {
		if m.Destination == dest {
			return m
		}
	}
	t.Fatalf("no mount at %s in %+v", dest, spec.Mounts)
	return specs.Mount{}
}

// started returns c's running instance's spec, failing the test when c is not
// running, and kills it at the end of the test.
func (e *fakeStartEnv) started(t *testing.T, c *container) specs.Spec {
	t.Helper()
	e.ps.mu.Lock()
	inst := c.inst
	e.ps.mu.Unlock()
	if inst == nil {
		t.Fatalf("not running: waiting %+v", c.waiting)
	}
	t.Cleanup(func() {
		if err := e.run.Kill(context.Background(), inst.id, syscall.SIGKILL); err == nil {
			<-inst.done
		}
	})
	spec, ok := e.run.Spec(inst.id)
	if !ok {
		t.Fatal("the runner does not know the instance")
	}
	return spec
}

// drain returns the events recorded so far.
func (e *fakeStartEnv) drain() []string {
	var out []string
	for {
		select {
		case ev := <-e.events.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func TestImageVolumeMount(t *testing.T) {
	t.Run("the image is mounted on the volume and bound read-only and noexec", func(t *testing.T) {
		e, dir := imageVolumeEnv(t, "example.test/app:1", v1.VolumeMount{MountPath: "/volume"}, nil)
		spec := e.started(t, e.startOnce())
		if got := e.run.ImageMount(dir); len(got) != 1 {
			t.Errorf("image mounted on %s from %v, want the image's one layer", dir, got)
		}
		m := mountAt(t, spec, "/volume")
		if m.Source != dir || !slices.Equal(m.Options, []string{"rbind", "rprivate", "ro", "noexec"}) {
			t.Errorf("mount %+v, want %s bound ro and noexec although the volumeMount is not readOnly", m, dir)
		}
		if ev := strings.Join(e.drain(), "\n"); !strings.Contains(ev, `Normal Pulled Container image "example.test/app:1" already present on machine`) {
			t.Errorf("events:\n%s\nwant the volume image's Pulled", ev)
		}
		// The volume's image is leased, as a container's image is: image rm refuses it.
		img, err := e.m.cfg.Images.Store().Get("example.test/app:1")
		if err != nil {
			t.Fatal(err)
		}
		if pods, err := e.m.cfg.Images.Store().InUse(img.Digest); err != nil || !slices.Contains(pods, podID(e.ps.pod)) {
			t.Errorf("InUse = %v, %v; want the pod, whose image volume uses the image", pods, err)
		}
	})
	t.Run("a subPath of the image", func(t *testing.T) {
		e, dir := imageVolumeEnv(t, "example.test/app:1", v1.VolumeMount{MountPath: "/etc-of-image", SubPath: "etc"}, nil)
		spec := e.started(t, e.startOnce())
		if m := mountAt(t, spec, "/etc-of-image"); m.Source != filepath.Join(dir, "etc") || !slices.Contains(m.Options, "ro") {
			t.Errorf("mount %+v, want %s/etc read-only", m, dir)
		}
	})
	t.Run("a file as subPathExpr", func(t *testing.T) {
		e, dir := imageVolumeEnv(t, "example.test/app:1", v1.VolumeMount{MountPath: "/os-release", SubPathExpr: "$(D)/os-release"}, func(pod *v1.Pod) {
			pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "D", Value: "etc"}}
		})
		spec := e.started(t, e.startOnce())
		if m := mountAt(t, spec, "/os-release"); m.Source != filepath.Join(dir, "etc", "os-release") {
			t.Errorf("mount %+v, want the image's etc/os-release", m)
		}
	})
	t.Run("a subPath through links is resolved inside the image", func(t *testing.T) {
		e, dir := imageVolumeEnv(t, "example.test/app:1", v1.VolumeMount{MountPath: "/x", SubPath: "up/os-release"}, nil)
		if err := os.Symlink("../../../etc", filepath.Join(dir, "up")); err != nil {
			t.Fatal(err)
		}
		spec := e.started(t, e.startOnce())
		if m := mountAt(t, spec, "/x"); m.Source != filepath.Join(dir, "etc", "os-release") {
			t.Errorf("mount %+v, want the image's etc/os-release, not the host's", m)
		}
	})
	t.Run("a subPath the image lacks is not created: CreateContainerError", func(t *testing.T) {
		e, dir := imageVolumeEnv(t, "example.test/app:1", v1.VolumeMount{MountPath: "/x", SubPath: "nope"}, nil)
		c := e.startOnce()
		want := `ImageVolumeMountFailed: subPath "nope" of volume "img" does not exist in image "example.test/app:1"`
		if c.waiting == nil || c.waiting.Reason != "CreateContainerError" || c.waiting.Message != want {
			t.Fatalf("waiting %+v, want CreateContainerError %q", c.waiting, want)
		}
		if _, err := os.Lstat(filepath.Join(dir, "nope")); err == nil || len(e.run.Started) != 0 {
			t.Errorf("started %d, created nope: %v; want nothing started or created", len(e.run.Started), err == nil)
		}
	})
}

func TestResolveInRoot(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"etc", "usr/lib"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"etc/os-release": "../usr/lib/os-release",
		"abs":            "/usr/lib",
		"escape":         "../../../../..",
		"loop":           "loop",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ sub, want, err string }{
		{"", "/", ""},
		{"etc", "/etc", ""},
		{"etc/os-release", "/usr/lib/os-release", ""},
		{"abs/os-release", "/usr/lib/os-release", ""},
		{"escape/etc", "/etc", ""},
		{"missing/x", "/missing/x", ""},
		{"loop", "", "too many levels of symbolic links"},
	} {
		got, err := resolveInRoot(root, tc.sub)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: %q, %v; want error %q", tc.sub, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != filepath.Join(root, tc.want) {
			t.Errorf("%q: %q, %v; want %s inside the root", tc.sub, got, err, tc.want)
		}
	}
}

func TestImageVolumePullFailure(t *testing.T) {
	const ref = "example.test/missing:1"
	t.Run("the container mounting it: ErrImagePull, then ImagePullBackOff", func(t *testing.T) {
		e, dir := imageVolumeEnv(t, ref, v1.VolumeMount{MountPath: "/volume"}, nil)
		c := e.startOnce()
		if c.waiting == nil || c.waiting.Reason != "ErrImagePull" || !strings.Contains(c.waiting.Message, ref) {
			t.Fatalf("waiting %+v, want ErrImagePull naming %s", c.waiting, ref)
		}
		ev := strings.Join(e.drain(), "\n")
		for _, want := range []string{`Warning Failed Failed to pull image "` + ref + `"`, "Warning Failed Error: ErrImagePull"} {
			if !strings.Contains(ev, want) {
				t.Errorf("events:\n%s\nwant %q", ev, want)
			}
		}
		c = e.startOnce()
		if c.waiting == nil || c.waiting.Reason != "ImagePullBackOff" || !strings.HasPrefix(c.waiting.Message, `Back-off pulling image "`+ref+`"`) {
			t.Fatalf("second try: waiting %+v, want ImagePullBackOff", c.waiting)
		}
		if len(e.run.Started) != 0 || e.run.ImageMount(dir) != nil {
			t.Errorf("started %d, image mount %v: want nothing", len(e.run.Started), e.run.ImageMount(dir))
		}
	})
	t.Run("a container that does not mount it starts", func(t *testing.T) {
		e, _ := imageVolumeEnv(t, ref, v1.VolumeMount{MountPath: "/volume"}, func(pod *v1.Pod) {
			pod.Spec.Containers[0].VolumeMounts = nil
		})
		e.started(t, e.startOnce())
	})
	t.Run("a reference that does not parse: InvalidImageName", func(t *testing.T) {
		e, _ := imageVolumeEnv(t, "Not A Reference", v1.VolumeMount{MountPath: "/volume"}, nil)
		if c := e.startOnce(); c.waiting == nil || c.waiting.Reason != "InvalidImageName" {
			t.Fatalf("waiting %+v, want InvalidImageName", c.waiting)
		}
	})
}
