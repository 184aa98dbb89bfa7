package imagestore

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Load stores the images of one file, as `kind load image-archive` and k3s's air-gap images
// take them: a `docker save` tarball (manifest.json, one or more images, named by their
// RepoTags), or an OCI image layout, as a directory or as a tarball of one (named by the
// annotation io.containerd.image.name, or org.opencontainers.image.ref.name when it holds a
// full reference; an index for several platforms gives the image for this one). fallback names
// an image the file leaves unnamed; it is an error for a file with several unnamed images.
//
// Every layer is unpacked (with the store's extraction, which refuses paths that lead outside
// the layer, and checked against its diffID) before the image is published with Put, so an
// image whose layers are not tar streams, hold escaping paths or do not match the config is
// refused whole and never appears under any name. Errors name the file and the entry at
// fault. The images before a bad one stay stored.
func (s *Store) Load(ctx context.Context, file, fallback string) ([]Image, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", file, err)
	}
	var images []Image
	if fi.IsDir() {
		images, err = s.loadLayout(ctx, file, file, fallback)
	} else {
		images, err = s.loadTar(ctx, file, fallback)
	}
	if err != nil {
		// Layers or blobs of the refused image that made it into the store are referenced by
		// nothing; take them out again.
		if _, serr := s.Sweep(ctx); serr != nil {
			err = errors.Join(err, serr)
		}
		return images, err
	}
	return images, nil
}

// loadTar loads a docker-save tarball or a tarball of an OCI layout.
func (s *Store) loadTar(ctx context.Context, file, fallback string) ([]Image, error) {
	entries, err := tarEntries(file)
	if err != nil {
		return nil, err
	}
	if _, ok := entries["manifest.json"]; ok {
		return s.loadDockerSave(ctx, file, entries, fallback)
	}
	if _, ok := entries["index.json"]; ok {
		if _, ok := entries["oci-layout"]; ok {
			tmp, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), "load-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(tmp)
			if err := unpackLayoutTar(file, tmp); err != nil {
				return nil, err
			}
			return s.loadLayout(ctx, file, tmp, fallback)
		}
	}
	return nil, fmt.Errorf("load %s: neither a docker-save tarball (no manifest.json) nor an OCI image layout (no oci-layout and index.json)", file)
}

// tarEntries lists a tarball's entries by cleaned name.
func tarEntries(file string) (map[string]*tar.Header, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", file, err)
	}
	defer f.Close()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("load %s: not a readable tarball: %w", file, err)
		}
		out[path.Clean(hdr.Name)] = hdr
	}
	return out, nil
}

// loadDockerSave loads every image of a docker-save tarball's manifest.json.
func (s *Store) loadDockerSave(ctx context.Context, file string, entries map[string]*tar.Header, fallback string) ([]Image, error) {
	opener := func() (io.ReadCloser, error) { return os.Open(file) }
	manifest, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("load %s: manifest.json: %w", file, err)
	}
	if len(manifest) == 0 {
		return nil, fmt.Errorf("load %s: manifest.json lists no image", file)
	}
	unnamed := 0
	for i, d := range manifest {
		if len(d.RepoTags) == 0 {
			unnamed++
		}
		for _, member := range append([]string{d.Config}, d.Layers...) {
			if _, err := resolveMember(entries, member); err != nil {
				return nil, fmt.Errorf("load %s: manifest.json, image %d: %w", file, i, err)
			}
		}
		for _, t := range d.RepoTags {
			if _, err := Normalize(t); err != nil {
				return nil, fmt.Errorf("load %s: manifest.json, image %d: RepoTags: %w", file, i, err)
			}
		}
	}
	if unnamed > 0 && (fallback == "" || unnamed > 1 || len(manifest) > 1) {
		return nil, fmt.Errorf("load %s: manifest.json lists %d image(s) without RepoTags; tag them before saving (docker save NAME:TAG), or name a single image with --name", file, unnamed)
	}
	var out []Image
	for i, d := range manifest {
		names := d.RepoTags
		var tag *name.Tag
		if len(names) == 0 {
			names = []string{fallback}
		} else if len(manifest) > 1 {
			t, err := name.NewTag(names[0])
			if err != nil {
				return out, fmt.Errorf("load %s: manifest.json, image %d: %w", file, i, err)
			}
			tag = &t
		}
		img, err := savedOrTarballImage(file, entries, d, opener, tag)
		if err != nil {
			return out, fmt.Errorf("load %s: image %d (%s): %w", file, i, names[0], err)
		}
		stored, err := s.loadImage(ctx, img, names, d.Layers)
		if err != nil {
			return out, fmt.Errorf("load %s: image %d (%s): %w", file, i, names[0], err)
		}
		out = append(out, stored)
	}
	return out, nil
}

// unpackLayoutTar extracts a tarball of an OCI layout into the empty directory dir. A layout
// is regular files in directories: any other entry, and any path that is absolute or leads
// out through "..", is refused.
func unpackLayoutTar(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("load %s: %w", file, err)
		}
		clean := path.Clean(hdr.Name)
		if path.IsAbs(hdr.Name) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("load %s: tar entry %q: %w", file, hdr.Name, ErrPathEscapes)
		}
		target := filepath.Join(dir, filepath.FromSlash(clean))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("load %s: tar entry %q: %w", file, hdr.Name, err)
			}
		default:
			return fmt.Errorf("load %s: tar entry %q: type %q is not a regular file or directory, which an OCI image layout is made of; refused", file, hdr.Name, hdr.Typeflag)
		}
	}
}

// loadLayout loads the images of the OCI layout in dir (label names it in errors).
func (s *Store) loadLayout(ctx context.Context, label, dir, fallback string) ([]Image, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("load %s: not an OCI image layout: %w", label, err)
	}
	index, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("load %s: index.json: %w", label, err)
	}
	im, err := index.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("load %s: index.json: %w", label, err)
	}
	if len(im.Manifests) == 0 {
		return nil, fmt.Errorf("load %s: index.json lists no image", label)
	}
	type named struct {
		desc  v1.Descriptor
		names []string
	}
	var todo []named
	unnamed := 0
	for _, desc := range im.Manifests {
		n := layoutName(desc)
		if n == "" {
			unnamed++
		}
		todo = append(todo, named{desc, nil})
		if n != "" {
			todo[len(todo)-1].names = []string{n}
		}
	}
	if unnamed > 0 && (fallback == "" || len(im.Manifests) > 1) {
		return nil, fmt.Errorf("load %s: index.json has %d image(s) without a name (annotation %s, or %s holding a full reference); name a single image with --name",
			label, unnamed, annotationName, annotationRefTag)
	}
	var out []Image
	for i, t := range todo {
		if t.names == nil {
			t.names = []string{fallback}
		}
		img, err := layoutImage(index, t.desc)
		if err != nil {
			return out, fmt.Errorf("load %s: index.json, manifest %d (%s): %w", label, i, t.names[0], err)
		}
		stored, err := s.loadImage(ctx, img, t.names, nil)
		if err != nil {
			return out, fmt.Errorf("load %s: image %d (%s): %w", label, i, t.names[0], err)
		}
		out = append(out, stored)
	}
	return out, nil
}

// layoutName is the image name an index.json entry carries, "" when none.
func layoutName(desc v1.Descriptor) string {
	if n := desc.Annotations[annotationName]; n != "" {
		return n
	}
	if n := desc.Annotations[annotationRefTag]; strings.Contains(n, "/") {
		if _, err := name.ParseReference(n); err == nil {
			return n
		}
	}
	return ""
}

// layoutImage is the image an index.json entry names: the manifest itself, or this platform's
// manifest of a nested index.
func layoutImage(index v1.ImageIndex, desc v1.Descriptor) (v1.Image, error) {
	if desc.MediaType.IsImage() {
		return index.Image(desc.Digest)
	}
	if !desc.MediaType.IsIndex() {
		return nil, fmt.Errorf("media type %q is neither an image manifest nor an index", desc.MediaType)
	}
	child, err := index.ImageIndex(desc.Digest)
	if err != nil {
		return nil, err
	}
	cm, err := child.IndexManifest()
	if err != nil {
		return nil, err
	}
	want := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	var have []string
	for _, d := range cm.Manifests {
		if d.Platform != nil && d.MediaType.IsImage() && d.Platform.Satisfies(want) {
			return child.Image(d.Digest)
		}
		if d.Platform != nil {
			have = append(have, d.Platform.String())
		}
	}
	return nil, fmt.Errorf("the index has no image for %s (it has %s)", want, strings.Join(have, ", "))
}

// loadImage unpacks every layer of img (refusing bad ones) and then publishes it under names,
// all while holding the content lock so that no Sweep takes the fresh layers away. members,
// when given, are the layers' files in a docker-save tarball, which errors name.
func (s *Store) loadImage(ctx context.Context, img v1.Image, names, members []string) (Image, error) {
	release, err := s.HoldContent(ctx)
	if err != nil {
		return Image{}, err
	}
	defer release()
	m, err := img.Manifest()
	if err != nil {
		return Image{}, fmt.Errorf("manifest: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return Image{}, fmt.Errorf("config: %w", err)
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return Image{}, fmt.Errorf("the manifest lists %d layers but the config %d diffIDs", len(m.Layers), len(cfg.RootFS.DiffIDs))
	}
	for i, desc := range m.Layers {
		if _, err := s.unpackLayer(ctx, img, desc, cfg.RootFS.DiffIDs[i]); err != nil {
			if i < len(members) {
				return Image{}, fmt.Errorf("layer %d (%q, %s): %w", i, members[i], desc.Digest, err)
			}
			return Image{}, fmt.Errorf("layer %d (%s): %w", i, desc.Digest, err)
		}
	}
	return s.Put(ctx, img, names...)
}

// savedOrTarballImage is manifest.json entry d as an image: stored as it is when its layers
// are plain tar streams (see savedImage), through go-containerregistry's tarball package when
// they are compressed.
func savedOrTarballImage(file string, entries map[string]*tar.Header, d tarball.Descriptor, opener tarball.Opener, tag *name.Tag) (v1.Image, error) {
	compressed := false
	if len(d.Layers) > 0 {
		hdr, err := resolveMember(entries, d.Layers[0])
		if err != nil {
			return nil, err
		}
		rc, err := openMember(file, hdr.Name)
		if err != nil {
			return nil, err
		}
		magic := make([]byte, 4)
		n, _ := io.ReadFull(rc, magic)
		rc.Close()
		magic = magic[:n]
		compressed = bytes.HasPrefix(magic, []byte{0x1f, 0x8b}) || bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd})
	}
	if compressed {
		return tarball.Image(opener, tag)
	}
	return newSavedImage(file, entries, d)
}
