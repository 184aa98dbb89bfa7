package imagestore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// smallStore opens a store on a tmpfs of size bytes, unmounted when the test ends.
func smallStore(t *testing.T, size int) *Store {
	t.Helper()
	requireRoot(t)
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount tmpfs: %v", err)
		}
	})
	s, err := Open(filepath.Join(mnt, "images"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDiskFull(t *testing.T) {
	const limit = 1 << 20
	big := strings.Repeat("x", 2*limit)
	t.Run("put", func(t *testing.T) {
		s := smallStore(t, limit)
		small := put(t, s, makeImage(t, []v1.Layer{plainLayer(t, file("a", "1"))}), "small")
		img := makeImage(t, []v1.Layer{plainLayer(t, file("a", "1")), plainLayer(t, file("big", big))})
		_, err := s.Put(context.Background(), img, "big")
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Put = %v, want ENOSPC", err)
		}
		t.Logf("Put: %v", err)
		m, _ := img.Manifest()
		for _, want := range []string{"docker.io/library/big:latest", "layer 1", m.Layers[1].Digest.String()} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
		list, err := s.List()
		if err != nil || len(list) != 1 || list[0].Digest != small.Digest {
			t.Errorf("List = %v, %v; want only the small image", list, err)
		}
		if names := dirNames(t, filepath.Join(s.Dir(), "tmp")); len(names) != 0 {
			t.Errorf("tmp/ holds %v", names)
		}
	})
	t.Run("unpack", func(t *testing.T) {
		s := smallStore(t, limit)
		// Zeros compress well: the blob fits, the unpacked file does not.
		img := put(t, s, makeImage(t, []v1.Layer{gzipLayer(t, file("zeros", strings.Repeat("\x00", 2*limit)))}), "zeros")
		_, err := s.Lowers(context.Background(), img)
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Lowers = %v, want ENOSPC", err)
		}
		t.Logf("Lowers: %v", err)
		if !strings.Contains(err.Error(), "docker.io/library/zeros:latest") || !strings.Contains(err.Error(), "layer 0") {
			t.Errorf("error %q does not name the image and the layer", err)
		}
		for _, d := range []string{"layers", "tmp"} {
			if names := dirNames(t, filepath.Join(s.Dir(), d)); len(names) != 0 {
				t.Errorf("%s/ holds %v", d, names)
			}
		}
	})
}
