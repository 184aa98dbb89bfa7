package volumes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Mounter mounts and unmounts the tmpfs behind an emptyDir with medium Memory, as
// kubelet's emptyDir plugin does in the node's mount namespace. `tranche down` unmounts
// whatever is left below the data directory.
type Mounter interface {
	// MountTmpfs mounts a new tmpfs on dir with the given mount data ("" or "size=N").
	MountTmpfs(dir, data string) error
	// IsTmpfs reports whether dir is a tmpfs mount point.
	IsTmpfs(dir string) (bool, error)
	// Unmount detaches the mount on dir.
	Unmount(dir string) error
}

// HostMounter is the Mounter of the process's own mount namespace.
type HostMounter struct{}

var _ Mounter = HostMounter{}

// MountTmpfs implements Mounter.
func (HostMounter) MountTmpfs(dir, data string) error {
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return fmt.Errorf("mounting tmpfs on %s: %w", dir, err)
	}
	return nil
}

// IsTmpfs implements Mounter: dir is a tmpfs on a different device from its parent.
func (HostMounter) IsTmpfs(dir string) (bool, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	if fs.Type != unix.TMPFS_MAGIC {
		return false, nil
	}
	var st, parent unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", dir, err)
	}
	if err := unix.Stat(filepath.Dir(dir), &parent); err != nil {
		return false, fmt.Errorf("stat %s: %w", filepath.Dir(dir), err)
	}
	return st.Dev != parent.Dev, nil
}

// Unmount implements Mounter; a dir that is not mounted is no error.
func (HostMounter) Unmount(dir string) error {
	err := unix.Unmount(dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting %s: %w", dir, err)
	}
	return nil
}

// mountMemoryMedium makes the emptyDir directory dir a tmpfs unless it already is one,
// sized by sizeLimit as kubelet does (no limit: the kernel's default, half the RAM).
func (m *Manager) mountMemoryMedium(dir string, sizeLimit int64) error {
	mounted, err := m.mounter.IsTmpfs(dir)
	if err != nil {
		return err
	}
	if mounted {
		return nil
	}
	data := ""
	if sizeLimit > 0 {
		data = fmt.Sprintf("size=%d", sizeLimit)
	}
	if err := m.mounter.MountTmpfs(dir, data); err != nil {
		return err
	}
	// A fresh tmpfs root is 1777; kubelet's emptyDir reads as 0777 to the pod.
	return os.Chmod(dir, 0o777)
}

// unmountEmptyDirs unmounts the tmpfs of every emptyDir of the pod whose volumes are
// below podVolumes, so that their directories can be removed.
func (m *Manager) unmountEmptyDirs(podVolumes string) error {
	dir := filepath.Join(podVolumes, pluginEmptyDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return fmt.Errorf("listing emptyDirs in %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		mounted, err := m.mounter.IsTmpfs(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if mounted {
			errs = append(errs, m.mounter.Unmount(p))
		}
	}
	return errors.Join(errs...)
}
