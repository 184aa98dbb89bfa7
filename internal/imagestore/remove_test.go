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
	"golang.org/x/sys/unix"
)

// lease acquires a lease on img for pod in a fresh bundle directory and returns the directory.
func lease(t *testing.T, s *Store, img Image, pod string, created time.Time) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := s.Acquire(Lease{Digest: img.Digest, Pod: pod, Container: "c", Node: "n1", Dir: dir, Created: created}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func hexOf(d string) string { return strings.TrimPrefix(d, "sha256:") }

func TestLeases(t *testing.T) {
	s := newStore(t)
	img := put(t, s, makeImage(t, []v1.Layer{gzipLayer(t, file("a", "a"))}), "a:1")
	fresh := lease(t, s, img, "ns/fresh", time.Time{})
	lease(t, s, img, "ns/old-unmounted", time.Now().Add(-2*LeaseGrace))
	gone := lease(t, s, img, "ns/gone", time.Time{})
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	pods, err := s.InUse(img.Digest)
	if err != nil {
		t.Fatal(err)
	}
	// A lease past its grace whose root file system is not mounted (the cluster was stopped)
	// and one whose bundle is gone are stale.
	if diff := cmp.Diff([]string{"ns/fresh"}, pods); diff != "" {
		t.Errorf("InUse (-want +got):\n%s", diff)
	}
	before := s.LastUsed(img.Digest)
	time.Sleep(10 * time.Millisecond)
	if err := s.Release(fresh); err != nil {
		t.Fatal(err)
	}
	if !s.LastUsed(img.Digest).After(before) {
		t.Errorf("Release did not mark the image used")
	}
	if pods, _ := s.InUse(img.Digest); len(pods) != 0 {
		t.Errorf("InUse after release = %v", pods)
	}
	if _, err := s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left := dirNames(t, filepath.Join(s.Dir(), "leases")); len(left) != 0 {
		t.Errorf("stale leases left after Sweep: %v", left)
	}
}

func TestLeaseLiveWhileMounted(t *testing.T) {
	requireRoot(t)
	s := newStore(t)
	img := put(t, s, makeImage(t, []v1.Layer{gzipLayer(t, file("a", "a"))}), "a:1")
	dir := lease(t, s, img, "ns/p", time.Now().Add(-2*LeaseGrace))
	lowers, err := s.Lowers(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	if err := MountRootfs(lowers, filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "rootfs")); err != nil {
		t.Fatal(err)
	}
	defer UnmountRootfs(filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "rootfs"))
	if pods, _ := s.InUse(img.Digest); len(pods) != 1 {
		t.Fatalf("a lease past its grace with a mounted root file system is live; InUse = %v", pods)
	}
	// Even forced and swept, the mounted layers stay.
	if _, err := s.Remove(context.Background(), "a:1", true); err != nil {
		t.Fatal(err)
	}
	for _, d := range img.DiffIDs {
		if !isDir(filepath.Join(s.Dir(), "layers", hexOf(d))) {
			t.Errorf("layer %s of a mounted root file system was removed", d)
		}
	}
	if err := os.Remove(s.leasePath(dir)); err != nil {
		t.Fatal(err)
	}
	// Without any lease, the mount alone still protects the layers.
	if _, err := s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, d := range img.DiffIDs {
		if !isDir(filepath.Join(s.Dir(), "layers", hexOf(d))) {
			t.Errorf("layer %s of a mounted root file system was removed without a lease", d)
		}
	}
}

func TestRemove(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	s := newStore(t)
	shared := gzipLayer(t, file("lib/shared", "shared"))
	a := put(t, s, makeImage(t, []v1.Layer{shared, gzipLayer(t, file("a", "only a"))}), "a:1", "a:latest")
	b := put(t, s, makeImage(t, []v1.Layer{shared, gzipLayer(t, file("b", "only b"))}), "b:1")
	for _, img := range []Image{a, b} {
		if _, err := s.Lowers(ctx, img); err != nil {
			t.Fatal(err)
		}
	}
	dir := lease(t, s, a, "default/web", time.Time{})

	_, err := s.Remove(ctx, "a:1", false)
	var inUse *InUseError
	if !errors.As(err, &inUse) || !strings.Contains(err.Error(), "default/web") {
		t.Fatalf("Remove of an image in use = %v, want an InUseError naming default/web", err)
	}

	if _, err := s.Remove(ctx, "docker.io/library/b:1", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("b:1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("b after Remove: %v", err)
	}
	if _, err := s.Remove(ctx, "b:1", false); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Remove: %v, want ErrNotFound", err)
	}
	// The shared layer and all of a stay; b's own layer and blobs go.
	wantLayers := []string{hexOf(a.DiffIDs[0]), hexOf(a.DiffIDs[1])}
	if diff := cmp.Diff(sorted(wantLayers), dirNames(t, filepath.Join(s.Dir(), "layers"))); diff != "" {
		t.Errorf("layers after removing b (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sorted(blobsOf(t, s, a)), dirNames(t, filepath.Join(s.Dir(), "blobs", "sha256"))); diff != "" {
		t.Errorf("blobs after removing b (-want +got):\n%s", diff)
	}
	if _, err := s.Lowers(ctx, a); err != nil {
		t.Errorf("a after removing b: %v", err)
	}

	// Forced: the names go at once, the content stays while the container lives.
	if _, err := s.Remove(ctx, a.Digest, true); err != nil {
		t.Fatal(err)
	}
	if images, _ := s.List(); len(images) != 0 {
		t.Errorf("List after a forced remove: %v", names(images))
	}
	if got := dirNames(t, filepath.Join(s.Dir(), "layers")); len(got) != 2 {
		t.Errorf("layers of an image still leased were swept: %v", got)
	}
	if err := s.Release(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"layers", "blobs/sha256", "used", "leases"} {
		if left := dirNames(t, filepath.Join(s.Dir(), d)); len(left) != 0 {
			t.Errorf("%s/ after the last container is gone: %v", d, left)
		}
	}
	var links []string
	filepath.WalkDir(filepath.Join(s.Dir(), "l"), func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type()&fs.ModeSymlink != 0 {
			links = append(links, p)
		}
		return nil
	})
	if len(links) != 0 {
		t.Errorf("dangling short links: %v", links)
	}
}

// TestSweepKeepsWhatPutIsWriting: a Sweep waits for a Put in progress (which holds the content
// lock) instead of deleting the blobs it has written but not yet indexed.
func TestSweepKeepsWhatPutIsWriting(t *testing.T) {
	s := newStore(t)
	release, err := s.HoldContent(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := s.Sweep(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sweep while the content is held = %v, want it to wait", err)
	}
	release()
	if _, err := s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestOverlayLowers(t *testing.T) {
	line := "123 45 0:67 / /data/c/abc/rootfs rw,relatime - overlay overlay rw,lowerdir=/var/lib/tranche/images/l/aaa:/var/lib/tranche/images/l/bbb,upperdir=/x/upper,workdir=/x/work"
	if diff := cmp.Diff([]string{"/var/lib/tranche/images/l/aaa", "/var/lib/tranche/images/l/bbb"}, overlayLowers(line)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := overlayLowers("1 2 0:3 / /proc rw - proc proc rw"); got != nil {
		t.Errorf("non-overlay line: %v", got)
	}
}

func blobsOf(t *testing.T, s *Store, img Image) []string {
	t.Helper()
	keep, layers := map[string]bool{}, map[string]bool{}
	h, _ := v1.NewHash(img.Digest)
	if err := s.references(h, keep, layers); err != nil {
		t.Fatal(err)
	}
	var out []string
	for b := range keep {
		out = append(out, b)
	}
	return out
}

func sorted(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestLeaseLiveWhileVolumeMounted: an image volume's lease (Mount set to the volume's
// directory) is live past its grace while the image is mounted there, stale once not.
func TestLeaseLiveWhileVolumeMounted(t *testing.T) {
	requireRoot(t)
	s := newStore(t)
	img := put(t, s, makeImage(t, []v1.Layer{gzipLayer(t, file("a", "a"))}), "a:1")
	vol := filepath.Join(t.TempDir(), "kubernetes.io~image", "img")
	if err := s.Acquire(Lease{Digest: img.Digest, Pod: "ns/p", Container: "c", Node: "n1", Dir: vol, Mount: vol,
		Created: time.Now().Add(-2 * LeaseGrace)}); err != nil {
		t.Fatal(err)
	}
	if pods, _ := s.InUse(img.Digest); len(pods) != 0 {
		t.Fatalf("a lease past its grace whose volume is not mounted is live; InUse = %v", pods)
	}
	if err := unix.Mount("tmpfs", vol, "tmpfs", unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(vol, unix.MNT_DETACH)
	if pods, _ := s.InUse(img.Digest); len(pods) != 1 {
		t.Fatalf("a lease past its grace whose volume is mounted is not live; InUse = %v", pods)
	}
}
