package volumes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// pluginImage is the directory of image volumes below a pod's volumes, after
// kubelet's kubernetes.io/image plugin.
const pluginImage = "kubernetes.io~image"

// Image volumes (volumes[].image, KEP 4639). As in kubelet, whose image volume plugin
// mounts nothing, the volume manager only makes the volume's directory: the image is
// obtained when a container that mounts it starts, like the container's own image, so
// that a failed pull is the container's ErrImagePull / ImagePullBackOff and not a
// FailedMount. The runtime then mounts the image's root file system on that directory
// once per pod (MountImage), read-only, and binds it (or a subPath of it) into each
// container read-only and noexec. The pod keeps the image it first resolved until it
// is deleted, as the API documents; Cleanup unmounts it.

// setUpImage makes an image volume's directory, the mount point of its image.
func (m *Manager) setUpImage(pod *v1.Pod, vol *v1.Volume) (string, error) {
	dir := m.volumeDir(pod.UID, pluginImage, vol.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the mount point of image volume %s: %w", dir, err)
	}
	return dir, nil
}

// unmountImages unmounts the image of every image volume of the pod whose volumes are
// below podVolumes, so that their directories can be removed.
func (m *Manager) unmountImages(podVolumes string) error {
	dir := filepath.Join(podVolumes, pluginImage)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return fmt.Errorf("listing image volumes in %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, m.mounter.Unmount(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

// MountImage mounts an image's root file system read-only on target: an overlay of
// lowers (the image's layer directories, top first) without an upper layer, mounted
// nosuid, nodev and noexec. overlayfs needs two lower directories when it has no upper
// one, so a one-layer image gets an empty directory beside target as the second. A
// target that already holds an image mount is left as it is (the pod keeps the image
// it resolved first) and is no error.
func MountImage(lowers []string, target string) error {
	if len(lowers) == 0 {
		return fmt.Errorf("mounting image on %s: the image has no layers", target)
	}
	mounted, err := IsImageMounted(target)
	if err != nil || mounted {
		return err
	}
	if len(lowers) == 1 {
		empty := target + ".empty"
		if err := os.MkdirAll(empty, 0o755); err != nil {
			return fmt.Errorf("mounting image on %s: %w", target, err)
		}
		lowers = append(lowers, empty)
	}
	for _, p := range lowers {
		if p == "" || strings.ContainsAny(p, ":,\\") {
			return fmt.Errorf("mounting image on %s: path %q is empty or holds ':', ',' or '\\', which overlay mount options cannot carry", target, p)
		}
	}
	data := "lowerdir=" + strings.Join(lowers, ":")
	if limit := os.Getpagesize() - 1; len(data) > limit {
		return fmt.Errorf("mounting image on %s: overlay options for %d layers are %d bytes, over mount(2)'s limit of %d; use a data directory with a shorter path or an image with fewer layers",
			target, len(lowers), len(data), limit)
	}
	flags := uintptr(unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := unix.Mount("overlay", target, "overlay", flags, data); err != nil {
		return fmt.Errorf("mounting image on %s (overlay %s): %w", target, data, err)
	}
	return nil
}

// IsImageMounted reports whether target is the root of an overlay mount, which is
// what MountImage makes there.
func IsImageMounted(target string) (bool, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(target, &fs); err != nil {
		return false, fmt.Errorf("statfs %s: %w", target, err)
	}
	if fs.Type != unix.OVERLAYFS_SUPER_MAGIC {
		return false, nil
	}
	var st, parent unix.Stat_t
	if err := unix.Stat(target, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", target, err)
	}
	if err := unix.Stat(filepath.Dir(target), &parent); err != nil {
		return false, fmt.Errorf("stat %s: %w", filepath.Dir(target), err)
	}
	return st.Dev != parent.Dev, nil
}
