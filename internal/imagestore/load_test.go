package imagestore

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// dockerSave writes images as `docker save` does, one tag each, and returns the file.
func dockerSave(t *testing.T, images map[string]v1.Image) string {
	t.Helper()
	refs := map[name.Tag]v1.Image{}
	for n, img := range images {
		tag, err := name.NewTag(n)
		if err != nil {
			t.Fatal(err)
		}
		refs[tag] = img
	}
	path := filepath.Join(t.TempDir(), "images.tar")
	if err := tarball.MultiWriteToFile(path, refs); err != nil {
		t.Fatal(err)
	}
	return path
}

// ociLayout writes img as an OCI layout directory with the given index.json annotations.
func ociLayout(t *testing.T, img v1.Image, annotations map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(annotations)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tarDir packs a directory's regular files and directories into a tarball.
func tarDir(t *testing.T, dir string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		hdr, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	path := dir + ".tar"
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// rawTar writes a tarball of name -> content.
func rawTar(t *testing.T, files [][2]string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, f[1])
	}
	tw.Close()
	path := filepath.Join(t.TempDir(), "crafted.tar")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func names(images []Image) [][]string {
	var out [][]string
	for _, img := range images {
		out = append(out, img.Names)
	}
	return out
}

func TestLoadDockerSave(t *testing.T) {
	requireRoot(t)
	s := newStore(t)
	a := makeImage(t, []v1.Layer{gzipLayer(t, file("bin/a", "a"))})
	b := makeImage(t, []v1.Layer{plainLayer(t, file("bin/b", "b")), plainLayer(t, file("etc/b", "b2"))})
	path := dockerSave(t, map[string]v1.Image{"example.com/team/a:1.0": a, "b:dev": b})

	loaded, err := s.Load(context.Background(), path, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 2 {
		t.Fatalf("loaded %v, want two images", names(loaded))
	}
	for _, ref := range []string{"example.com/team/a:1.0", "docker.io/library/b:dev"} {
		img, err := s.Get(ref)
		if err != nil {
			t.Fatalf("Get(%s) after load: %v", ref, err)
		}
		// Loading unpacked the layers already: a container start finds them.
		for _, d := range img.DiffIDs {
			if !isDir(filepath.Join(s.Dir(), "layers", strings.TrimPrefix(d, "sha256:"))) {
				t.Errorf("%s: layer %s not unpacked by Load", ref, d)
			}
		}
	}
	// docker save keeps the config (the image ID), not the manifest.
	ac, _ := a.ConfigName()
	got, err := s.Get("example.com/team/a:1.0")
	if err != nil || got.ConfigDigest != ac.String() {
		t.Errorf("a stored with image ID %s (%v), want %s", got.ConfigDigest, err, ac)
	}
}

func TestLoadOCILayout(t *testing.T) {
	requireRoot(t)
	img := makeImage(t, []v1.Layer{gzipLayer(t, file("srv/index.html", "hi"))})
	digest, _ := img.Digest()
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		fallback    string
		tarball     bool
		want        string
	}{
		{name: "containerd name", annotations: map[string]string{annotationName: "registry.test/web:2"}, want: "registry.test/web:2"},
		{name: "full ref.name", annotations: map[string]string{annotationRefTag: "registry.test/web:3"}, want: "registry.test/web:3"},
		{name: "tag only needs --name", annotations: map[string]string{annotationRefTag: "3"}, fallback: "web:4", want: "docker.io/library/web:4"},
		{name: "tarball of a layout", annotations: map[string]string{annotationName: "registry.test/web:5"}, tarball: true, want: "registry.test/web:5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			path := ociLayout(t, img, tc.annotations)
			if tc.tarball {
				path = tarDir(t, path)
			}
			if _, err := s.Load(context.Background(), path, tc.fallback); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(tc.want)
			if err != nil || got.Digest != digest.String() {
				t.Fatalf("Get(%s) = %s, %v; want digest %s", tc.want, got.Digest, err, digest)
			}
			if left := dirNames(t, filepath.Join(s.Dir(), "tmp")); len(left) != 0 {
				t.Errorf("tmp/ after load: %v", left)
			}
		})
	}
}

// TestLoadRefusesBadInput: every refused file names what is wrong, stores no name, leaves no
// blob or layer behind and writes nothing outside the store.
func TestLoadRefusesBadInput(t *testing.T) {
	requireRoot(t)
	outside := t.TempDir()
	notTar := static.NewLayer([]byte("this is not a tar stream, just text that goes on for a while........................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................"), types.DockerUncompressedLayer)
	for _, tc := range []struct {
		name  string
		file  func(t *testing.T) string
		want  []string
		isErr error
	}{
		{
			name: "dot-dot path",
			file: func(t *testing.T) string {
				return dockerSave(t, map[string]v1.Image{"evil:1": makeImage(t, []v1.Layer{plainLayer(t, file("ok", "fine"), file("../../escaped", "x"))})})
			},
			want:  []string{`"../../escaped"`, "load ", "layer 0"},
			isErr: ErrPathEscapes,
		},
		{
			name: "absolute symlink out, then a file through it",
			file: func(t *testing.T) string {
				return dockerSave(t, map[string]v1.Image{"evil:2": makeImage(t, []v1.Layer{plainLayer(t, symlink("out", outside), file("out/pwned", "x"))})})
			},
			want:  []string{`"out/pwned"`},
			isErr: ErrPathEscapes,
		},
		{
			name: "layer that is not a tar",
			file: func(t *testing.T) string {
				return dockerSave(t, map[string]v1.Image{"junk:1": makeImage(t, []v1.Layer{gzipLayer(t, file("ok", "fine")), notTar})})
			},
			want: []string{"layer 1", "read tar"},
		},
		{
			name: "manifest.json names a missing layer",
			file: func(t *testing.T) string {
				return rawTar(t, [][2]string{
					{"manifest.json", `[{"Config":"config.json","RepoTags":["lost:1"],"Layers":["abc/layer.tar"]}]`},
					{"config.json", `{"rootfs":{"type":"layers","diff_ids":["sha256:0000000000000000000000000000000000000000000000000000000000000000"]}}`},
				})
			},
			want: []string{`"abc/layer.tar" is not in the tarball`, "manifest.json, image 0"},
		},
		{
			name: "neither format",
			file: func(t *testing.T) string { return rawTar(t, [][2]string{{"hello.txt", "hi"}}) },
			want: []string{"neither a docker-save tarball"},
		},
		{
			name: "layout tarball with an escaping entry",
			file: func(t *testing.T) string {
				return rawTar(t, [][2]string{{"oci-layout", `{"imageLayoutVersion":"1.0.0"}`}, {"index.json", `{}`}, {"../../boom", "x"}})
			},
			want:  []string{`"../../boom"`},
			isErr: ErrPathEscapes,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			path := tc.file(t)
			_, err := s.Load(context.Background(), path, "")
			if err == nil {
				t.Fatal("Load accepted it")
			}
			t.Logf("refused: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if tc.isErr != nil && !errors.Is(err, tc.isErr) {
				t.Errorf("error %v does not wrap %v", err, tc.isErr)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file %s", err, path)
			}
			images, err := s.List()
			if err != nil || len(images) != 0 {
				t.Errorf("store lists %v (%v) after a refused load", names(images), err)
			}
			for _, d := range []string{"blobs/sha256", "layers", "tmp"} {
				if left := dirNames(t, filepath.Join(s.Dir(), d)); len(left) != 0 {
					t.Errorf("%s/ after a refused load: %v", d, left)
				}
			}
			if left := dirNames(t, outside); len(left) != 0 {
				t.Errorf("written outside the store: %v", left)
			}
			for _, p := range []string{filepath.Join(filepath.Dir(s.Dir()), "escaped"), filepath.Join(filepath.Dir(s.Dir()), "boom")} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s written outside the store", p)
				}
			}
		})
	}
}

func TestLoadUnnamed(t *testing.T) {
	requireRoot(t)
	img := makeImage(t, []v1.Layer{gzipLayer(t, file("x", "x"))})
	dir := ociLayout(t, img, nil)
	s := newStore(t)
	if _, err := s.Load(context.Background(), dir, ""); err == nil || !strings.Contains(err.Error(), "--name") {
		t.Fatalf("unnamed image without --name: %v, want an error pointing at --name", err)
	}
	loaded, err := s.Load(context.Background(), dir, "mine:1")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	want := [][]string{{"docker.io/library/mine:1", "docker.io/library/mine@" + d.String()}}
	if diff := cmp.Diff(want, names(loaded)); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}
