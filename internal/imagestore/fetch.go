package imagestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// HasBlob reports whether the store holds the blob h with the given size (-1: any).
// A stored blob was verified against its digest and size before it was published.
func (s *Store) HasBlob(h v1.Hash, size int64) bool { return s.hasBlob(h, size) }

// PutBlob stores the content r yields as the blob h, unless it is already there: the
// content is verified against h and size (-1: unknown) in a temporary file that is
// renamed into place only when it matches, so a wrong, short or interrupted download
// leaves nothing behind. Pullers fetch an image's layers with it, several at a time,
// before Put records the image.
func (s *Store) PutBlob(ctx context.Context, h v1.Hash, size int64, r io.Reader) error {
	if err := s.writeBlob(h, size, ctxReader{ctx, r}); err != nil {
		return fmt.Errorf("blob %s: %w", h, err)
	}
	return nil
}

// Lock takes the host-wide lock named by key (any string), shared by every process
// that opens this store, and returns its release; waiting ends when ctx does. Pullers
// take one per image reference, so that the agents of one host pull an image once.
func (s *Store) Lock(ctx context.Context, key string) (func(), error) {
	sum := sha256.Sum256([]byte(key))
	return lockFile(ctx, filepath.Join(s.dir, "locks", "key-"+hex.EncodeToString(sum[:12])))
}

// BlobImage is the image whose manifest is the stored blob manifestDigest, read from
// the store's blobs without the name index: what a puller hands to Put once the blobs
// are stored, so that Put reads nothing from the network again.
func (s *Store) BlobImage(manifestDigest v1.Hash) (v1.Image, error) {
	raw, err := os.ReadFile(s.blobPath(manifestDigest))
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return partial.CompressedToImage(blobImage{s: s, raw: raw})
}

// blobImage is an image read from the store's blobs by its raw manifest, without the
// name index.
type blobImage struct {
	s   *Store
	raw []byte
}

func (b blobImage) RawManifest() ([]byte, error) { return b.raw, nil }

func (b blobImage) MediaType() (types.MediaType, error) {
	m, err := v1.ParseManifest(bytes.NewReader(b.raw))
	if err != nil {
		return "", err
	}
	return m.MediaType, nil
}

func (b blobImage) RawConfigFile() ([]byte, error) {
	m, err := v1.ParseManifest(bytes.NewReader(b.raw))
	if err != nil {
		return nil, err
	}
	return os.ReadFile(b.s.blobPath(m.Config.Digest))
}

func (b blobImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	m, err := v1.ParseManifest(bytes.NewReader(b.raw))
	if err != nil {
		return nil, err
	}
	for _, l := range m.Layers {
		if l.Digest == h {
			return blobLayer{path: b.s.blobPath(h), desc: l}, nil
		}
	}
	return nil, fmt.Errorf("layer %s is not in the manifest", h)
}

// blobLayer is a stored compressed layer.
type blobLayer struct {
	path string
	desc v1.Descriptor
}

func (l blobLayer) Digest() (v1.Hash, error)            { return l.desc.Digest, nil }
func (l blobLayer) Size() (int64, error)                { return l.desc.Size, nil }
func (l blobLayer) MediaType() (types.MediaType, error) { return l.desc.MediaType, nil }
func (l blobLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }

// UnpackLayer unpacks one layer whose compressed blob is stored (see Lowers), so that a
// puller can unpack each layer as soon as it has arrived, beside the downloads of the
// others. label names the image in errors.
func (s *Store) UnpackLayer(ctx context.Context, desc v1.Descriptor, diffID v1.Hash, label string) error {
	layer, err := partial.CompressedToLayer(blobLayer{path: s.blobPath(desc.Digest), desc: desc})
	if err != nil {
		return fmt.Errorf("unpack image %s: layer %s: %w", label, desc.Digest, err)
	}
	if _, err := s.unpackLayer(ctx, oneLayerImage{layer: layer}, desc, diffID); err != nil {
		return fmt.Errorf("unpack image %s: layer %s (diffID %s): %w", label, desc.Digest, diffID, err)
	}
	return nil
}

// oneLayerImage gives unpackLayer the one layer it asks for; unpackLayer calls nothing
// else of an image.
type oneLayerImage struct {
	v1.Image
	layer v1.Layer
}

func (o oneLayerImage) LayerByDigest(v1.Hash) (v1.Layer, error) { return o.layer, nil }

// ReadBlob returns a stored blob's content (a config or manifest; verified when stored).
func (s *Store) ReadBlob(h v1.Hash) ([]byte, error) { return os.ReadFile(s.blobPath(h)) }
