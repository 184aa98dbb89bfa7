// Package images gives the node agent the images its pods name: from the host's image
// store (internal/imagestore), where the catalog's local images (internal/imagebuild:
// busybox, agnhost, pause, nginx, postgres and tranche itself, built from this
// machine's files) answer first for their names, so the seeds' manifests run offline.
// Other images are pulled from their registries (EnsurePulled, pull.go) with kubelet's
// pull policies, pull secrets and back-off, through the mirrors, TLS settings and
// credentials of the registries configuration (internal/registries).
package images

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tranche/tranche/internal/imagebuild"
	"github.com/tranche/tranche/internal/imagestore"
)

// InvalidNameError is an image reference that does not parse; kubelet's reason for it
// is InvalidImageName.
type InvalidNameError struct{ Err error }

func (e *InvalidNameError) Error() string { return e.Err.Error() }
func (e *InvalidNameError) Unwrap() error { return e.Err }

// ErrNotPresent is wrapped by Ensure's error for an image the node cannot obtain
// (kubelet's ErrImagePull).
var ErrNotPresent = errors.New("image not present")

// CatalogRepo names the store entries that remember which build of a catalog image is
// current: its tag is the build's content key, so a changed source file (a new tranche
// binary) means a new build under a new tag.
const CatalogRepo = "tranche.local/catalog/"

// UserNames splits img's names into digest names (repo@sha256:...) and tags, without the
// catalog's bookkeeping names under CatalogRepo: the names users (`tranche image`) and
// the node's status.images see.
func UserNames(img imagestore.Image) (digests, tags []string) {
	for _, n := range img.Names {
		switch {
		case strings.HasPrefix(n, CatalogRepo):
		case strings.Contains(n, "@"):
			digests = append(digests, n)
		default:
			tags = append(tags, n)
		}
	}
	return digests, tags
}

// Service resolves image references to stored images, building catalog images on first
// use. It is safe for concurrent use; builds of one image are coalesced in-process, and
// the store serialises its writes between the agents of one host.
type Service struct {
	store *imagestore.Store
	src   imagebuild.Source

	mu       sync.Mutex
	inflight map[string]*build
	// current is the build of each catalog entry (by name) found or made by this
	// Service: the content key, which stats every source file, is computed once per
	// entry and process, not on every container start. A rebuilt tranche binary is
	// the next agent's to pick up, as the running agent is the old one anyway.
	current map[string]imagestore.Image

	puller
}

type build struct {
	done chan struct{}
	img  imagestore.Image
	err  error
}

// New returns a Service over store whose catalog images are built from src and whose
// other images are pulled as opts say (the registries configuration, pull secrets).
func New(store *imagestore.Store, src imagebuild.Source, opts ...Option) *Service {
	s := &Service{store: store, src: src, inflight: map[string]*build{}, current: map[string]imagestore.Image{}}
	for _, o := range opts {
		o(s)
	}
	s.initPuller()
	return s
}

// Store is the service's image store.
func (s *Service) Store() *imagestore.Store { return s.store }

// Ensure returns the image ref names, tagged under its normalised name: the catalog's
// current build when the catalog has the name, else the store's image; it never pulls
// (pod sandboxes' pause image; containers go through EnsurePulled). The error is an
// *InvalidNameError for a reference that does not parse, wraps ErrNotPresent for one
// the node cannot obtain, and is any other error for a failed build or a store fault.
func (s *Service) Ensure(ctx context.Context, ref string) (imagestore.Image, error) {
	norm, err := imagestore.Normalize(ref)
	if err != nil {
		return imagestore.Image{}, &InvalidNameError{Err: err}
	}
	if e, ok := imagebuild.Match(norm); ok {
		img, err := s.catalog(ctx, e)
		if err != nil {
			return imagestore.Image{}, fmt.Errorf("building the local image %s for %q: %w", e.Name, ref, err)
		}
		if !slices.Contains(img.Names, norm) {
			if err := s.store.Tag(norm, img.Digest); err != nil {
				return imagestore.Image{}, fmt.Errorf("tagging %s as %q: %w", img.Digest, norm, err)
			}
			img.Names = append(img.Names, norm)
			s.mu.Lock()
			s.current[e.Name] = img
			s.mu.Unlock()
		}
		return img, nil
	}
	img, err := s.store.Get(norm)
	if errors.Is(err, imagestore.ErrNotFound) {
		return imagestore.Image{}, fmt.Errorf("%w: %q is not in this node's image store (the local catalog has busybox, agnhost, pause, nginx, postgres, tranche and the e2e suite's nautilus and kitten)", ErrNotPresent, norm)
	}
	return img, err
}

// Prebuild builds every catalog image that is not current in the store, so that the
// first pods do not wait for a build.
func (s *Service) Prebuild(ctx context.Context) error {
	var errs []error
	seen := map[string]bool{}
	for _, e := range imagebuild.Catalog() {
		if seen[e.Name] {
			continue
		}
		seen[e.Name] = true
		if _, err := s.catalog(ctx, e); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Name, err))
		}
	}
	return errors.Join(errs...)
}

// catalog returns the current build of e, building and storing it when the store has
// none.
func (s *Service) catalog(ctx context.Context, e imagebuild.Entry) (imagestore.Image, error) {
	s.mu.Lock()
	img, ok := s.current[e.Name]
	s.mu.Unlock()
	if ok && s.store.Has(img.Digest) { // else removed (image rm, GC): built again
		return img, nil
	}
	key, err := imagebuild.Key(ctx, e, s.src)
	if err != nil {
		return imagestore.Image{}, err
	}
	name := CatalogRepo + repoName(e.Name) + ":" + tag(key)
	s.mu.Lock()
	if b, ok := s.inflight[name]; ok {
		s.mu.Unlock()
		select {
		case <-b.done:
			return b.img, b.err
		case <-ctx.Done():
			return imagestore.Image{}, ctx.Err()
		}
	}
	b := &build{done: make(chan struct{})}
	s.inflight[name] = b
	s.mu.Unlock()
	b.img, b.err = s.buildOnce(ctx, e, name)
	close(b.done)
	s.mu.Lock()
	delete(s.inflight, name)
	if b.err == nil {
		s.current[e.Name] = b.img
	}
	s.mu.Unlock()
	return b.img, b.err
}

func (s *Service) buildOnce(ctx context.Context, e imagebuild.Entry, name string) (imagestore.Image, error) {
	if img, err := s.store.Get(name); err == nil {
		return img, nil
	} else if !errors.Is(err, imagestore.ErrNotFound) {
		return imagestore.Image{}, err
	}
	img, err := imagebuild.Build(ctx, e, s.src)
	if err != nil {
		return imagestore.Image{}, err
	}
	return s.store.Put(ctx, img, name, e.Name)
}

// repoName turns an image name into a path component of the catalog's repository:
// "docker.io/library/busybox:1.37" -> "docker.io/library/busybox".
func repoName(n string) string {
	if i := strings.LastIndex(n, ":"); i > strings.LastIndex(n, "/") {
		n = n[:i]
	}
	return strings.ToLower(n)
}

// tag makes a content key a valid tag (at most 128 characters of [A-Za-z0-9_.-]).
func tag(key string) string {
	var b strings.Builder
	for _, r := range key {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-' {
			b.WriteRune(r)
		}
	}
	t := b.String()
	if len(t) > 64 {
		t = t[:64]
	}
	if t == "" {
		t = "latest"
	}
	return t
}
