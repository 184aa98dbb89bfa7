package imagestore

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// savedImage is one image of a docker-save tarball whose layers are plain tar streams (as
// `docker save` writes them), stored as they are: each layer's digest is its diffID, so
// nothing is compressed on the way in (go-containerregistry's tarball.Image would gzip every
// layer twice, once for the manifest's digests and once to store it). Put still verifies
// each layer against its digest, and so against the config's diffID.
type savedImage struct {
	file     string
	config   []byte
	manifest []byte
	layers   map[v1.Hash]savedLayer
}

type savedLayer struct {
	file, member string
	desc         v1.Descriptor
}

// newSavedImage builds the image of manifest.json entry d, whose layer members resolve (see
// tarMember) to the tarball entries' names.
func newSavedImage(file string, entries map[string]*tar.Header, d tarball.Descriptor) (v1.Image, error) {
	rawConfig, err := readMember(file, entries, d.Config)
	if err != nil {
		return nil, fmt.Errorf("config %q: %w", d.Config, err)
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(rawConfig))
	if err != nil {
		return nil, fmt.Errorf("config %q: %w", d.Config, err)
	}
	if len(cfg.RootFS.DiffIDs) != len(d.Layers) {
		return nil, fmt.Errorf("manifest.json lists %d layers but the config %q %d diffIDs", len(d.Layers), d.Config, len(cfg.RootFS.DiffIDs))
	}
	configDigest, configSize, err := v1.SHA256(bytes.NewReader(rawConfig))
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.DockerManifestSchema2,
		Config: v1.Descriptor{MediaType: types.DockerConfigJSON, Size: configSize, Digest: configDigest}}
	img := &savedImage{file: file, config: rawConfig, layers: map[v1.Hash]savedLayer{}}
	for i, member := range d.Layers {
		hdr, err := resolveMember(entries, member)
		if err != nil {
			return nil, err
		}
		desc := v1.Descriptor{MediaType: types.DockerUncompressedLayer, Size: hdr.Size, Digest: cfg.RootFS.DiffIDs[i]}
		m.Layers = append(m.Layers, desc)
		img.layers[desc.Digest] = savedLayer{file: file, member: hdr.Name, desc: desc}
	}
	if img.manifest, err = json.Marshal(m); err != nil {
		return nil, err
	}
	return partial.CompressedToImage(img)
}

func (i *savedImage) RawConfigFile() ([]byte, error)      { return i.config, nil }
func (i *savedImage) MediaType() (types.MediaType, error) { return types.DockerManifestSchema2, nil }
func (i *savedImage) RawManifest() ([]byte, error)        { return i.manifest, nil }
func (l savedLayer) Digest() (v1.Hash, error)             { return l.desc.Digest, nil }
func (l savedLayer) DiffID() (v1.Hash, error)             { return l.desc.Digest, nil }
func (l savedLayer) Size() (int64, error)                 { return l.desc.Size, nil }
func (l savedLayer) MediaType() (types.MediaType, error)  { return l.desc.MediaType, nil }
func (l savedLayer) Compressed() (io.ReadCloser, error)   { return openMember(l.file, l.member) }
func (i *savedImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if l, ok := i.layers[h]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("layer %s is not in this image", h)
}

// resolveMember follows links within the tarball to the regular file member names.
func resolveMember(entries map[string]*tar.Header, member string) (*tar.Header, error) {
	p := path.Clean(member)
	for hops := 0; hops < 16; hops++ {
		hdr, ok := entries[p]
		if !ok {
			return nil, fmt.Errorf("%q is not in the tarball", member)
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			return hdr, nil
		case tar.TypeSymlink, tar.TypeLink:
			p = path.Join(path.Dir(p), path.Clean(hdr.Linkname))
		default:
			return nil, fmt.Errorf("%q is not a regular file in the tarball", member)
		}
	}
	return nil, fmt.Errorf("%q: too many links", member)
}

func readMember(file string, entries map[string]*tar.Header, member string) ([]byte, error) {
	hdr, err := resolveMember(entries, member)
	if err != nil {
		return nil, err
	}
	rc, err := openMember(file, hdr.Name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// openMember reads the regular file entry named name of the tarball.
func openMember(file, name string) (io.ReadCloser, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err != nil {
			f.Close()
			if err == io.EOF {
				return nil, fmt.Errorf("%q is not in the tarball %s", name, file)
			}
			return nil, err
		}
		if hdr.Name == name {
			return struct {
				io.Reader
				io.Closer
			}{tr, f}, nil
		}
	}
}
