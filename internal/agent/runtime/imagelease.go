package runtime

import (
	"path/filepath"

	"github.com/tranche/tranche/internal/imagestore"
)

// leaseImage records in the host's image store that the instance with bundle dir uses img,
// before its layers are unpacked and mounted: `tranche image rm` and the image garbage
// collection of every agent sharing the store then keep the image (see imagestore.Lease).
func (m *Manager) leaseImage(ps *podState, container string, img imagestore.Image, dir string) error {
	return m.leaseImageMounted(ps, container, img, dir, "")
}

// leaseImageMounted is leaseImage for an image mounted elsewhere than dir/rootfs: an
// image volume, whose lease lives while the image is mounted on mount.
func (m *Manager) leaseImageMounted(ps *podState, container string, img imagestore.Image, dir, mount string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if mount != "" {
		if mount, err = filepath.Abs(mount); err != nil {
			return err
		}
	}
	return m.cfg.Images.Store().Acquire(imagestore.Lease{Digest: img.Digest, Pod: podID(ps.pod),
		Container: container, Node: m.cfg.NodeName, Dir: abs, Mount: mount})
}

// releaseImage drops the image lease of a bundle that was removed.
func (m *Manager) releaseImage(dir string) {
	abs, err := filepath.Abs(dir)
	if err == nil {
		err = m.cfg.Images.Store().Release(abs)
	}
	if err != nil {
		m.cfg.Logger.Warn("releasing a container's image lease", "dir", dir, "err", err)
	}
}
