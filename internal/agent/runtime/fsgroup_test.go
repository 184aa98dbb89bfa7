package runtime

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestApplyFSGroup(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("changing a file's group to any gid needs root")
	}
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(sub, "f")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := applyFSGroup(dir, 2345, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		mode os.FileMode
	}{
		{sub, 0o770 | os.ModeSetgid | os.ModeDir},
		{file, 0o660},
	} {
		fi, err := os.Stat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if gid, _ := statGID(fi); gid != 2345 || fi.Mode() != tc.mode {
			t.Errorf("%s: gid %d mode %v, want 2345 and %v", tc.path, gid, fi.Mode(), tc.mode)
		}
	}
	// OnRootMismatch leaves a tree whose root already matches alone.
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	onRoot := v1.FSGroupChangeOnRootMismatch
	if err := os.Chmod(dir, 0o770|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if err := applyFSGroup(dir, 2345, false, &onRoot); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(file); fi.Mode() != 0o600 {
		t.Errorf("OnRootMismatch changed %s to %v", file, fi.Mode())
	}
}

// TestApplyFSGroupReadOnly checks a read-only volume (a secret's, with defaultMode 0440)
// stays unwritable to the group: kubelet or-s 0440 in, so -r--r----- stays as it is.
func TestApplyFSGroupReadOnly(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("changing a file's group to any gid needs root")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "data-1")
	if err := os.WriteFile(file, []byte("x"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o440); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := applyFSGroup(dir, 1001, true, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		mode os.FileMode
	}{
		{dir, 0o755 | os.ModeSetgid | os.ModeDir},
		{file, 0o440},
	} {
		fi, err := os.Stat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if gid, _ := statGID(fi); gid != 1001 || fi.Mode() != tc.mode {
			t.Errorf("%s: gid %d mode %v, want 1001 and %v", tc.path, gid, fi.Mode(), tc.mode)
		}
	}
	if !readOnlyVolume(&v1.Volume{VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{}}}) ||
		readOnlyVolume(&v1.Volume{VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}) {
		t.Error("readOnlyVolume: a secret is read-only, an emptyDir is not")
	}
}
