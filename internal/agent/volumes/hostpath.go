package volumes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	v1 "k8s.io/api/core/v1"
)

// checkHostPath applies a hostPath volume's type, creating the directory or
// file for the ...OrCreate types, with kubelet's rules and messages. An
// unset type checks nothing: the path is bind-mounted as it is.
func checkHostPath(p string, t *v1.HostPathType) error {
	if t == nil || *t == v1.HostPathUnset {
		return nil
	}
	info, statErr := os.Stat(p)
	exists := statErr == nil
	mode := fs.FileMode(0)
	if exists {
		mode = info.Mode()
	}
	switch *t {
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return fmt.Errorf("creating hostPath directory %s: %w", p, err)
			}
			return nil
		}
		fallthrough
	case v1.HostPathDirectory:
		if !exists || !mode.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", p)
		}
	case v1.HostPathFileOrCreate:
		if !exists {
			if !errors.Is(statErr, fs.ErrNotExist) {
				return fmt.Errorf("checking hostPath %s: %w", p, statErr)
			}
			// Like kubelet, the parent directory must already exist.
			f, err := os.OpenFile(p, os.O_CREATE, 0o644)
			if err != nil {
				return fmt.Errorf("creating hostPath file %s: %w", p, err)
			}
			return f.Close()
		}
		fallthrough
	case v1.HostPathFile:
		if !exists || !mode.IsRegular() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", p)
		}
	case v1.HostPathSocket:
		if !exists || mode&fs.ModeSocket == 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a socket file", p)
		}
	case v1.HostPathCharDev:
		if !exists || mode&fs.ModeCharDevice == 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a character device", p)
		}
	case v1.HostPathBlockDev:
		if !exists || mode&fs.ModeDevice == 0 || mode&fs.ModeCharDevice != 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a block device", p)
		}
	default:
		return fmt.Errorf("%s is an invalid volume type", *t)
	}
	return nil
}
