package runc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/tranche/tranche/internal/netns"
)

// CreatePodNamespaces creates a pod's IPC and UTS namespaces, with hostname set in the
// UTS one, and keeps them alive without any process by bind mounts at dir/ipc and dir/uts
// (as `ip netns` does for network namespaces); dir (for instance .../<pod uid>) is
// created. A pod's containers join them through their specs' namespace paths. On error
// nothing is left behind.
func CreatePodNamespaces(dir, hostname string) (ipcPath, utsPath string, err error) {
	if len(hostname) == 0 || len(hostname) > 64 {
		return "", "", fmt.Errorf("pod namespaces in %s: hostname %q must have 1 to 64 characters", dir, hostname)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("pod namespaces: %w", err)
	}
	ipcPath, utsPath = filepath.Join(dir, "ipc"), filepath.Join(dir, "uts")
	for _, p := range []string{ipcPath, utsPath} {
		f, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
		if err != nil {
			return "", "", fmt.Errorf("pod namespaces: %w", err)
		}
		f.Close()
	}
	if err := netns.UnsharePodNamespaces(ipcPath, utsPath, hostname); err != nil {
		RemovePodNamespaces(dir)
		return "", "", fmt.Errorf("pod namespaces in %s: %w", dir, err)
	}
	return ipcPath, utsPath, nil
}

// RemovePodNamespaces unmounts the namespaces CreatePodNamespaces mounted in dir and
// removes dir. The kernel frees a namespace once no process holds it either. A missing
// dir is not an error.
func RemovePodNamespaces(dir string) error {
	for _, name := range []string{"ipc", "uts"} {
		p := filepath.Join(dir, name)
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("removing pod namespaces: unmounting %s: %w", p, err)
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing pod namespaces: %w", err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing pod namespaces: %w", err)
	}
	return nil
}
