package imagestore

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// OCI whiteouts (image-spec layer.md) and their overlayfs form.
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
	opaqueXattr    = "trusted.overlay.opaque"
	// overlayXattrPrefix names xattrs that steer overlayfs itself; a layer may not carry them.
	overlayXattrPrefix = "trusted.overlay."
	paxXattrPrefix     = "SCHILY.xattr."
)

// ErrPathEscapes is wrapped by extraction errors for a tar entry whose path, or a symlink on its
// way, leads outside the layer directory.
var ErrPathEscapes = errors.New(`path leads outside the layer directory (through ".." or a symlink); the layer is refused`)

// copyBufferSize is the read size for file contents; larger than io.Copy's default to keep
// syscalls per byte low on big layers.
const copyBufferSize = 1 << 20

// extract unpacks the uncompressed tar stream r into the empty directory root, converting OCI
// whiteouts to overlayfs ones, and checks that the stream's sha256 is diffID. Every path is
// resolved beneath root with openat2(RESOLVE_BENEATH): ".." or a symlink leading out of root
// is refused, never followed.
func extract(ctx context.Context, r io.Reader, root string, diffID v1.Hash) error {
	rootFd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(rootFd)
	sum := sha256.New()
	stream := io.TeeReader(r, sum)
	tr := tar.NewReader(stream)
	x := &extractor{root: rootFd, buf: make([]byte, copyBufferSize)}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return fmt.Errorf("tar entry %q: %w", hdr.Name, err)
		}
	}
	// The diffID covers the whole stream, including the padding after tar's end marker.
	if _, err := io.Copy(io.Discard, stream); err != nil {
		return fmt.Errorf("read tar: %w", err)
	}
	if got := fmt.Sprintf("%x", sum.Sum(nil)); got != diffID.Hex {
		return fmt.Errorf("diffID mismatch: the config says %s, the layer's content is sha256:%s (corrupt layer)", diffID, got)
	}
	for _, d := range x.dirs {
		if err := x.setTimes(d.name, d.hdr); err != nil {
			return fmt.Errorf("tar entry %q: %w", d.hdr.Name, err)
		}
	}
	return nil
}

// extractor holds the state of one layer's extraction.
type extractor struct {
	root int
	buf  []byte
	// dirs get their times after all entries: creating children changes a directory's mtime.
	dirs []dirEntry
}

type dirEntry struct {
	name string
	hdr  *tar.Header
}

// cleanName turns a tar path into a clean path relative to the layer root, "." for the root.
func cleanName(name string) (string, error) {
	c := path.Clean(strings.TrimLeft(name, "/"))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", ErrPathEscapes
	}
	return c, nil
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if name == "." {
		if hdr.Typeflag != tar.TypeDir {
			return errors.New("the layer root must be a directory")
		}
		x.dirs = append(x.dirs, dirEntry{name: name, hdr: hdr})
		return x.setMeta(x.root, hdr)
	}
	dir, base := path.Split(name)
	parent, err := x.mkdirAll(path.Clean(dir))
	if err != nil {
		return err
	}
	defer x.closeDir(parent)

	if base == whiteoutOpaque {
		return unix.Fsetxattr(parent, opaqueXattr, []byte("y"), 0)
	}
	if strings.HasPrefix(base, whiteoutMeta) {
		// Other .wh..wh. entries are AUFS bookkeeping with no meaning in overlayfs.
		return nil
	}
	if target, ok := strings.CutPrefix(base, whiteoutPrefix); ok {
		if err := removeAt(parent, target, false); err != nil {
			return err
		}
		if err := unix.Mknodat(parent, target, unix.S_IFCHR, 0); err != nil {
			return err
		}
		return unix.Fchownat(parent, target, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW)
	}

	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := removeAt(parent, base, true); err != nil {
			return err
		}
		if err := unix.Mkdirat(parent, base, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
		fd, err := openBeneath(parent, base)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		x.dirs = append(x.dirs, dirEntry{name: name, hdr: hdr})
		return x.setMeta(fd, hdr)
	case tar.TypeReg, tar.TypeRegA:
		if err := removeAt(parent, base, false); err != nil {
			return err
		}
		fd, err := unix.Openat(parent, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), name)
		// Hide ReadFrom so that CopyBuffer uses our large buffer.
		_, err = io.CopyBuffer(struct{ io.Writer }{f}, r, x.buf)
		if err == nil {
			err = x.setMeta(fd, hdr)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		return setTimesAt(parent, base, hdr)
	case tar.TypeSymlink:
		if err := removeAt(parent, base, false); err != nil {
			return err
		}
		if err := unix.Symlinkat(hdr.Linkname, parent, base); err != nil {
			return err
		}
		if err := unix.Fchownat(parent, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		return setTimesAt(parent, base, hdr)
	case tar.TypeLink:
		target, err := cleanName(hdr.Linkname)
		if err != nil {
			return fmt.Errorf("hard link to %q: %w", hdr.Linkname, err)
		}
		tdir, tbase := path.Split(target)
		tparent, err := x.openDir(path.Clean(tdir))
		if err != nil {
			return fmt.Errorf("hard link to %q: %w", hdr.Linkname, err)
		}
		defer x.closeDir(tparent)
		if err := removeAt(parent, base, false); err != nil {
			return err
		}
		if err := unix.Linkat(tparent, tbase, parent, base, 0); err != nil {
			return fmt.Errorf("hard link to %q: %w", hdr.Linkname, err)
		}
		return nil
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		mode := map[byte]uint32{tar.TypeChar: unix.S_IFCHR, tar.TypeBlock: unix.S_IFBLK, tar.TypeFifo: unix.S_IFIFO}[hdr.Typeflag]
		if err := removeAt(parent, base, false); err != nil {
			return err
		}
		dev := unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor))
		if err := unix.Mknodat(parent, base, mode|0o600, int(dev)); err != nil {
			return err
		}
		if err := unix.Fchownat(parent, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if err := unix.Fchmodat(parent, base, uint32(hdr.Mode)&0o7777, 0); err != nil {
			return err
		}
		return setTimesAt(parent, base, hdr)
	case tar.TypeXGlobalHeader:
		return nil
	default:
		return fmt.Errorf("unsupported tar entry type %q", hdr.Typeflag)
	}
}

// setMeta sets owner, mode and xattrs on an open file or directory. The mode goes after the
// owner because chown clears set-user-ID and set-group-ID bits.
func (x *extractor) setMeta(fd int, hdr *tar.Header) error {
	if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, uint32(hdr.Mode)&0o7777); err != nil {
		return err
	}
	for key, value := range hdr.PAXRecords {
		attr, ok := strings.CutPrefix(key, paxXattrPrefix)
		if !ok || strings.HasPrefix(attr, overlayXattrPrefix) {
			continue
		}
		if err := unix.Fsetxattr(fd, attr, []byte(value), 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
			return fmt.Errorf("xattr %s: %w", attr, err)
		}
	}
	return nil
}

// setTimes sets a directory's times once all entries are written.
func (x *extractor) setTimes(name string, hdr *tar.Header) error {
	if name == "." {
		return unix.UtimesNanoAt(x.root, ".", timespecs(hdr), 0)
	}
	dir, base := path.Split(name)
	parent, err := x.openDir(path.Clean(dir))
	if err != nil {
		return err
	}
	defer x.closeDir(parent)
	return setTimesAt(parent, base, hdr)
}

func setTimesAt(parent int, base string, hdr *tar.Header) error {
	return unix.UtimesNanoAt(parent, base, timespecs(hdr), unix.AT_SYMLINK_NOFOLLOW)
}

func timespecs(hdr *tar.Header) []unix.Timespec {
	atime := hdr.AccessTime
	if atime.IsZero() {
		atime = hdr.ModTime
	}
	return []unix.Timespec{toTimespec(atime), toTimespec(hdr.ModTime)}
}

func toTimespec(t time.Time) unix.Timespec {
	if t.IsZero() {
		t = time.Unix(0, 0)
	}
	return unix.NsecToTimespec(t.UnixNano())
}

// openDir opens the directory rel (clean, relative) beneath the layer root.
func (x *extractor) openDir(rel string) (int, error) {
	if rel == "." {
		return x.root, nil
	}
	return openBeneath(x.root, rel)
}

// closeDir closes a directory from openDir, except the root.
func (x *extractor) closeDir(fd int) {
	if fd != x.root {
		unix.Close(fd)
	}
}

// mkdirAll opens the directory rel beneath the root, creating missing components (a tar need
// not list parent directories) with mode 0755 as containerd does.
func (x *extractor) mkdirAll(rel string) (int, error) {
	fd, err := x.openDir(rel)
	if !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	parent := x.root
	prefix := ""
	for _, comp := range strings.Split(rel, "/") {
		prefix = path.Join(prefix, comp)
		fd, err := openBeneath(x.root, prefix)
		if errors.Is(err, unix.ENOENT) {
			if err := unix.Mkdirat(parent, comp, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				x.closeDir(parent)
				return -1, err
			}
			fd, err = openBeneath(x.root, prefix)
		}
		x.closeDir(parent)
		if err != nil {
			return -1, err
		}
		parent = fd
	}
	return parent, nil
}

// openBeneath opens directory rel relative to dirfd, refusing to leave dirfd through ".." or
// a symlink (absolute, or relative and climbing out).
func openBeneath(dirfd int, rel string) (int, error) {
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err := unix.Openat2(dirfd, rel, &how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EXDEV):
			return -1, fmt.Errorf("%q: %w", rel, ErrPathEscapes)
		default:
			return -1, fmt.Errorf("%q: %w", rel, err)
		}
	}
}

// removeAt removes whatever is at base in parent so that a new entry can take its place; an
// existing directory is kept when keepDir is set (a later entry for a directory only updates
// its metadata).
func removeAt(parent int, base string, keepDir bool) error {
	var st unix.Stat_t
	if err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.Unlinkat(parent, base, 0)
	}
	if keepDir {
		return nil
	}
	// The parent descriptor was resolved beneath the root and base is no symlink, so removing
	// through /proc/self/fd stays inside the layer.
	return os.RemoveAll(fmt.Sprintf("/proc/self/fd/%d/%s", parent, base))
}
