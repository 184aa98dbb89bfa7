package runtime

import (
	"io/fs"
	"syscall"
)

// statGID is a file's group id.
func statGID(fi fs.FileInfo) (int64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int64(st.Gid), true
}
