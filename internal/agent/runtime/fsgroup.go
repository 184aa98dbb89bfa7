package runtime

import (
	"io/fs"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// ownedByFSGroup reports whether kubelet gives a volume of this kind to the pod's
// fsGroup: the volumes it makes itself (emptyDir, configMap, secret, downwardAPI,
// projected) and persistent claims; never a hostPath, which belongs to the node.
func ownedByFSGroup(v *v1.Volume) bool {
	return v.HostPath == nil
}

// applyFSGroup gives dir's tree to gid as kubelet's volume ownership does: every file
// and directory group-owned by gid and group read-write (group executable where the
// owner is), directories setgid so new files inherit the group. With the
// OnRootMismatch policy a root already owned by gid and setgid is left as it is.
func applyFSGroup(dir string, gid int64, policy *v1.PodFSGroupChangePolicy) error {
	if policy != nil && *policy == v1.FSGroupChangeOnRootMismatch {
		if fi, err := os.Stat(dir); err == nil {
			if st, ok := statGID(fi); ok && st == gid && fi.Mode()&os.ModeSetgid != 0 {
				return nil
			}
		}
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, int(gid)); err != nil {
			return err
		}
		mode := fi.Mode()
		perm := mode.Perm() | 0o060
		if mode&0o100 != 0 {
			perm |= 0o010
		}
		m := perm
		if d.IsDir() {
			m |= os.ModeSetgid
		}
		return os.Chmod(p, m|mode&os.ModeSticky)
	})
}
