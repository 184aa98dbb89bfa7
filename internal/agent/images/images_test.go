package images

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/tranche/tranche/internal/imagebuild"
	"github.com/tranche/tranche/internal/imagestore"
)

func TestEnsure(t *testing.T) {
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
	if !slices.Contains(first.Names, "docker.io/library/busybox:1.36") {
		t.Errorf("names %v lack the name the pod asked for", first.Names)
	}
	// Another tag of the same catalog entry is the same build, now also under that tag.
	second, err := s.Ensure(ctx, "registry.k8s.io/e2e-test-images/busybox:1.29")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := store.Get("docker.io/library/busybox:1.36"); err != nil || got.Digest != first.Digest {
		t.Errorf("store has busybox:1.36 as %v (%v), want %s", got.Digest, err, first.Digest)
	}
	if second.Digest == "" || !slices.Contains(second.Names, "registry.k8s.io/e2e-test-images/busybox:1.29") {
		t.Errorf("second image %s names %v", second.Digest, second.Names)
	}

	for _, tc := range []struct {
		ref  string
		want func(error) bool
	}{
		{"example.com/app:1", func(err error) bool { return errors.Is(err, ErrNotPresent) }},
		{"Not A Valid/Reference", func(err error) bool { var e *InvalidNameError; return errors.As(err, &e) }},
	} {
		if _, err := s.Ensure(ctx, tc.ref); err == nil || !tc.want(err) {
			t.Errorf("Ensure(%q) = %v", tc.ref, err)
		}
	}
}
