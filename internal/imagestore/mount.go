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
// directory is as valid as many. mount(2) takes all options in one page; paths from Lowers are
// short so that they usually fit. When they do not, the lower directories are passed one by
// one with fsconfig's "lowerdir+" (Linux 6.8 and later); an older kernel gets an error that
// says so rather than a bare EINVAL.
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
		// mount(2) cannot take it; the new mount API adds lower directories one at a time.
		err := mountOverlayEach(lowers, upper, work, target)
		if err != nil {
			return fmt.Errorf("mount rootfs %s: overlay options for %d lower directories are %d bytes, over mount(2)'s limit of %d, and this kernel cannot add them one by one (fsconfig lowerdir+, Linux 6.8): %w; use a store directory with a shorter path or an image with fewer layers",
				target, len(lowers), len(data), limit, err)
		}
		return nil
	}
	if err := unix.Mount("overlay", target, "overlay", 0, data); err != nil {
		return fmt.Errorf("mount rootfs %s (overlay %s): %w", target, data, err)
	}
	return nil
}

// mountOverlayEach mounts the overlay through fsopen/fsconfig/fsmount, passing each lower
// directory as its own "lowerdir+" parameter, which has no one-page limit.
func mountOverlayEach(lowers []string, upper, work, target string) error {
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen: %w", err)
	}
	defer unix.Close(fsfd)
	for _, l := range lowers {
		if err := unix.FsconfigSetString(fsfd, "lowerdir+", l); err != nil {
			return fmt.Errorf("lowerdir+ %s: %w", l, err)
		}
	}
	if err := unix.FsconfigSetString(fsfd, "upperdir", upper); err != nil {
		return fmt.Errorf("upperdir: %w", err)
	}
	if err := unix.FsconfigSetString(fsfd, "workdir", work); err != nil {
		return fmt.Errorf("workdir: %w", err)
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("fsmount: %w", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
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
