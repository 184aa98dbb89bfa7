package imagestore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

func TestPutGet(t *testing.T) {
	s := newStore(t)
	busybox := makeImage(t, []v1.Layer{gzipLayer(t, file("bin/sh", "#!"))}, func(c *v1.Config) {
		c.Entrypoint = []string{"/bin/sh"}
		c.Cmd = []string{"-c", "true"}
		c.Env = []string{"PATH=/bin"}
		c.WorkingDir = "/w"
		c.User = "1000:1000"
		c.StopSignal = "SIGQUIT"
		c.ExposedPorts = map[string]struct{}{"80/tcp": {}}
	})
	pause, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	bb := put(t, s, busybox, "busybox", "busybox:1.36")
	ps := put(t, s, pause, "registry.k8s.io/pause:3.10")

	bbDigest, _ := busybox.Digest()
	bbConfig, _ := busybox.ConfigName()
	if bb.Digest != bbDigest.String() || bb.ConfigDigest != bbConfig.String() {
		t.Errorf("digests = %s, %s; want %s, %s", bb.Digest, bb.ConfigDigest, bbDigest, bbConfig)
	}
	wantNames := []string{
		"docker.io/library/busybox:1.36",
		"docker.io/library/busybox:latest",
		"docker.io/library/busybox@" + bbDigest.String(),
	}
	if diff := cmp.Diff(wantNames, bb.Names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/bin/sh"}, bb.Config.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	if bb.Config.Config.StopSignal != "SIGQUIT" || bb.Config.Config.User != "1000:1000" {
		t.Errorf("config = %+v", bb.Config.Config)
	}
	wantSize := func(img v1.Image) int64 {
		m, _ := img.Manifest()
		raw, _ := img.RawManifest()
		size := m.Config.Size + int64(len(raw))
		for _, l := range m.Layers {
			size += l.Size
		}
		return size
	}
	if bb.Size != wantSize(busybox) {
		t.Errorf("size = %d, want %d", bb.Size, wantSize(busybox))
	}
	if len(ps.DiffIDs) != 2 {
		t.Errorf("pause diffIDs = %v, want 2", ps.DiffIDs)
	}

	cases := []struct {
		ref     string
		want    string // manifest digest; "" means not found
		invalid bool
	}{
		{ref: "busybox", want: bb.Digest},
		{ref: "docker.io/library/busybox:latest", want: bb.Digest},
		{ref: "busybox:1.36", want: bb.Digest},
		{ref: "busybox@" + bb.Digest, want: bb.Digest},
		{ref: bb.Digest, want: bb.Digest},
		{ref: bb.ConfigDigest, want: bb.Digest},
		{ref: "registry.k8s.io/pause:3.10", want: ps.Digest},
		{ref: "registry.k8s.io/pause@" + ps.Digest, want: ps.Digest},
		{ref: "registry.k8s.io/pause:3.9"},
		{ref: "busybox@" + ps.Digest},
		{ref: "nginx"},
		{ref: "sha256:0000000000000000000000000000000000000000000000000000000000000000"},
		{ref: "Busybox", invalid: true},
	}
	for _, tc := range cases {
		t.Run(tc.ref, func(t *testing.T) {
			got, err := s.Get(tc.ref)
			switch {
			case tc.invalid:
				if !errors.Is(err, ErrInvalidName) {
					t.Errorf("Get(%q) error = %v, want ErrInvalidName", tc.ref, err)
				}
			case tc.want == "":
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("Get(%q) = %v, %v; want ErrNotFound", tc.ref, got.Names, err)
				}
			case err != nil:
				t.Errorf("Get(%q): %v", tc.ref, err)
			case got.Digest != tc.want:
				t.Errorf("Get(%q) = %s, want %s", tc.ref, got.Digest, tc.want)
			}
		})
	}

	if _, err := s.Put(context.Background(), busybox, "busybox@"+ps.Digest); err == nil || !strings.Contains(err.Error(), "pins digest") {
		t.Errorf("Put under another image's digest name = %v, want a pinned-digest error", err)
	}
	if _, err := s.Put(context.Background(), busybox); err == nil {
		t.Error("Put without a name succeeded")
	}

	// A second process opening the store sees the same images.
	other, err := Open(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	list, err := other.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("List = %d images, want 2", len(list))
	}

	// Standard OCI tooling reads the store.
	p, err := layout.FromPath(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Image(bbDigest); err != nil {
		t.Errorf("layout.Image(%s): %v", bbDigest, err)
	}
}

func TestTag(t *testing.T) {
	s := newStore(t)
	first := put(t, s, makeImage(t, []v1.Layer{plainLayer(t, file("a", "1"))}), "app:v1")
	second := put(t, s, makeImage(t, []v1.Layer{plainLayer(t, file("a", "2"))}), "app:v2")

	if err := s.Tag("app:latest", second.Digest); err != nil {
		t.Fatal(err)
	}
	// Moving a tag leaves the old image reachable by its digest name.
	if err := s.Tag("app:v1", second.Digest); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get("app:v1")
	if err != nil || got.Digest != second.Digest {
		t.Errorf("Get(app:v1) = %s, %v; want %s", got.Digest, err, second.Digest)
	}
	old, err := s.Get(first.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"docker.io/library/app@" + first.Digest}, old.Names); diff != "" {
		t.Errorf("names of the untagged image (-want +got):\n%s", diff)
	}
	if err := s.Tag("app:v3", "sha256:"+strings.Repeat("0", 64)); !errors.Is(err, ErrNotFound) {
		t.Errorf("Tag to a missing digest = %v, want ErrNotFound", err)
	}
	if err := s.Tag("app@"+first.Digest, second.Digest); err == nil || !strings.Contains(err.Error(), "pins digest") {
		t.Errorf("Tag with another image's digest name = %v, want a pinned-digest error", err)
	}
	if err := s.Tag("App", second.Digest); !errors.Is(err, ErrInvalidName) {
		t.Errorf("Tag with an invalid name = %v, want ErrInvalidName", err)
	}
}

// lyingLayer claims another layer's digest but serves different (corrupt or truncated) bytes.
type lyingLayer struct {
	v1.Layer
	content []byte
}

func (l lyingLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.content)), nil
}

func TestPutCorruptLayer(t *testing.T) {
	good := gzipLayer(t, file("etc/passwd", "root:x:0:0::/root:/bin/sh\n"))
	rc, err := good.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(raw)
	flipped[len(flipped)/2] ^= 0xff
	cases := []struct {
		name    string
		content []byte
		wantErr string
	}{
		{name: "digest mismatch", content: flipped, wantErr: "digest mismatch"},
		{name: "truncated", content: raw[:len(raw)/2], wantErr: "size mismatch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			base := plainLayer(t, file("base", "ok"))
			img := makeImage(t, []v1.Layer{base, lyingLayer{Layer: good, content: tc.content}})
			_, err := s.Put(context.Background(), img, "corrupt:1")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Put = %v, want an error containing %q", err, tc.wantErr)
			}
			goodDigest, _ := good.Digest()
			for _, want := range []string{"docker.io/library/corrupt:1", "layer 1", goodDigest.String()} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
			if list, err := s.List(); err != nil || len(list) != 0 {
				t.Errorf("List = %v, %v; want no image", list, err)
			}
			if _, err := os.Stat(s.blobPath(goodDigest)); !os.IsNotExist(err) {
				t.Errorf("the corrupt layer's blob exists: %v", err)
			}
			if names := dirNames(t, filepath.Join(s.Dir(), "tmp")); len(names) != 0 {
				t.Errorf("tmp holds %v after a failed Put", names)
			}
		})
	}
}

func TestCancelled(t *testing.T) {
	s := newStore(t)
	img := makeImage(t, []v1.Layer{gzipLayer(t, file("a", "1"))})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Put(ctx, img, "app"); !errors.Is(err, context.Canceled) {
		t.Errorf("Put = %v, want context.Canceled", err)
	}
	if list, err := s.List(); err != nil || len(list) != 0 {
		t.Errorf("List = %v, %v; want no image", list, err)
	}
	stored := put(t, s, img, "app")
	if _, err := s.Lowers(ctx, stored); !errors.Is(err, context.Canceled) {
		t.Errorf("Lowers = %v, want context.Canceled", err)
	}
	for _, d := range []string{"layers", "tmp"} {
		if names := dirNames(t, filepath.Join(s.Dir(), d)); len(names) != 0 {
			t.Errorf("%s/ holds %v", d, names)
		}
	}
}
