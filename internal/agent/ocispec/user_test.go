package ocispec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolveUser(t *testing.T) {
	root := testRootfs(t)
	for _, tc := range []struct {
		user       string
		uid, gid   uint32
		additional []uint32
		wantErr    bool
	}{
		{user: "0", uid: 0, gid: 0, additional: []uint32{10, 29}},
		{user: "root", uid: 0, gid: 0, additional: []uint32{10, 29}},
		{user: "app", uid: 1000, gid: 1000, additional: []uint32{29, 50}},
		{user: "1000", uid: 1000, gid: 1000, additional: []uint32{29, 50}},
		{user: "4242", uid: 4242, gid: 0},
		{user: "1000:50", uid: 1000, gid: 50, additional: []uint32{29, 50}},
		{user: "app:staff", uid: 1000, gid: 50, additional: []uint32{29, 50}},
		{user: "4242:nogroup", uid: 4242, gid: 65534},
		{user: "nobody", uid: 65534, gid: 65534},
		{user: "ghost", wantErr: true},
		{user: "app:ghosts", wantErr: true},
		{user: "2147483648", wantErr: true},
		{user: "1:2:3", wantErr: true},
		{user: "", wantErr: true},
	} {
		t.Run(tc.user, func(t *testing.T) {
			uid, gid, additional, err := ResolveUser(root, tc.user)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if uid != tc.uid || gid != tc.gid {
				t.Errorf("uid, gid = %d, %d; want %d, %d", uid, gid, tc.uid, tc.gid)
			}
			if diff := cmp.Diff(tc.additional, additional); diff != "" {
				t.Errorf("additional (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveUserWithoutFiles(t *testing.T) {
	root := t.TempDir()
	uid, gid, additional, err := ResolveUser(root, "1000")
	if err != nil || uid != 1000 || gid != 0 || additional != nil {
		t.Errorf("ResolveUser(1000) = %d, %d, %v, %v; want 1000, 0, nil, nil", uid, gid, additional, err)
	}
	if _, _, _, err := ResolveUser(root, "app"); err == nil {
		t.Error("a name without /etc/passwd resolved")
	}
}

func TestResolveUserStaysInRootfs(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	// An image's /etc/passwd pointing at the host's must not be read.
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "etc", "passwd")); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := ResolveUser(root, "root"); err == nil {
		t.Error("followed a symbolic link out of the root file system")
	}
}
