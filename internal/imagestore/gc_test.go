package imagestore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// fakeDisk is a file system of capacity bytes that holds the store and other bytes besides.
func fakeDisk(t *testing.T, s *Store, capacity, other int64) UsageFunc {
	return func() (Usage, error) {
		used := other
		err := filepath.WalkDir(s.Dir(), func(_ string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.Type().IsRegular() {
				fi, err := e.Info()
				if err != nil {
					return err
				}
				used += fi.Size()
			}
			return nil
		})
		return Usage{Capacity: capacity, Available: capacity - used}, err
	}
}

func storeBytes(t *testing.T, s *Store) int64 {
	u, err := fakeDisk(t, s, 0, 0)()
	if err != nil {
		t.Fatal(err)
	}
	return -u.Available
}

// threeImages stores old, mid and new (64 KiB of random layer each), used in that order.
func threeImages(t *testing.T, s *Store) (old, mid, recent Image) {
	t.Helper()
	var out []Image
	for i, n := range []string{"old:1", "mid:1", "new:1"} {
		img, err := random.Image(64<<10, 1)
		if err != nil {
			t.Fatal(err)
		}
		stored := put(t, s, img, n)
		used := time.Now().Add(time.Duration(i-3) * time.Hour)
		h, _ := v1.NewHash(stored.Digest)
		s.touchUsed(h)
		if err := os.Chtimes(s.usedPath(h), used, used); err != nil {
			t.Fatal(err)
		}
		out = append(out, stored)
	}
	return out[0], out[1], out[2]
}

func storedNames(t *testing.T, s *Store) []string {
	images, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, img := range images {
		for _, n := range img.Names {
			if !strings.Contains(n, "@") {
				out = append(out, n)
			}
		}
	}
	return sorted(out)
}

func TestGarbageCollect(t *testing.T) {
	ctx := context.Background()
	policy := GCPolicy{HighThresholdPercent: DefaultGCHighThresholdPercent, LowThresholdPercent: DefaultGCLowThresholdPercent}

	t.Run("under the high threshold nothing goes", func(t *testing.T) {
		s := newStore(t)
		threeImages(t, s)
		total := storeBytes(t, s)
		res, err := s.GarbageCollect(ctx, policy, fakeDisk(t, s, total*2, 0))
		if err != nil || len(res.Removed) != 0 || res.UsagePercent != 50 {
			t.Fatalf("GarbageCollect at 50%% = %+v, %v; want nothing removed", res, err)
		}
	})

	t.Run("least recently used first, down to the low threshold", func(t *testing.T) {
		s := newStore(t)
		threeImages(t, s)
		total := storeBytes(t, s)
		// 90% used; reaching 80% frees a ninth of the store's bytes, less than one image.
		res, err := s.GarbageCollect(ctx, policy, fakeDisk(t, s, total*10/9, 0))
		if err != nil {
			t.Fatal(err)
		}
		if res.UsagePercent < 89 || len(res.Removed) != 1 || res.Freed < res.ToFree {
			t.Errorf("result %+v, want one image removed and enough freed", res)
		}
		if diff := cmp.Diff([]string{"docker.io/library/mid:1", "docker.io/library/new:1"}, storedNames(t, s)); diff != "" {
			t.Errorf("images left (-want +got):\n%s", diff)
		}
	})

	t.Run("never an image in use; FreeDiskSpaceFailed when not enough", func(t *testing.T) {
		s := newStore(t)
		old, _, _ := threeImages(t, s)
		lease(t, s, old, "default/keeper", time.Time{})
		total := storeBytes(t, s)
		// Other data fills the disk: nothing the images free is enough.
		capacity := total * 20
		res, err := s.GarbageCollect(ctx, policy, fakeDisk(t, s, capacity, capacity-total-total/10))
		var fe *FreeSpaceError
		if !errors.As(err, &fe) {
			t.Fatalf("err = %v, want a FreeSpaceError", err)
		}
		for _, w := range []string{"Insufficient free disk space on the node's image filesystem", "% of ", "Failed to free sufficient space by deleting unused images (freed "} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("message %q lacks %q", err, w)
			}
		}
		if len(res.Removed) != 2 || res.Freed <= 0 {
			t.Errorf("result %+v, want both unused images removed", res)
		}
		if diff := cmp.Diff([]string{"docker.io/library/old:1"}, storedNames(t, s)); diff != "" {
			t.Errorf("images left (-want +got):\n%s", diff)
		}
		if _, err := s.Get("old:1"); err != nil {
			t.Errorf("the image in use: %v", err)
		}
	})

	t.Run("images used within MinAge stay", func(t *testing.T) {
		s := newStore(t)
		threeImages(t, s)
		total := storeBytes(t, s)
		capacity := total * 20
		p := policy
		p.MinAge = 150 * time.Minute // old was used 3 hours ago, mid 2, new 1
		_, err := s.GarbageCollect(ctx, p, fakeDisk(t, s, capacity, capacity-total-total/10))
		var fe *FreeSpaceError
		if !errors.As(err, &fe) {
			t.Fatalf("err = %v, want a FreeSpaceError", err)
		}
		if diff := cmp.Diff([]string{"docker.io/library/mid:1", "docker.io/library/new:1"}, storedNames(t, s)); diff != "" {
			t.Errorf("images left (-want +got):\n%s", diff)
		}
	})

	t.Run("bad thresholds", func(t *testing.T) {
		s := newStore(t)
		_, err := s.GarbageCollect(ctx, GCPolicy{HighThresholdPercent: 80, LowThresholdPercent: 85}, fakeDisk(t, s, 1, 0))
		if err == nil || !strings.Contains(err.Error(), "imageGCLowThresholdPercent (--image-gc-low-threshold) 85 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 80") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB", 2 << 40: "2.0 TiB"} {
		if got := HumanSize(n); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", n, got, want)
		}
	}
}
