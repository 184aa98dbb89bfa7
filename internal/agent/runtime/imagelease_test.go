package runtime

import (
	"slices"
	"testing"
)

// TestStartLeasesTheImage: a started instance holds a lease on its image in the host's store
// (tranche image rm and image GC keep the image), and removing its bundle releases it.
func TestStartLeasesTheImage(t *testing.T) {
	pod := planPod(nil)
	e := newFakeStartEnv(t, pod)
	c := e.startOnce()
	e.ps.mu.Lock()
	inst := c.inst
	e.ps.mu.Unlock()
	if inst == nil {
		t.Fatalf("no instance running; waiting %+v", c.waiting)
	}
	store := e.m.cfg.Images.Store()
	img, err := store.Get("example.test/app:1")
	if err != nil {
		t.Fatal(err)
	}
	pods, err := store.InUse(img.Digest)
	if err != nil || !slices.Equal(pods, []string{"ns/p"}) {
		t.Fatalf("InUse = %v, %v; want [ns/p]", pods, err)
	}
	if _, err := store.Remove(t.Context(), "example.test/app:1", false); err == nil {
		t.Error("Remove of the running container's image succeeded")
	}
	e.m.removeBundle(inst.dir)
	if pods, err := store.InUse(img.Digest); err != nil || len(pods) != 0 {
		t.Errorf("InUse after the bundle was removed = %v, %v", pods, err)
	}
}
