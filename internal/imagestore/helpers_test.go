package imagestore

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one tar entry of a test layer.
type entry struct {
	hdr  tar.Header
	body string
}

func file(name, body string, mutators ...func(*tar.Header)) entry {
	return build(entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644}, body: body}, mutators)
}

func dir(name string, mutators ...func(*tar.Header)) entry {
	return build(entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}}, mutators)
}

func symlink(name, target string) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}}
}

func hardlink(name, target string) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeLink, Name: name, Linkname: target}}
}

// whiteout deletes name (a path) in the layers below.
func whiteout(name string) entry {
	d, base := filepath.Split(name)
	return file(d+whiteoutPrefix+base, "")
}

// opaque hides everything the layers below have in directory d.
func opaque(d string) entry { return file(d+"/"+whiteoutOpaque, "") }

func build(e entry, mutators []func(*tar.Header)) entry {
	for _, m := range mutators {
		m(&e.hdr)
	}
	return e
}

func tarBytes(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		h.Size = int64(len(e.body))
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// gzipLayer is a gzip-compressed layer of entries.
func gzipLayer(t testing.TB, entries ...entry) v1.Layer {
	t.Helper()
	b := tarBytes(t, entries...)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// plainLayer is an uncompressed layer of entries.
func plainLayer(t testing.TB, entries ...entry) v1.Layer {
	return static.NewLayer(tarBytes(t, entries...), types.OCIUncompressedLayer)
}

// makeImage stacks layers (bottom first) with a config that mutate changes.
func makeImage(t testing.TB, layers []v1.Layer, mutators ...func(*v1.Config)) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layers...)
	if err != nil {
		t.Fatal(err)
	}
	cfg := v1.Config{}
	for _, m := range mutators {
		m(&cfg)
	}
	img, err = mutate.Config(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func put(t testing.TB, s *Store, img v1.Image, names ...string) Image {
	t.Helper()
	stored, err := s.Put(context.Background(), img, names...)
	if err != nil {
		t.Fatal(err)
	}
	return stored
}

// dirNames lists a directory's entries, nil if it does not exist.
func dirNames(t testing.TB, d string) []string {
	t.Helper()
	es, err := os.ReadDir(d)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (mknod, chown, mount); CI runs tests as root")
	}
}
