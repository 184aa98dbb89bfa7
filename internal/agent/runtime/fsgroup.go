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

// readOnlyVolume reports whether kubelet's plugin for this kind of volume reports it
// read-only, so that its fsGroup ownership grants the group read but not write: the
// content volumes it writes itself (configMap, secret, downwardAPI, projected).
func readOnlyVolume(v *v1.Volume) bool {
	return v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil
}

// File mode bits kubelet's volume ownership adds (pkg/volume/volume_linux.go).
const (
	fsGroupRW   = os.FileMode(0o660)
	fsGroupRO   = os.FileMode(0o440)
	fsGroupExec = os.FileMode(0o110)
)

// applyFSGroup gives dir's tree to gid as kubelet's volume ownership does: every file
// and directory group-owned by gid, its mode or-ed with 0660 (0440 for a read-only
// volume), directories also with 0110 and setgid so new files inherit the group;
// symbolic links are left alone. With the OnRootMismatch policy a root already owned by
// gid, setgid and with those bits is left as it is.
func applyFSGroup(dir string, gid int64, readOnly bool, policy *v1.PodFSGroupChangePolicy) error {
	mask := fsGroupRW
	if readOnly {
		mask = fsGroupRO
	}
	if policy != nil && *policy == v1.FSGroupChangeOnRootMismatch {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			want := mask | fsGroupExec
			if st, ok := statGID(fi); ok && st == gid && fi.Mode()&os.ModeSetgid != 0 && fi.Mode().Perm()&want == want {
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
		m := mask
		if d.IsDir() {
			m |= os.ModeSetgid | fsGroupExec
		}
		return os.Chmod(p, fi.Mode()|m)
	})
}
