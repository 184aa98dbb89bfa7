package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// layerDirs makes one directory per layer, top first, each holding the given files
// (path: content).
func layerDirs(t *testing.T, layers ...map[string]string) []string {
	t.Helper()
	var out []string
	for i, files := range layers {
		dir := filepath.Join(t.TempDir(), "layer", string(rune('a'+i)))
		for p, data := range files {
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, p), []byte(data), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, dir)
	}
	return out
}

func TestPrepareImageVolume(t *testing.T) {
	f := newFixture(t)
	pod := makePod(withVolume(v1.Volume{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "example.test/data:1", PullPolicy: v1.PullIfNotPresent}}}))
	paths, err := f.m.Prepare(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(f.root, "pods/uid-1/volumes/kubernetes.io~image/img")
	if paths["img"] != want {
		t.Fatalf("path %s, want %s", paths["img"], want)
	}
	if fi, err := os.Stat(want); err != nil || !fi.IsDir() {
		t.Fatalf("mount point %s: %v", want, err)
	}
}

// TestMountImage mounts real overlays: the image's layers merged, read-only, noexec,
// once; Cleanup unmounts them and removes the volume directories.
func TestMountImage(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting an overlay needs root")
	}
	for _, tc := range []struct {
		name   string
		layers []map[string]string
		want   map[string]string
	}{
		{"one layer", []map[string]string{{"data.json": "{}\n", "bin/tool": "#!/bin/sh\n"}}, map[string]string{"data.json": "{}\n"}},
		{"layers merged and the top one wins", []map[string]string{{"etc/os-release": "top\n"}, {"etc/os-release": "base\n", "data.json": "{}\n", "bin/tool": "#!/bin/sh\n"}},
			map[string]string{"etc/os-release": "top\n", "data.json": "{}\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			pod := makePod(withVolume(v1.Volume{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "example.test/data:1"}}}))
			paths, err := f.m.Prepare(context.Background(), pod)
			if err != nil {
				t.Fatal(err)
			}
			target := paths["img"]
			t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
			lowers := layerDirs(t, tc.layers...)
			if err := MountImage(lowers, target); err != nil {
				t.Fatal(err)
			}
			for p, data := range tc.want {
				if got, err := os.ReadFile(filepath.Join(target, p)); err != nil || string(got) != data {
					t.Errorf("%s: %q, %v; want %q", p, got, err, data)
				}
			}
			if err := os.WriteFile(filepath.Join(target, "new"), nil, 0o644); !errors.Is(err, unix.EROFS) {
				t.Errorf("writing into the image: %v, want EROFS", err)
			}
			var st unix.Statfs_t
			if err := unix.Statfs(target, &st); err != nil {
				t.Fatal(err)
			}
			if st.Flags&unix.ST_NOEXEC == 0 || st.Flags&unix.ST_NOSUID == 0 || st.Flags&unix.ST_RDONLY == 0 {
				t.Errorf("mount flags %#x, want ro, nosuid and noexec", st.Flags)
			}
			// A second mount (the next container of the pod) keeps the first.
			if err := MountImage(lowers[:1], target); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(mountInfo(t), " "+target+" "); n != 1 {
				t.Errorf("%d mounts on %s, want 1", n, target)
			}
			if err := f.m.Cleanup(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(mountInfo(t), " "+target+" ") {
				t.Error("Cleanup left the image mounted")
			}
			for _, l := range lowers {
				if _, err := os.Stat(l); err != nil {
					t.Errorf("layer %s: %v; the store's layers must survive Cleanup", l, err)
				}
			}
			if _, err := os.Stat(filepath.Join(f.root, "pods/uid-1/volumes")); !os.IsNotExist(err) {
				t.Errorf("volumes dir still there after Cleanup: %v", err)
			}
		})
	}
	t.Run("no layers", func(t *testing.T) {
		if err := MountImage(nil, t.TempDir()); err == nil || !strings.Contains(err.Error(), "no layers") {
			t.Errorf("err %v, want one saying the image has no layers", err)
		}
	})
}

func mountInfo(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
