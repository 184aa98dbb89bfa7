package imagestore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// InUseError is Remove's refusal of an image that containers use.
type InUseError struct {
	// Image names the image as the caller asked for it; Digest is its manifest digest.
	Image, Digest string
	// Pods are "namespace/name" of the pods whose containers use it.
	Pods []string
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("image %s (%s) is in use by pod(s) %s; delete them first, or remove it with --force (its content stays until they are gone)",
		e.Image, shortDigest(e.Digest), strings.Join(e.Pods, ", "))
}

// HoldContent keeps Sweep from deleting anything until the returned release is called. Put
// holds it while it writes blobs that the name index does not reference yet; any code that
// writes blobs or unpacks layers of an image not yet in the index must hold it too.
// Holders share it; Sweep takes it exclusively.
func (s *Store) HoldContent(ctx context.Context) (func(), error) {
	return lockFileHow(ctx, filepath.Join(s.dir, "locks", "content"), unix.LOCK_SH)
}

// Remove deletes the image ref names (a name, "repository@digest" or a manifest or config
// digest) with all its names from the index, then sweeps the blobs and unpacked layers no
// image references any more. An image that live leases use is refused with an *InUseError
// unless force is set; forced, its names go at once and its content stays until the last
// container using it is gone and a later Sweep (the next Remove or garbage collection) runs.
// Errors wrap ErrNotFound when there is no such image.
func (s *Store) Remove(ctx context.Context, ref string, force bool) (Image, error) {
	img, err := s.Get(ref)
	if err != nil {
		return Image{}, err
	}
	if !force {
		pods, err := s.InUse(img.Digest)
		if err != nil {
			return Image{}, err
		}
		if len(pods) > 0 {
			return Image{}, &InUseError{Image: ref, Digest: img.Digest, Pods: pods}
		}
	}
	if err := s.removeEntry(img.Digest); err != nil {
		return Image{}, err
	}
	if _, err := s.Sweep(ctx); err != nil {
		return img, fmt.Errorf("image %s removed, but sweeping its content: %w", ref, err)
	}
	return img, nil
}

// removeEntry deletes every name of the image with manifest digest from the index, in one
// atomic index update.
func (s *Store) removeEntry(digest string) error {
	return s.updateIndex(func(entries map[string]v1.Descriptor) error {
		found := false
		for n, desc := range entries {
			if desc.Digest.String() == digest {
				delete(entries, n)
				found = true
			}
		}
		if !found {
			return fmt.Errorf("image %s: %w", digest, ErrNotFound)
		}
		return nil
	})
}

// SweepStats says what a Sweep deleted.
type SweepStats struct {
	Blobs, Layers int
}

// Sweep deletes the blobs and unpacked layers that no image of the index and no live lease
// references, and no mounted overlay uses as a lower directory, plus stale leases and the
// last-used marks of images that are gone. It holds the content lock exclusively (see
// HoldContent), so that it never deletes what a Put is about to reference. A layer is renamed
// out of layers/ (under its unpack lock) before it is deleted, so no reader ever sees a half
// deleted layer; a blob goes with one unlink. A crash at any point leaves a consistent store:
// what is left is either still whole or unreferenced, and the next Sweep finishes it.
func (s *Store) Sweep(ctx context.Context) (SweepStats, error) {
	var st SweepStats
	release, err := lockFileHow(ctx, filepath.Join(s.dir, "locks", "content"), unix.LOCK_EX)
	if err != nil {
		return st, err
	}
	defer release()
	if err := s.ensureDirs(); err != nil {
		return st, err
	}
	entries, err := s.readIndex()
	if err != nil {
		return st, err
	}
	live, stale, err := s.leases(time.Now())
	if err != nil {
		return st, err
	}
	roots := map[string]bool{}
	for _, desc := range entries {
		roots[desc.Digest.String()] = true
	}
	indexed := map[string]bool{}
	for d := range roots {
		indexed[d] = true
	}
	for _, l := range live {
		roots[l.Digest] = true
	}
	keepBlobs, keepLayers := map[string]bool{}, map[string]bool{}
	for d := range roots {
		h, err := v1.NewHash(d)
		if err != nil {
			continue
		}
		if err := s.references(h, keepBlobs, keepLayers); err != nil {
			if indexed[d] {
				// An indexed image whose blobs cannot be read: deleting around it could only
				// make it worse; leave everything for a person to look at.
				return st, fmt.Errorf("sweep: image %s: %w", d, err)
			}
		}
	}
	for hexID := range s.mountedLayers() {
		keepLayers[hexID] = true
	}

	var errs []error
	blobDir := filepath.Join(s.dir, "blobs", "sha256")
	blobs, err := os.ReadDir(blobDir)
	if err != nil {
		return st, err
	}
	for _, b := range blobs {
		if keepBlobs[b.Name()] {
			continue
		}
		if err := os.Remove(filepath.Join(blobDir, b.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		st.Blobs++
	}
	layers, err := os.ReadDir(filepath.Join(s.dir, "layers"))
	if err != nil {
		return st, err
	}
	for _, l := range layers {
		if keepLayers[l.Name()] {
			continue
		}
		if err := s.removeLayer(ctx, l.Name()); err != nil {
			errs = append(errs, err)
			continue
		}
		st.Layers++
	}
	errs = append(errs, s.pruneLinks(), s.pruneGCLeftovers())
	for _, path := range stale {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if used, err := os.ReadDir(filepath.Join(s.dir, "used")); err == nil {
		for _, u := range used {
			if !roots["sha256:"+u.Name()] {
				os.Remove(filepath.Join(s.dir, "used", u.Name()))
			}
		}
	}
	if err := syncDir(blobDir); err != nil {
		errs = append(errs, err)
	}
	return st, errors.Join(errs...)
}

// references adds the blobs (manifest, config, layers) and unpacked layers (diffIDs) of the
// stored image with manifest digest h to the keep sets.
func (s *Store) references(h v1.Hash, blobs, layers map[string]bool) error {
	blobs[h.Hex] = true
	// Read from the blobs themselves: a forced removal took the image out of index.json,
	// through which the layout package finds manifests.
	raw, err := os.ReadFile(s.blobPath(h))
	if err != nil {
		return err
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	blobs[m.Config.Digest.Hex] = true
	for _, l := range m.Layers {
		blobs[l.Digest.Hex] = true
	}
	raw, err = os.ReadFile(s.blobPath(m.Config.Digest))
	if err != nil {
		return err
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	for _, d := range cfg.RootFS.DiffIDs {
		layers[d.Hex] = true
	}
	return nil
}

// removeLayer takes an unpacked layer out of layers/ by renaming it into tmp/ under its unpack
// lock, then deletes it there.
func (s *Store) removeLayer(ctx context.Context, hexID string) error {
	unlock, err := lockFile(ctx, filepath.Join(s.dir, "locks", "layer-"+hexID))
	if err != nil {
		return err
	}
	defer unlock()
	gone := filepath.Join(s.dir, "tmp", "gc-layer-"+hexID)
	if err := os.RemoveAll(gone); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(s.dir, "layers", hexID), gone); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("removing layer %s: %w", hexID, err)
	}
	if err := syncDir(filepath.Join(s.dir, "layers")); err != nil {
		return err
	}
	return os.RemoveAll(gone)
}

// pruneLinks removes the short links under l/ whose layer is gone.
func (s *Store) pruneLinks() error {
	links, err := os.ReadDir(filepath.Join(s.dir, "l"))
	if err != nil {
		return err
	}
	for _, e := range links {
		path := filepath.Join(s.dir, "l", e.Name())
		if e.Type()&os.ModeSymlink == 0 {
			continue
		}
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			os.Remove(path)
		}
	}
	return nil
}

// pruneGCLeftovers deletes what a Sweep that crashed left in tmp/.
func (s *Store) pruneGCLeftovers() error {
	left, err := filepath.Glob(filepath.Join(s.dir, "tmp", "gc-layer-*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range left {
		errs = append(errs, os.RemoveAll(d))
	}
	return errors.Join(errs...)
}

// mountedLayers returns the diffID hexes of the store's layers that some overlay mount this
// process can see uses as a lower directory, whatever any lease says.
func (s *Store) mountedLayers() map[string]bool {
	out := map[string]bool{}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for _, lower := range overlayLowers(sc.Text()) {
			if hexID, ok := s.layerOf(lower); ok {
				out[hexID] = true
			}
		}
	}
	return out
}

// overlayLowers returns the lower directories of an overlay line of /proc/self/mountinfo.
func overlayLowers(line string) []string {
	_, post, ok := strings.Cut(line, " - ")
	if !ok {
		return nil
	}
	fields := strings.Fields(post)
	if len(fields) < 3 || fields[0] != "overlay" {
		return nil
	}
	var out []string
	for _, opt := range strings.Split(fields[2], ",") {
		for _, key := range []string{"lowerdir=", "lowerdir+="} {
			if v, ok := strings.CutPrefix(opt, key); ok {
				out = append(out, strings.Split(v, ":")...)
			}
		}
	}
	return out
}

// layerOf maps a lower directory (a short link under l/ or a path under layers/) to its layer.
func (s *Store) layerOf(lower string) (string, bool) {
	if rest, ok := strings.CutPrefix(lower, filepath.Join(s.dir, "l")+"/"); ok {
		target, err := os.Readlink(filepath.Join(s.dir, "l", rest))
		if err != nil {
			return "", false
		}
		return filepath.Base(target), true
	}
	if rest, ok := strings.CutPrefix(lower, filepath.Join(s.dir, "layers")+"/"); ok {
		return strings.SplitN(rest, "/", 2)[0], true
	}
	return "", false
}

// lockFileHow is lockFile with the flock operation (LOCK_SH or LOCK_EX) chosen.
func lockFileHow(ctx context.Context, path string, how int) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if err := waitLock(ctx); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
	}
}

// shortDigest is the first 12 hex digits of a digest, as image listings print it.
func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	return d
}

// Has reports whether the index names the image with manifest digest: a caller that keeps
// an Image across calls finds out that it was removed (and must be stored again).
func (s *Store) Has(digest string) bool {
	entries, err := s.readIndex()
	if err != nil {
		return false
	}
	for _, desc := range entries {
		if desc.Digest.String() == digest {
			return true
		}
	}
	return false
}
