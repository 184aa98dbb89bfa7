package imagestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// tree lists every path under root with its content ("" for directories and links).
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		} else {
			out[rel] = ""
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMountRootfs(t *testing.T) {
	requireRoot(t)
	bottom := gzipLayer(t,
		file("etc/os-release", "ID=test"),
		file("etc/gone", "x"),
		file("var/lib/app/old", "old"),
		file("var/lib/app/sub/deep", "deep"),
		file("keep/a", "a"),
	)
	middle := plainLayer(t,
		whiteout("etc/gone"),
		opaque("var/lib/app"),
		file("var/lib/app/new", "new"),
	)
	top := gzipLayer(t,
		file("etc/os-release", "ID=top"),
		whiteout("keep"),
		file("keep2", "b"),
	)
	cases := []struct {
		name   string
		layers []v1.Layer
		want   map[string]string
	}{
		{
			name:   "single layer",
			layers: []v1.Layer{bottom},
			want: map[string]string{
				"etc": "", "etc/os-release": "ID=test", "etc/gone": "x",
				"var": "", "var/lib": "", "var/lib/app": "", "var/lib/app/old": "old",
				"var/lib/app/sub": "", "var/lib/app/sub/deep": "deep",
				"keep": "", "keep/a": "a",
			},
		},
		{
			name:   "whiteouts and opaque directories",
			layers: []v1.Layer{bottom, middle, top},
			want: map[string]string{
				"etc": "", "etc/os-release": "ID=top",
				"var": "", "var/lib": "", "var/lib/app": "", "var/lib/app/new": "new",
				"keep2": "b",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			img := put(t, s, makeImage(t, tc.layers), "app")
			lowers, err := s.Lowers(context.Background(), img)
			if err != nil {
				t.Fatal(err)
			}
			c := filepath.Join(t.TempDir(), "c")
			upper, work, target := filepath.Join(c, "upper"), filepath.Join(c, "work"), filepath.Join(c, "rootfs")
			if err := MountRootfs(lowers, upper, work, target); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := UnmountRootfs(upper, work, target); err != nil {
					t.Error(err)
				}
			})
			if diff := cmp.Diff(tc.want, tree(t, target)); diff != "" {
				t.Errorf("merged view (-want +got):\n%s", diff)
			}
			// Writable, and writes land in upper, never in the shared layers.
			if err := os.WriteFile(filepath.Join(target, "etc/os-release"), []byte("ID=mine"), 0o644); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(filepath.Join(upper, "etc/os-release")); string(b) != "ID=mine" {
				t.Errorf("upper etc/os-release = %q", b)
			}
			for _, l := range lowers {
				if b, err := os.ReadFile(filepath.Join(l, "etc/os-release")); err == nil && string(b) == "ID=mine" {
					t.Errorf("a write reached the lower layer %s", l)
				}
			}
		})
	}
}

func TestUnmountRootfs(t *testing.T) {
	requireRoot(t)
	s := newStore(t)
	img := put(t, s, makeImage(t, []v1.Layer{plainLayer(t, file("f", "1"))}), "app")
	lowers, err := s.Lowers(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	c := t.TempDir()
	upper, work, target := filepath.Join(c, "upper"), filepath.Join(c, "work"), filepath.Join(c, "rootfs")
	if err := MountRootfs(lowers, upper, work, target); err != nil {
		t.Fatal(err)
	}
	// A busy mount (an open file in it) is detached lazily.
	busy, err := os.Open(filepath.Join(target, "f"))
	if err != nil {
		UnmountRootfs(upper, work, target)
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	if err := UnmountRootfs(upper, work, target); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{upper, work, target} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists: %v", p, err)
		}
	}
	// Unmounting again (say after a crash) is not an error.
	if err := UnmountRootfs(upper, work, target); err != nil {
		t.Errorf("second UnmountRootfs: %v", err)
	}
}

func TestMountRootfsRefuses(t *testing.T) {
	c := t.TempDir()
	cases := []struct {
		name    string
		lowers  []string
		wantErr string
	}{
		{name: "no lowers", wantErr: "no lower directories"},
		{name: "colon", lowers: []string{"/x:y"}, wantErr: "overlay mount options cannot carry"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := MountRootfs(tc.lowers, filepath.Join(c, "u"), filepath.Join(c, "w"), filepath.Join(c, "m"))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("MountRootfs = %v, want an error saying %q", err, tc.wantErr)
			}
		})
	}
}

// TestMountRootfsManyLowers mounts more lower directories than fit in one page of mount(2)
// options.
func TestMountRootfsManyLowers(t *testing.T) {
	requireRoot(t)
	c := t.TempDir()
	var lowers []string
	for i := range 100 {
		l := filepath.Join(c, "lower", fmt.Sprintf("%03d-%s", i, strings.Repeat("x", 40)))
		if err := os.MkdirAll(l, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(l, fmt.Sprintf("f%03d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		lowers = append(lowers, l)
	}
	upper, work, target := filepath.Join(c, "upper"), filepath.Join(c, "work"), filepath.Join(c, "rootfs")
	if err := MountRootfs(lowers, upper, work, target); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := UnmountRootfs(upper, work, target); err != nil {
			t.Error(err)
		}
	})
	if got := len(dirNames(t, target)); got != 100 {
		t.Errorf("merged view has %d files, want one from each of 100 lowers", got)
	}
}
