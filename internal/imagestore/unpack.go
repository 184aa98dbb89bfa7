package imagestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// shortLinkLen is the length of the hex names under dir/l. Overlayfs takes all its lower
// directories in one mount option that must fit in a page, so lowers are passed as
// dir/l/<12 hex> symlinks instead of dir/layers/<64 hex>.
const shortLinkLen = 12

// Lowers unpacks each layer of img (once per store, under dir/layers/<diffID hex>) and returns
// the overlayfs lower directories for it, uppermost layer first, as short paths dir/l/<hex
// prefix> that resolve to the unpacked layers. An image without layers gets one empty lower
// directory. A layer is unpacked into a temporary directory, its diffID verified, and the
// directory synced and renamed into place under a per-layer flock: concurrent callers, in this
// process or others, unpack it once and the rest wait for it (or for ctx); a failed or
// interrupted unpack leaves nothing under dir/layers. Errors name the image and the layer.
func (s *Store) Lowers(ctx context.Context, img Image) ([]string, error) {
	label := img.Digest
	if len(img.Names) > 0 {
		label = img.Names[0]
	}
	digest, err := v1.NewHash(img.Digest)
	if err != nil {
		return nil, fmt.Errorf("unpack image %s: digest: %w", label, err)
	}
	stored, err := s.layout.Image(digest)
	if err != nil {
		return nil, fmt.Errorf("unpack image %s: %w", label, err)
	}
	manifest, err := stored.Manifest()
	if err != nil {
		return nil, fmt.Errorf("unpack image %s: manifest: %w", label, err)
	}
	config, err := stored.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("unpack image %s: config: %w", label, err)
	}
	diffIDs := config.RootFS.DiffIDs
	if len(diffIDs) != len(manifest.Layers) {
		return nil, fmt.Errorf("unpack image %s: the manifest lists %d layers but the config %d diffIDs",
			label, len(manifest.Layers), len(diffIDs))
	}
	if len(diffIDs) == 0 {
		empty := filepath.Join(s.dir, "l", "empty")
		if err := os.MkdirAll(empty, 0o755); err != nil {
			return nil, fmt.Errorf("unpack image %s: %w", label, err)
		}
		return []string{empty}, nil
	}
	lowers := make([]string, 0, len(diffIDs))
	seen := map[string]bool{}
	for i := len(diffIDs) - 1; i >= 0; i-- {
		desc := manifest.Layers[i]
		lower, err := s.unpackLayer(ctx, stored, desc, diffIDs[i])
		if err != nil {
			return nil, fmt.Errorf("unpack image %s: layer %d (%s, diffID %s): %w", label, i, desc.Digest, diffIDs[i], err)
		}
		// A layer listed twice adds nothing under its upper copy; overlayfs would refuse it twice.
		if !seen[lower] {
			seen[lower] = true
			lowers = append(lowers, lower)
		}
	}
	return lowers, nil
}

// unpackLayer makes sure the layer with diffID is unpacked and returns its short lower path.
func (s *Store) unpackLayer(ctx context.Context, img v1.Image, desc v1.Descriptor, diffID v1.Hash) (string, error) {
	if diffID.Algorithm != "sha256" {
		return "", fmt.Errorf("unsupported diffID algorithm %q", diffID.Algorithm)
	}
	if !desc.MediaType.IsLayer() {
		return "", fmt.Errorf("media type %q is not a layer", desc.MediaType)
	}
	final := filepath.Join(s.dir, "layers", diffID.Hex)
	if isDir(final) {
		return s.shortLink(diffID.Hex)
	}
	unlock, err := lockFile(ctx, filepath.Join(s.dir, "locks", "layer-"+diffID.Hex))
	if err != nil {
		return "", err
	}
	defer unlock()
	if isDir(final) {
		return s.shortLink(diffID.Hex)
	}
	// Holding the layer's lock, any temporary directory for it is a crashed unpack's leftover.
	tmp := filepath.Join(s.dir, "tmp", "layer-"+diffID.Hex)
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", err
	}
	if err := s.unpackInto(ctx, img, desc, diffID, tmp); err != nil {
		return "", errors.Join(err, os.RemoveAll(tmp))
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", errors.Join(err, os.RemoveAll(tmp))
	}
	s.unpacked.Add(1)
	if err := syncDir(filepath.Dir(final)); err != nil {
		return "", err
	}
	return s.shortLink(diffID.Hex)
}

// unpackInto extracts the layer blob into dir and syncs the file system, so that the rename
// that publishes dir never exposes files whose data a crash could lose.
func (s *Store) unpackInto(ctx context.Context, img v1.Image, desc v1.Descriptor, diffID v1.Hash, dir string) error {
	layer, err := img.LayerByDigest(desc.Digest)
	if err != nil {
		return err
	}
	rc, err := layer.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := extract(ctx, ctxReader{ctx, rc}, dir, diffID); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}

// shortLink returns dir/l/<prefix of hex>, a symlink to the unpacked layer, creating it. A
// prefix already taken by another layer is lengthened.
func (s *Store) shortLink(hexID string) (string, error) {
	target := filepath.Join("..", "layers", hexID)
	for n := shortLinkLen; n <= len(hexID); n += 4 {
		link := filepath.Join(s.dir, "l", hexID[:n])
		err := os.Symlink(target, link)
		if err == nil {
			return link, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", err
		}
		if got, err := os.Readlink(link); err == nil && got == target {
			return link, nil
		}
	}
	return "", fmt.Errorf("no free short name for layer %s under %s", hexID, filepath.Join(s.dir, "l"))
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
