package imagestore

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

func owner(uid, gid int) func(*tar.Header) {
	return func(h *tar.Header) { h.Uid, h.Gid = uid, gid }
}

func mode(m int64) func(*tar.Header) { return func(h *tar.Header) { h.Mode = m } }

func TestLowersUnpack(t *testing.T) {
	requireRoot(t)
	s := newStore(t)
	base := gzipLayer(t,
		dir("etc"),
		file("etc/passwd", "root:x:0:0::/root:/bin/sh\n"),
		file("etc/gone", "deleted above"),
		dir("var/cache", mode(0o700)),
		file("var/cache/old", "hidden above"),
	)
	top := plainLayer(t,
		file("bin/tool", "#!/bin/sh\n", mode(0o4755), owner(0, 0)),
		file("home/u/data", "mine", mode(0o600), owner(1000, 2000), func(h *tar.Header) {
			h.PAXRecords = map[string]string{"SCHILY.xattr.user.origin": "test", "SCHILY.xattr.trusted.overlay.redirect": "/x"}
		}),
		symlink("bin/sh", "tool"),
		symlink("abs", "/etc/passwd"),
		hardlink("bin/tool2", "bin/tool"),
		entry{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "dev/null", Mode: 0o666, Devmajor: 1, Devminor: 3}},
		entry{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "run/fifo", Mode: 0o600}},
		whiteout("etc/gone"),
		opaque("var/cache"),
		file("var/cache/new", "fresh"),
		dir("replaced"),
		file("replaced/child", "gone with its directory"),
		file("replaced", "now a file"),
	)
	img := put(t, s, makeImage(t, []v1.Layer{base, top}), "app")
	lowers, err := s.Lowers(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	if len(lowers) != 2 {
		t.Fatalf("Lowers = %v, want 2", lowers)
	}
	for i, l := range lowers {
		name := filepath.Base(l)
		if len(name) != shortLinkLen || filepath.Dir(l) != filepath.Join(s.Dir(), "l") {
			t.Errorf("lower %d = %s, want dir/l/<%d hex>", i, l, shortLinkLen)
		}
	}
	if want := strings.TrimPrefix(img.DiffIDs[1], "sha256:")[:shortLinkLen]; filepath.Base(lowers[0]) != want {
		t.Errorf("uppermost lower = %s, want the top layer %s", lowers[0], want)
	}
	upper := lowers[0]

	type want struct {
		mode     os.FileMode
		uid, gid uint32
		rdev     uint64
		link     string
		content  string
	}
	cases := map[string]want{
		"bin/tool":      {mode: 0o755 | os.ModeSetuid, content: "#!/bin/sh\n"},
		"bin/sh":        {mode: os.ModeSymlink | 0o777, link: "tool"},
		"abs":           {mode: os.ModeSymlink | 0o777, link: "/etc/passwd"},
		"home/u/data":   {mode: 0o600, uid: 1000, gid: 2000, content: "mine"},
		"home":          {mode: os.ModeDir | 0o755},
		"dev/null":      {mode: os.ModeDevice | os.ModeCharDevice | 0o666, rdev: unix.Mkdev(1, 3)},
		"run/fifo":      {mode: os.ModeNamedPipe | 0o600},
		"etc/gone":      {mode: os.ModeDevice | os.ModeCharDevice},
		"var/cache/new": {mode: 0o644, content: "fresh"},
		"replaced":      {mode: 0o644, content: "now a file"},
	}
	for name, w := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(upper, name)
			fi, err := os.Lstat(p)
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			got := want{mode: fi.Mode(), uid: st.Uid, gid: st.Gid, rdev: st.Rdev}
			if fi.Mode()&os.ModeSymlink != 0 {
				got.link, _ = os.Readlink(p)
			}
			if fi.Mode().IsRegular() {
				b, _ := os.ReadFile(p)
				got.content = string(b)
			}
			if diff := cmp.Diff(w, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	var a, b unix.Stat_t
	if err := unix.Stat(filepath.Join(upper, "bin/tool"), &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(filepath.Join(upper, "bin/tool2"), &b); err != nil {
		t.Fatal(err)
	}
	if a.Ino != b.Ino {
		t.Errorf("bin/tool2 is not a hard link of bin/tool")
	}
	xattr := func(p, attr string) string {
		buf := make([]byte, 64)
		n, err := unix.Lgetxattr(filepath.Join(upper, p), attr, buf)
		if err != nil {
			return ""
		}
		return string(buf[:n])
	}
	if got := xattr("var/cache", opaqueXattr); got != "y" {
		t.Errorf("var/cache %s = %q, want y", opaqueXattr, got)
	}
	if got := xattr("home/u/data", "user.origin"); got != "test" {
		t.Errorf("home/u/data user.origin = %q, want test", got)
	}
	if got := xattr("home/u/data", "trusted.overlay.redirect"); got != "" {
		t.Errorf("a layer set the overlayfs xattr trusted.overlay.redirect=%q", got)
	}

	// Unpacked once: a second call reuses the layers.
	if _, err := s.Lowers(context.Background(), img); err != nil {
		t.Fatal(err)
	}
	if n := s.unpacked.Load(); n != 2 {
		t.Errorf("unpacked %d layers, want 2", n)
	}
}

func TestLowersConcurrent(t *testing.T) {
	s := newStore(t)
	var layers []v1.Layer
	for i := range 3 {
		layers = append(layers, gzipLayer(t, file(strings.Repeat("d/", i+1)+"f", strings.Repeat("x", 1<<16))))
	}
	img := put(t, s, makeImage(t, layers), "app")
	// Separate Store values stand for separate agent processes: flock excludes open files,
	// not processes.
	stores := []*Store{s}
	for range 3 {
		other, err := Open(s.Dir())
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, other)
	}
	const callers = 8
	results := make([][]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			results[i], errs[i] = stores[i%len(stores)].Lowers(context.Background(), img)
		})
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if diff := cmp.Diff(results[0], results[i]); diff != "" {
			t.Errorf("caller %d got other lowers (-0 +%d):\n%s", i, i, diff)
		}
	}
	var total int64
	for _, st := range stores {
		total += st.unpacked.Load()
	}
	if total != 3 {
		t.Errorf("%d unpacks for 3 layers", total)
	}
	if got := dirNames(t, filepath.Join(s.Dir(), "layers")); len(got) != 3 {
		t.Errorf("layers/ = %v, want 3 layers", got)
	}
}

func TestLowersNoLayers(t *testing.T) {
	s := newStore(t)
	img := put(t, s, makeImage(t, nil), "scratch")
	lowers, err := s.Lowers(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	if len(lowers) != 1 || len(dirNames(t, lowers[0])) != 0 {
		t.Errorf("Lowers = %v, want one empty directory", lowers)
	}
}

func TestLowersDuplicateLayer(t *testing.T) {
	s := newStore(t)
	l := plainLayer(t, file("a", "1"))
	img := put(t, s, makeImage(t, []v1.Layer{l, plainLayer(t, file("b", "2")), l}), "dup")
	lowers, err := s.Lowers(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	if len(lowers) != 2 {
		t.Errorf("Lowers = %v, want the repeated layer once", lowers)
	}
}

// wrongDiffID is a layer whose config entry does not match its content.
type wrongDiffID struct{ v1.Layer }

func (wrongDiffID) DiffID() (v1.Hash, error) {
	return v1.NewHash("sha256:" + strings.Repeat("ab", 32))
}

func TestLowersRefuses(t *testing.T) {
	requireRoot(t)
	cases := []struct {
		name    string
		layer   func(t *testing.T) v1.Layer
		wantErr string
		escapes bool
	}{
		{
			name:    "diffID mismatch",
			layer:   func(t *testing.T) v1.Layer { return wrongDiffID{gzipLayer(t, file("a", "1"))} },
			wantErr: "diffID mismatch",
		},
		{
			name:    "dot dot",
			layer:   func(t *testing.T) v1.Layer { return plainLayer(t, file("../escaped", "x")) },
			escapes: true,
		},
		{
			name:    "dot dot inside",
			layer:   func(t *testing.T) v1.Layer { return plainLayer(t, file("a/../../escaped", "x")) },
			escapes: true,
		},
		{
			name: "absolute symlink",
			layer: func(t *testing.T) v1.Layer {
				return plainLayer(t, symlink("etc", "/tmp"), file("etc/escaped", "x"))
			},
			escapes: true,
		},
		{
			name: "relative symlink climbing out",
			layer: func(t *testing.T) v1.Layer {
				return plainLayer(t, dir("a"), symlink("a/up", "../../.."), file("a/up/escaped", "x"))
			},
			escapes: true,
		},
		{
			name:    "hard link out",
			layer:   func(t *testing.T) v1.Layer { return plainLayer(t, hardlink("passwd", "../../../../etc/passwd")) },
			escapes: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			good := plainLayer(t, file("ok", "ok"))
			// Lowers unpacks from the top: the good layer is done before the bad one fails.
			img := put(t, s, makeImage(t, []v1.Layer{tc.layer(t), good}), "bad")
			_, err := s.Lowers(context.Background(), img)
			if err == nil {
				t.Fatal("Lowers succeeded")
			}
			t.Logf("Lowers: %v", err)
			if tc.escapes && !errors.Is(err, ErrPathEscapes) {
				t.Errorf("error %v does not wrap ErrPathEscapes", err)
			}
			if tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v does not say %q", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), "docker.io/library/bad:latest") || !strings.Contains(err.Error(), "layer 0") {
				t.Errorf("error %v does not name the image and the layer", err)
			}
			goodID, _ := good.DiffID()
			if diff := cmp.Diff([]string{goodID.Hex}, dirNames(t, filepath.Join(s.Dir(), "layers"))); diff != "" {
				t.Errorf("layers/ (-want +got):\n%s", diff)
			}
			if names := dirNames(t, filepath.Join(s.Dir(), "tmp")); len(names) != 0 {
				t.Errorf("tmp/ holds %v", names)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(s.Dir()), "escaped")); !os.IsNotExist(err) {
				t.Errorf("a file escaped the store: %v", err)
			}
			if _, err := os.Lstat("/tmp/escaped"); !os.IsNotExist(err) {
				t.Errorf("a file escaped to /tmp: %v", err)
			}
		})
	}
}
