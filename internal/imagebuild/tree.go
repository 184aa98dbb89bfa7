package imagebuild

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// epoch is every entry's modification time, so that a layer's digest depends on what
// it holds and not on when it was built.
var epoch = time.Unix(0, 0).UTC()

// node is one entry of a layer. Host-backed files keep the metadata they had when the
// plan was made: Key hashes it, and the tar writer refuses a file whose size changed.
type node struct {
	// path is relative to the image root, slash-separated ("usr/sbin/nginx").
	path     string
	typ      byte // tar.TypeDir, TypeReg, TypeSymlink or TypeLink
	mode     int64
	uid, gid int
	// link is a symlink's target, or a hard link's target path in the same layer.
	link string
	// data is a regular file's content when the builder writes it; host names the
	// host file otherwise.
	data []byte
	host string
	// size, mtime, ino and dev describe the host file at plan time.
	size     int64
	mtime    int64
	ino, dev uint64
}

// tree is one layer's entries, by path. Adding the same path twice keeps the first
// entry when both agree and records an error when they do not, so that two
// programs' closures can share libraries.
type tree struct {
	name  string
	nodes map[string]*node
	err   error
}

func newTree(name string) *tree { return &tree{name: name, nodes: map[string]*node{}} }

// clean turns an image path ("/usr/bin/x", "usr/bin/x/") into the tree's form.
func clean(p string) string { return strings.TrimPrefix(path.Clean("/"+p), "/") }

func (t *tree) add(n *node) {
	n.path = clean(n.path)
	if n.path == "" {
		return
	}
	if old, ok := t.nodes[n.path]; ok {
		if old.typ != n.typ || old.link != n.link || old.host != n.host || string(old.data) != string(n.data) {
			t.fail(fmt.Errorf("layer %s: /%s is added twice with different contents", t.name, n.path))
		}
		if n.typ == tar.TypeDir {
			// An explicit directory wins over one implied by a child.
			old.mode, old.uid, old.gid = n.mode, n.uid, n.gid
		}
		return
	}
	t.nodes[n.path] = n
}

func (t *tree) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

// dir adds a directory owned by uid:gid.
func (t *tree) dir(p string, mode int64, uid, gid int) {
	t.add(&node{path: p, typ: tar.TypeDir, mode: mode, uid: uid, gid: gid})
}

// file adds a regular file with the given content, owned by root.
func (t *tree) file(p string, mode int64, data string) {
	t.add(&node{path: p, typ: tar.TypeReg, mode: mode, data: []byte(data)})
}

func (t *tree) symlink(p, target string) {
	t.add(&node{path: p, typ: tar.TypeSymlink, mode: 0o777, link: target})
}

// hardlink adds p as a hard link to target, which must be a regular file of the same
// layer (links across layers do not survive an overlay snapshotter).
func (t *tree) hardlink(p, target string) {
	t.add(&node{path: p, typ: tar.TypeLink, mode: 0o755, link: clean(target)})
}

// hostFile adds the host's regular file at hostPath as image path p, with its mode and
// root ownership.
func (t *tree) hostFile(p, hostPath string) {
	fi, err := os.Stat(hostPath)
	if err != nil {
		t.fail(fmt.Errorf("layer %s: %w", t.name, err))
		return
	}
	if !fi.Mode().IsRegular() {
		t.fail(fmt.Errorf("layer %s: %s is not a regular file", t.name, hostPath))
		return
	}
	t.add(hostNode(p, hostPath, fi))
}

func hostNode(p, hostPath string, fi fs.FileInfo) *node {
	n := &node{path: p, typ: tar.TypeReg, mode: int64(fi.Mode().Perm()), host: hostPath, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		n.ino, n.dev = st.Ino, uint64(st.Dev)
	}
	return n
}

// hostPath adds the host file at p under the same path, reproducing every symbolic
// link met on the way (the host's /lib -> usr/lib, libssl.so.3 -> libssl.so.3.0.8...),
// so that a program finds its interpreter and libraries by the names it was linked
// with. It returns the canonical path of the file reached.
func (t *tree) hostPath(p string) string {
	for hops := 0; hops < 40; hops++ {
		p = path.Clean(p)
		// Find the first component of p that is a symbolic link.
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		resolved := false
		for i := range parts {
			prefix := "/" + strings.Join(parts[:i+1], "/")
			fi, err := os.Lstat(prefix)
			if err != nil {
				t.fail(fmt.Errorf("layer %s: %w", t.name, err))
				return p
			}
			if fi.Mode()&fs.ModeSymlink == 0 {
				continue
			}
			target, err := os.Readlink(prefix)
			if err != nil {
				t.fail(fmt.Errorf("layer %s: %w", t.name, err))
				return p
			}
			t.symlink(prefix, target)
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(prefix), target)
			}
			p = path.Join(append([]string{target}, parts[i+1:]...)...)
			resolved = true
			break
		}
		if !resolved {
			t.hostFile(p, p)
			return p
		}
	}
	t.fail(fmt.Errorf("layer %s: too many symbolic links resolving %s", t.name, p))
	return p
}

// hostTree adds the host directory dir and everything below it under the same paths,
// files with their modes, symbolic links as they are, all owned by root; skip leaves
// out a path (and, for a directory, what is below it).
func (t *tree) hostTree(dir string, skip func(string) bool) {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if skip != nil && skip(p) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			t.dir(p, int64(fi.Mode().Perm()), 0, 0)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			t.symlink(p, target)
		case fi.Mode().IsRegular():
			t.add(hostNode(p, p, fi))
		}
		return nil
	})
	if err != nil {
		t.fail(fmt.Errorf("layer %s: %w", t.name, err))
	}
}

// entries returns the tree's nodes in the order the tar holds them: parents are
// implied as root-owned 0755 directories, everything but hard links is sorted by path
// (a directory before what it holds), then the hard links, sorted, after the files
// they name.
func (t *tree) entries() ([]*node, error) {
	if t.err != nil {
		return nil, t.err
	}
	for p := range t.nodes {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if n, ok := t.nodes[d]; ok {
				if n.typ != tar.TypeDir {
					return nil, fmt.Errorf("layer %s: /%s is below /%s, which is not a directory", t.name, p, d)
				}
				continue
			}
			t.nodes[d] = &node{path: d, typ: tar.TypeDir, mode: 0o755}
		}
	}
	out := make([]*node, 0, len(t.nodes))
	for _, n := range t.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool {
		li, lj := out[i].typ == tar.TypeLink, out[j].typ == tar.TypeLink
		if li != lj {
			return lj
		}
		return out[i].path < out[j].path
	})
	for _, n := range out {
		if n.typ == tar.TypeLink {
			target, ok := t.nodes[n.link]
			if !ok || target.typ != tar.TypeReg {
				return nil, fmt.Errorf("layer %s: hard link /%s names /%s, which is not a file of the layer", t.name, n.path, n.link)
			}
		}
	}
	return out, nil
}

// writeTar writes the layer's tar stream, stopping between entries when ctx is done.
func writeTar(ctx context.Context, w io.Writer, layer string, nodes []*node) error {
	tw := tar.NewWriter(w)
	for _, n := range nodes {
		if err := ctx.Err(); err != nil {
			return err
		}
		h := &tar.Header{
			Typeflag: n.typ,
			Name:     n.path,
			Linkname: n.link,
			Mode:     n.mode,
			Uid:      n.uid,
			Gid:      n.gid,
			ModTime:  epoch,
			Format:   tar.FormatPAX,
		}
		if n.typ == tar.TypeDir {
			h.Name += "/"
		}
		if n.typ == tar.TypeReg {
			h.Size = int64(len(n.data))
			if n.host != "" {
				h.Size = n.size
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("layer %s: /%s: %w", layer, n.path, err)
		}
		if n.typ != tar.TypeReg {
			continue
		}
		if n.host == "" {
			if _, err := tw.Write(n.data); err != nil {
				return fmt.Errorf("layer %s: /%s: %w", layer, n.path, err)
			}
			continue
		}
		if err := copyHost(tw, n); err != nil {
			return fmt.Errorf("layer %s: /%s: %w", layer, n.path, err)
		}
	}
	return tw.Close()
}

// copyHost copies a host file's contents, failing when its size is no longer the one
// the plan (and so the header and Key) recorded.
func copyHost(w io.Writer, n *node) error {
	f, err := os.Open(n.host)
	if err != nil {
		return err
	}
	defer f.Close()
	copied, err := io.Copy(w, io.LimitReader(f, n.size+1))
	if err == nil && copied != n.size {
		err = fmt.Errorf("%s changed while the image was built (%d bytes, expected %d): build again", n.host, copied, n.size)
	}
	return err
}
