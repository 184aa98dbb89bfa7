package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/tranche/tranche/internal/agent/ocispec"
)

func TestSubPath(t *testing.T) {
	env := []string{"POD_NAME=web-0", "ABS=/tmp", "UP=..", "EMPTY="}
	for _, tc := range []struct {
		name    string
		mount   v1.VolumeMount
		want    string
		wantErr string
	}{
		{"none", v1.VolumeMount{}, "", ""},
		{"plain", v1.VolumeMount{SubPath: "a/b"}, "a/b", ""},
		{"expr", v1.VolumeMount{SubPathExpr: "logs/$(POD_NAME)"}, "logs/web-0", ""},
		{"escaped", v1.VolumeMount{SubPathExpr: "$$(POD_NAME)"}, "$(POD_NAME)", ""},
		{"missing", v1.VolumeMount{SubPathExpr: "$(ANNOTATION)/$(POD_NAME)/$(EMPTY)"}, "", "missing value for ANNOTATION, EMPTY"},
		{"absolute", v1.VolumeMount{SubPathExpr: "$(ABS)"}, "", "error SubPath `/tmp` must not be an absolute path"},
		{"backsteps", v1.VolumeMount{SubPathExpr: "$(UP)"}, "", "unable to provision SubPath `..`: must not contain '..'"},
		{"backsteps inside", v1.VolumeMount{SubPath: "a/../../b"}, "", "unable to provision SubPath `a/../../b`: must not contain '..'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := subPath(tc.mount, env)
			if tc.wantErr != "" {
				var ce *ocispec.ConfigError
				if !errors.As(err, &ce) || ce.Message != tc.wantErr {
					t.Fatalf("error %v, want the config error %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("subPath = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestMakeSubPath(t *testing.T) {
	vol := t.TempDir()
	if err := os.Chmod(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	got, err := makeSubPath(vol, "mypath/foo")
	if err != nil {
		t.Fatal(err)
	}
	if got != filepath.Join(vol, "mypath/foo") {
		t.Errorf("path %s", got)
	}
	for _, p := range []string{"mypath", "mypath/foo"} {
		fi, err := os.Stat(filepath.Join(vol, p))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o777 {
			t.Errorf("%s: %v %v, want a directory with the volume's mode 0777", p, fi, err)
		}
	}
	// An existing path is used as it is.
	if _, err := makeSubPath(vol, "mypath"); err != nil {
		t.Errorf("existing subPath: %v", err)
	}
	// A symbolic link out of the volume is refused.
	if err := os.Symlink(t.TempDir(), filepath.Join(vol, "out")); err != nil {
		t.Fatal(err)
	}
	if _, err := makeSubPath(vol, "out/x"); err == nil {
		t.Error("a subPath through a link out of the volume was accepted")
	}
}
