package runtime

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Image volumes (volumes[].image): kubelet obtains every image volume of the pod
// before it starts a container, through the same image manager as containers' images,
// and a container that mounts a volume whose image could not be had fails to start
// with that pull's reason (ErrImagePull, then ImagePullBackOff, or InvalidImageName),
// while containers that do not mount it start. The volume manager has made the
// volume's directory (internal/agent/volumes); here the image is mounted on it,
// read-only, once per pod, and each container binds it, or a subPath of it, read-only
// and noexec (the CRI's image mount).

// imageVolumeErrPrefix starts the message of a container that cannot mount an image
// volume, as the CRI's ErrImageVolumeMountFailed does (kubelet counts these).
const imageVolumeErrPrefix = "ImageVolumeMountFailed"

// ensureImageVolumes obtains the image of every image volume spec mounts and mounts it
// on the volume's directory. On failure c is left waiting with kubelet's reason and
// ensureImageVolumes reports false: the container must not start. ps.mu is held.
func (m *Manager) ensureImageVolumes(ctx context.Context, ps *podState, c *container, spec *v1.Container) bool {
	done := map[string]bool{}
	for _, vm := range spec.VolumeMounts {
		vol := podVolume(ps.pod, vm.Name)
		if vol == nil || vol.Image == nil || done[vm.Name] {
			continue
		}
		done[vm.Name] = true
		// The volume's image is pulled as a container's: its reference and pull
		// policy, the pod's pull secrets, kubelet's reasons and events.
		as := *spec
		as.Image, as.ImagePullPolicy = vol.Image.Reference, vol.Image.PullPolicy
		img, ok := m.ensureImage(ctx, ps, c, &as)
		if !ok {
			return false
		}
		// Leased before its layers are unpacked and mounted, as a container's image,
		// so that neither image rm nor the image GC takes it; live while mounted.
		dir := ps.volumes[vm.Name]
		err := m.leaseImageMounted(ps, spec.Name, img, dir, dir)
		var lowers []string
		if err == nil {
			lowers, err = m.cfg.Images.Store().Lowers(ctx, img)
		}
		if err == nil {
			err = m.run.MountImage(lowers, dir)
		}
		if err != nil {
			m.cfg.Logger.Warn("mounting an image volume", "pod", podID(ps.pod), "volume", vm.Name, "image", vol.Image.Reference, "err", err)
			m.waitWith(ps, c, "CreateContainerError", fmt.Sprintf("%s: mounting image %q of volume %q: %v", imageVolumeErrPrefix, vol.Image.Reference, vm.Name, err))
			return false
		}
	}
	return true
}

// imageVolumeSource resolves vm when it mounts an image volume (ok), whose image
// ensureImageVolumes mounted on volume: the image's root or its subPath, which must
// exist in the image (symbolic links in it are followed inside the image, as in the
// container), bound read-only and noexec whatever the mount's readOnly says. env
// expands a subPathExpr.
func imageVolumeSource(pod *v1.Pod, vm v1.VolumeMount, volume string, env []string) (src volumeSource, ok bool, err error) {
	vol := podVolume(pod, vm.Name)
	if vol == nil || vol.Image == nil {
		return volumeSource{}, false, nil
	}
	sub, err := subPath(vm, env)
	if err != nil {
		return volumeSource{}, true, err
	}
	p, err := resolveInRoot(volume, sub)
	if err != nil {
		return volumeSource{}, true, fmt.Errorf("%s: subPath %q of volume %q: %v", imageVolumeErrPrefix, sub, vm.Name, err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return volumeSource{}, true, fmt.Errorf("%s: subPath %q of volume %q does not exist in image %q", imageVolumeErrPrefix, sub, vm.Name, vol.Image.Reference)
	}
	vm.ReadOnly = true
	return volumeSource{mount: vm, source: p, dir: fi.IsDir(), noExec: true}, true, nil
}

// maxLinks bounds the symbolic links resolveInRoot follows, as Linux's MAXSYMLINKS
// bounds a lookup's.
const maxLinks = 40

// resolveInRoot is root/sub with every symbolic link of sub followed as the container
// would see it with root as its /: an absolute target starts again at root and ".."
// stops at root, so the result never leaves root. The last element need not exist.
func resolveInRoot(root, sub string) (string, error) {
	todo := strings.Split(filepath.ToSlash(sub), "/")
	done := "/"
	links := 0
	for len(todo) > 0 {
		part := todo[0]
		todo = todo[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, part)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("too many levels of symbolic links")
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			done = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return filepath.Join(root, done), nil
}

// podVolume is the pod's volume called name, nil if there is none.
func podVolume(pod *v1.Pod, name string) *v1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}
