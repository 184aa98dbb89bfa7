package imagestore

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// MountRootfs mounts an overlay of lowers (uppermost first, as Lowers returns them) with the
// upper and work directories, creating upper, work and target. The mount is always writable:
// a container's readOnlyRootFilesystem is the OCI runtime's business (it remounts the root read
// only), and overlayfs needs an upper directory for that to be possible at all. One lower
// directory is as valid as many. All mount options must fit in one page (the kernel's limit
// for mount(2) data); paths from Lowers are short for that reason, and a longer option string
// is refused with an error saying so rather than the kernel's bare EINVAL.
func MountRootfs(lowers []string, upper, work, target string) error {
	if len(lowers) == 0 {
		return fmt.Errorf("mount rootfs %s: no lower directories", target)
	}
	for _, p := range append([]string{upper, work, target}, lowers...) {
		if p == "" || strings.ContainsAny(p, ":,\\") {
			return fmt.Errorf("mount rootfs %s: path %q is empty or holds ':', ',' or '\\', which overlay mount options cannot carry", target, p)
		}
	}
	for _, d := range []string{upper, work, target} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("mount rootfs %s: %w", target, err)
		}
	}
	data := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=" + upper + ",workdir=" + work
	if limit := os.Getpagesize() - 1; len(data) > limit {
		return fmt.Errorf("mount rootfs %s: overlay options for %d lower directories are %d bytes, over the kernel's limit of %d; use a store directory with a shorter path or an image with fewer layers",
			target, len(lowers), len(data), limit)
	}
	if err := unix.Mount("overlay", target, "overlay", 0, data); err != nil {
		return fmt.Errorf("mount rootfs %s (overlay %s): %w", target, data, err)
	}
	return nil
}

// UnmountRootfs unmounts target, detaching it lazily if it is busy, then removes upper, work and
// target. A target that is not mounted (or no longer exists) is not an error, so a caller may
// retry after a crash. target itself is removed only once empty, never recursively, so a mount
// that is still there is never emptied through.
func UnmountRootfs(upper, work, target string) error {
	if err := unmount(target); err != nil {
		return fmt.Errorf("unmount rootfs %s: %w", target, err)
	}
	var errs []error
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, d := range []string{upper, work} {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("unmount rootfs %s: %w", target, err)
	}
	return nil
}

func unmount(target string) error {
	for {
		err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW)
		switch {
		case err == nil:
			// Another mount may have been stacked on the same target; take it off too.
			continue
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EBUSY):
			return unix.Unmount(target, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil
		default:
			return err
		}
	}
}
