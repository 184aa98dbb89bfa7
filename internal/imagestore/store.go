package imagestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"
)

// ErrNotFound is wrapped by Get and Tag when the store holds no image for a reference or digest.
var ErrNotFound = errors.New("image not found in the store")

// Annotations of index.json entries. containerd's key carries the full normalized name; the OCI
// key carries the tag alone, which is what OCI tools (skopeo "oci:DIR:TAG", umoci) look up.
const (
	annotationName   = "io.containerd.image.name"
	annotationRefTag = "org.opencontainers.image.ref.name"
)

// Store is the node's image store rooted at one directory. Several processes may open the same
// directory: blobs and unpacked layers are content addressed and renamed into place, and updates
// of the name index are serialized with a flock. A Store is safe for concurrent use.
type Store struct {
	dir    string
	layout layout.Path
	// unpacked counts the layers this Store value extracted, which shows whether concurrent
	// Lowers calls coalesced.
	unpacked atomic.Int64
}

// Image is one stored image as the agent and kubelet's image service see it.
type Image struct {
	// Names are the image's normalized names: the tags it was stored or tagged under and, for
	// each of their repositories, "repository@digest" (kubelet's repoDigests).
	Names []string
	// Digest is the manifest digest "sha256:...".
	Digest string
	// ConfigDigest is the digest "sha256:..." of the config blob, the image ID.
	ConfigDigest string
	// Config is the image's config file: Config.Entrypoint, Cmd, Env, WorkingDir, User,
	// StopSignal, ExposedPorts, and RootFS.DiffIDs.
	Config v1.ConfigFile
	// Size is the sum of the compressed layer sizes, the config size and the manifest size.
	Size int64
	// DiffIDs are the layers' uncompressed digests "sha256:...", bottom layer first.
	DiffIDs []string
}

// Open opens or creates the store rooted at dir: an OCI image layout (oci-layout, index.json,
// blobs/sha256) plus the store's own directories (see the package documentation).
func Open(dir string) (*Store, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", dir, err)
	}
	for _, d := range []string{dir, filepath.Join(dir, "blobs", "sha256"), filepath.Join(dir, "tmp"),
		filepath.Join(dir, "layers"), filepath.Join(dir, "l"), filepath.Join(dir, "locks")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("image store %s: %w", dir, err)
		}
	}
	s := &Store{dir: dir, layout: layout.Path(dir)}
	err = s.withLock(func() error {
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); errors.Is(err, os.ErrNotExist) {
			if err := s.writeFileAtomic(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
				return err
			}
		}
		if _, err := os.Stat(s.indexPath()); errors.Is(err, os.ErrNotExist) {
			return s.writeIndex(nil)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", dir, err)
	}
	return s, nil
}

// Dir returns the store's root directory, absolute.
func (s *Store) Dir() string { return s.dir }

// Put writes img's blobs into the store (content addressed, each verified against its digest
// and size while written to a temporary file that is then renamed, so a crash, a full disk or a
// corrupt or truncated layer never leaves a partial blob) and then, in one atomic index update,
// records the image under each of names (normalized) and under "repository@digest" for each of
// their repositories. A name that named another image moves to this one. At least one name is
// required. Errors name the image and, when one is at fault, the layer.
func (s *Store) Put(ctx context.Context, img v1.Image, names ...string) (Image, error) {
	if len(names) == 0 {
		return Image{}, errors.New("put image: at least one name is required")
	}
	normalized := make([]string, 0, 2*len(names))
	for _, n := range names {
		nn, err := Normalize(n)
		if err != nil {
			return Image{}, err
		}
		normalized = append(normalized, nn)
	}
	label := normalized[0]
	release, err := s.HoldContent(ctx)
	if err != nil {
		return Image{}, fmt.Errorf("put image %s: %w", label, err)
	}
	defer release()
	digest, err := img.Digest()
	if err != nil {
		return Image{}, fmt.Errorf("put image %s: manifest digest: %w", label, err)
	}
	manifest, err := img.Manifest()
	if err != nil {
		return Image{}, fmt.Errorf("put image %s: manifest: %w", label, err)
	}
	rawManifest, err := img.RawManifest()
	if err != nil {
		return Image{}, fmt.Errorf("put image %s: manifest: %w", label, err)
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return Image{}, fmt.Errorf("put image %s: config: %w", label, err)
	}
	config, err := v1.ParseConfigFile(bytes.NewReader(rawConfig))
	if err != nil {
		return Image{}, fmt.Errorf("put image %s: config: %w", label, err)
	}
	if len(config.RootFS.DiffIDs) != len(manifest.Layers) {
		return Image{}, fmt.Errorf("put image %s: the manifest lists %d layers but the config %d diffIDs",
			label, len(manifest.Layers), len(config.RootFS.DiffIDs))
	}
	for _, n := range normalized {
		if err := checkPinned(n, digest); err != nil {
			return Image{}, fmt.Errorf("put image %s: %w", label, err)
		}
	}
	for _, n := range normalized[:len(names)] {
		if repo, ok := repository(n); ok {
			normalized = append(normalized, repo+"@"+digest.String())
		}
	}

	for i, desc := range manifest.Layers {
		if err := ctx.Err(); err != nil {
			return Image{}, fmt.Errorf("put image %s: %w", label, err)
		}
		if err := s.PutLayer(ctx, img, desc); err != nil {
			return Image{}, fmt.Errorf("put image %s: layer %d (%s): %w", label, i, desc.Digest, err)
		}
	}
	if err := s.writeBlob(manifest.Config.Digest, manifest.Config.Size, bytes.NewReader(rawConfig)); err != nil {
		return Image{}, fmt.Errorf("put image %s: config %s: %w", label, manifest.Config.Digest, err)
	}
	if err := s.writeBlob(digest, int64(len(rawManifest)), bytes.NewReader(rawManifest)); err != nil {
		return Image{}, fmt.Errorf("put image %s: manifest %s: %w", label, digest, err)
	}
	mediaType := manifest.MediaType
	if mediaType == "" {
		mediaType = types.OCIManifestSchema1
	}
	desc := v1.Descriptor{MediaType: mediaType, Size: int64(len(rawManifest)), Digest: digest}
	err = s.updateIndex(func(entries map[string]v1.Descriptor) error {
		for _, n := range normalized {
			entries[n] = desc
		}
		return nil
	})
	if err != nil {
		return Image{}, fmt.Errorf("put image %s: %w", label, err)
	}
	return s.Get(digest.String())
}

// PutLayer stores one layer's compressed blob of img (from a registry, a tarball), verified
// against desc, unless it is already there. A caller other than Put holds HoldContent.
func (s *Store) PutLayer(ctx context.Context, img v1.Image, desc v1.Descriptor) error {
	if s.hasBlob(desc.Digest, desc.Size) {
		return nil
	}
	// Two images sharing a layer, pulled at once in this process or another, fetch it
	// once: the second waits for the first under the blob's lock and finds it stored.
	unlock, err := lockFile(ctx, filepath.Join(s.dir, "locks", "blob-"+desc.Digest.Hex))
	if err != nil {
		return err
	}
	defer unlock()
	if s.hasBlob(desc.Digest, desc.Size) {
		return nil
	}
	layer, err := img.LayerByDigest(desc.Digest)
	if err != nil {
		return err
	}
	rc, err := layer.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	return s.writeBlob(desc.Digest, desc.Size, ctxReader{ctx, rc})
}

// Get returns the image a reference names, normalized first. A bare "sha256:<hex>" is looked up
// as a manifest digest and then as a config digest (image ID). A "repository@digest" reference
// also finds an image stored under a tag of that repository. Errors wrap ErrNotFound when the
// store has no such image, ErrInvalidName when ref does not parse.
func (s *Store) Get(ref string) (Image, error) {
	entries, err := s.readIndex()
	if err != nil {
		return Image{}, err
	}
	byDigest := groupByDigest(entries)
	if h, err := v1.NewHash(ref); err == nil {
		if _, ok := byDigest[h.String()]; ok {
			return s.load(h, byDigest[h.String()])
		}
		for d, names := range byDigest {
			img, err := s.load(mustHash(d), names)
			if err != nil {
				return Image{}, err
			}
			if img.ConfigDigest == h.String() {
				return img, nil
			}
		}
		return Image{}, fmt.Errorf("image %s: %w", ref, ErrNotFound)
	}
	n, err := Normalize(ref)
	if err != nil {
		return Image{}, err
	}
	if desc, ok := entries[n]; ok {
		return s.load(desc.Digest, byDigest[desc.Digest.String()])
	}
	if d, err := name.NewDigest(n); err == nil {
		repo, _ := repository(n)
		for _, candidate := range byDigest[d.DigestStr()] {
			if r, ok := repository(candidate); ok && r == repo {
				return s.load(mustHash(d.DigestStr()), byDigest[d.DigestStr()])
			}
		}
	}
	return Image{}, fmt.Errorf("image %s: %w", n, ErrNotFound)
}

// Tag records ref (normalized) as a name of the stored image whose manifest digest is digest,
// moving the name if it named another image. The error wraps ErrNotFound if no stored image has
// that digest.
func (s *Store) Tag(ref, digest string) error {
	n, err := Normalize(ref)
	if err != nil {
		return err
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return fmt.Errorf("tag %s: digest %q: %w", n, digest, err)
	}
	if err := checkPinned(n, h); err != nil {
		return fmt.Errorf("tag %s: %w", n, err)
	}
	return s.updateIndex(func(entries map[string]v1.Descriptor) error {
		for _, desc := range entries {
			if desc.Digest == h {
				entries[n] = desc
				if repo, ok := repository(n); ok {
					entries[repo+"@"+h.String()] = desc
				}
				return nil
			}
		}
		return fmt.Errorf("tag %s: image %s: %w", n, digest, ErrNotFound)
	})
}

// List returns every stored image with all its names, ordered by manifest digest.
func (s *Store) List() ([]Image, error) {
	entries, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	byDigest := groupByDigest(entries)
	digests := make([]string, 0, len(byDigest))
	for d := range byDigest {
		digests = append(digests, d)
	}
	sort.Strings(digests)
	images := make([]Image, 0, len(digests))
	for _, d := range digests {
		img, err := s.load(mustHash(d), byDigest[d])
		if err != nil {
			return nil, err
		}
		images = append(images, img)
	}
	return images, nil
}

// load builds an Image from the stored manifest and config blobs.
func (s *Store) load(digest v1.Hash, names []string) (Image, error) {
	img, err := s.layout.Image(digest)
	if err != nil {
		return Image{}, fmt.Errorf("image %s: %w", digest, err)
	}
	manifest, err := img.Manifest()
	if err != nil {
		return Image{}, fmt.Errorf("image %s: manifest: %w", digest, err)
	}
	rawManifest, err := img.RawManifest()
	if err != nil {
		return Image{}, fmt.Errorf("image %s: manifest: %w", digest, err)
	}
	config, err := img.ConfigFile()
	if err != nil {
		return Image{}, fmt.Errorf("image %s: config: %w", digest, err)
	}
	out := Image{
		Names:        append([]string(nil), names...),
		Digest:       digest.String(),
		ConfigDigest: manifest.Config.Digest.String(),
		Config:       *config,
		Size:         manifest.Config.Size + int64(len(rawManifest)),
	}
	sort.Strings(out.Names)
	for _, l := range manifest.Layers {
		out.Size += l.Size
	}
	for _, d := range config.RootFS.DiffIDs {
		out.DiffIDs = append(out.DiffIDs, d.String())
	}
	return out, nil
}

// checkPinned refuses a digest name ("repo@sha256:...") for an image with another digest.
func checkPinned(normalized string, digest v1.Hash) error {
	d, err := name.NewDigest(normalized)
	if err != nil || d.DigestStr() == digest.String() {
		return nil
	}
	return fmt.Errorf("the name %s pins digest %s but the image's manifest digest is %s", normalized, d.DigestStr(), digest)
}

// repository returns the repository part of a normalized name.
func repository(normalized string) (string, bool) {
	ref, err := name.ParseReference(normalized)
	if err != nil {
		return "", false
	}
	registry := ref.Context().RegistryStr()
	if registry == name.DefaultRegistry {
		registry = dockerHub
	}
	return registry + "/" + ref.Context().RepositoryStr(), true
}

func groupByDigest(entries map[string]v1.Descriptor) map[string][]string {
	out := map[string][]string{}
	for n, desc := range entries {
		out[desc.Digest.String()] = append(out[desc.Digest.String()], n)
	}
	return out
}

// mustHash parses a digest that came out of the store's own index.
func mustHash(s string) v1.Hash {
	h, err := v1.NewHash(s)
	if err != nil {
		panic(fmt.Sprintf("imagestore: index holds an invalid digest %q: %v", s, err))
	}
	return h
}

func (s *Store) indexPath() string { return filepath.Join(s.dir, "index.json") }

func (s *Store) blobPath(h v1.Hash) string {
	return filepath.Join(s.dir, "blobs", h.Algorithm, h.Hex)
}

// readIndex returns index.json as name -> manifest descriptor. It takes no lock: index.json is
// only ever replaced by rename, so a reader sees one whole version.
func (s *Store) readIndex() (map[string]v1.Descriptor, error) {
	f, err := os.Open(s.indexPath())
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", s.dir, err)
	}
	defer f.Close()
	index, err := v1.ParseIndexManifest(f)
	if err != nil {
		return nil, fmt.Errorf("image store %s: index.json: %w", s.dir, err)
	}
	entries := map[string]v1.Descriptor{}
	for _, desc := range index.Manifests {
		if n := desc.Annotations[annotationName]; n != "" {
			desc.Annotations = nil
			entries[n] = desc
		}
	}
	return entries, nil
}

// updateIndex applies change to the name index under the store's lock and replaces index.json
// atomically. If change fails nothing is written.
func (s *Store) updateIndex(change func(map[string]v1.Descriptor) error) error {
	return s.withLock(func() error {
		entries, err := s.readIndex()
		if err != nil {
			return err
		}
		if err := change(entries); err != nil {
			return err
		}
		return s.writeIndex(entries)
	})
}

// writeIndex writes entries as an OCI index with one manifest descriptor per name, sorted by name.
func (s *Store) writeIndex(entries map[string]v1.Descriptor) error {
	index := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{}}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		desc := entries[n]
		desc.Annotations = map[string]string{annotationName: n}
		if t, err := name.NewTag(n, name.StrictValidation); err == nil && !strings.Contains(n, "@") {
			desc.Annotations[annotationRefTag] = t.TagStr()
		}
		index.Manifests = append(index.Manifests, desc)
	}
	raw, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		return err
	}
	return s.writeFileAtomic(s.indexPath(), raw)
}

// withLock runs fn holding the exclusive flock on dir/lock, which serializes index updates
// across processes.
func (s *Store) withLock(fn func() error) error {
	unlock, err := lockFile(context.Background(), filepath.Join(s.dir, "lock"))
	if err != nil {
		return err
	}
	defer unlock()
	return fn()
}

// hasBlob reports whether the blob is stored with the expected size (-1: any size). A stored
// blob was verified before it was renamed into place.
func (s *Store) hasBlob(h v1.Hash, size int64) bool {
	fi, err := os.Stat(s.blobPath(h))
	return err == nil && fi.Mode().IsRegular() && (size < 0 || fi.Size() == size)
}

// writeBlob copies r into the blob for h through a temporary file, verifying size and digest,
// syncing, and renaming it into place. On any error the temporary file is removed.
func (s *Store) writeBlob(h v1.Hash, size int64, r io.Reader) error {
	if s.hasBlob(h, size) {
		return nil
	}
	if h.Algorithm != "sha256" {
		return fmt.Errorf("blob %s: unsupported digest algorithm %q", h, h.Algorithm)
	}
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "blob-"+h.Hex[:12]+"-*")
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, sum), r)
	if err != nil {
		return err
	}
	if err := verify(h, size, n, sum); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o444); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.blobPath(h)); err != nil {
		return err
	}
	committed = true
	return syncDir(filepath.Dir(s.blobPath(h)))
}

// verify checks what was read against the expected digest and size (-1: unknown).
func verify(h v1.Hash, size, n int64, sum hash.Hash) error {
	if size >= 0 && n != size {
		return fmt.Errorf("size mismatch: expected %d bytes, read %d (truncated or corrupt)", size, n)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != h.Hex {
		return fmt.Errorf("digest mismatch: expected %s, content is sha256:%s (corrupt)", h, got)
	}
	return nil
}

// writeFileAtomic replaces path with data through a synced temporary file and a rename.
func (s *Store) writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// lockFile takes an exclusive flock on path, creating it, and returns its release. flock locks
// belong to the open file description, so goroutines of one process exclude each other as
// processes do. Waiting polls so that a cancelled ctx ends it.
func lockFile(ctx context.Context, path string) (func(), error) {
	return lockFileHow(ctx, path, unix.LOCK_EX)
}
