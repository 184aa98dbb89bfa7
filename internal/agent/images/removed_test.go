package images

import (
	"context"
	"testing"

	"github.com/tranche/tranche/internal/imagebuild"
	"github.com/tranche/tranche/internal/imagestore"
)

// TestEnsureRebuildsRemovedCatalogImage: a catalog image removed from the store (tranche
// image rm, image GC) is built again on its next use, not served from the Service's memory.
func TestEnsureRebuildsRemovedCatalogImage(t *testing.T) {
	store, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := New(store, imagebuild.Source{})
	ctx := context.Background()
	first, err := s.Ensure(ctx, "busybox:1.36")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Remove(ctx, first.Digest, false); err != nil {
		t.Fatal(err)
	}
	again, err := s.Ensure(ctx, "busybox:1.36")
	if err != nil {
		t.Fatal(err)
	}
	if !store.Has(again.Digest) {
		t.Fatalf("Ensure after removal returned %s, which the store does not have", again.Digest)
	}
	if _, err := store.Lowers(ctx, again); err != nil {
		t.Errorf("layers of the rebuilt image: %v", err)
	}
}
