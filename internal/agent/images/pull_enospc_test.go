package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	goruntime "runtime"

	"golang.org/x/sys/unix"

	"github.com/tranche/tranche/internal/imagebuild"
	"github.com/tranche/tranche/internal/imagestore"
)

// TestPullDiskFull: a pull that fills the store's file system fails with ErrImagePull
// saying so, and leaves the store consistent: the image it was pulling is not there,
// the one stored before is whole, nothing is left in tmp/, and once space is freed the
// same pull succeeds.
func TestPullDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestPullDiskFull mounts a tmpfs: run as root (make test does)")
	}
	const limit = 1 << 20
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, fmt.Sprintf("size=%d", limit)); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount tmpfs: %v", err)
		}
	})
	store, err := imagestore.Open(filepath.Join(mnt, "images"))
	if err != nil {
		t.Fatal(err)
	}
	s := New(store, imagebuild.Source{}, WithTransport(loopbackOnly()))
	tr := newTestRegistry(t)
	tr.push(t, "small:1", testImage(t, goruntime.GOARCH, "small"))
	// Random-looking content does not compress: the blob itself passes the limit.
	var big strings.Builder
	for i := 0; big.Len() < 2*limit; i++ {
		fmt.Fprintf(&big, "%x", uint64(i)*0x9e3779b97f4a7c15)
	}
	tr.push(t, "big:1", testImage(t, goruntime.GOARCH, "a", big.String()))

	small, err := s.EnsurePulled(context.Background(), PullRequest{Image: tr.host + "/small:1", BackOffKey: "u"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.EnsurePulled(context.Background(), PullRequest{Image: tr.host + "/big:1", BackOffKey: "u"})
	pe := pullErr(t, err, ReasonErrImagePull)
	if !strings.Contains(pe.Message, "no space left on device") {
		t.Errorf("message %q does not say the disk is full", pe.Message)
	}
	if _, err := store.Get(tr.host + "/big:1"); err == nil {
		t.Error("the image whose pull failed is in the store")
	}
	if _, err := store.Lowers(context.Background(), small.Image); err != nil {
		t.Errorf("the image stored before is not whole: %v", err)
	}
	if names, _ := os.ReadDir(filepath.Join(store.Dir(), "tmp")); len(names) != 0 {
		t.Errorf("tmp/ holds %d entries after the failed pull", len(names))
	}
	// Space freed: the same pull (after its back-off) succeeds.
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT, fmt.Sprintf("size=%d", 8*limit)); err != nil {
		t.Fatalf("growing the tmpfs: %v", err)
	}
	if _, err := s.EnsurePulled(context.Background(), PullRequest{Image: tr.host + "/big:1", BackOffKey: "other"}); err != nil {
		t.Fatalf("pull after space was freed: %v", err)
	}
}
