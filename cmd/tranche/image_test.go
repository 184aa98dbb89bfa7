package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/tranche/tranche/internal/imagestore"
)

func runImage(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := imageCmd()
	var out bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestImageCommands: load a docker-save tarball, list it, refuse to remove it while a
// container uses it (naming the pod), remove it once unused.
func TestImageCommands(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("unpacking layers needs root; CI runs tests as root")
	}
	data := t.TempDir()
	img, err := random.Image(2048, 2)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("example.test/tools:1")
	tarPath := filepath.Join(t.TempDir(), "tools.tar")
	if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
		t.Fatal(err)
	}
	out, err := runImage(t, "load", "--data-dir", data, tarPath)
	if err != nil || !strings.Contains(out, "Loaded image: example.test/tools:1 (sha256:") {
		t.Fatalf("load: %v\n%s", err, out)
	}
	store, err := imagestore.Open(filepath.Join(data, "images"))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := store.Get("example.test/tools:1")
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "c", "x")
	if err := store.Acquire(imagestore.Lease{Digest: stored.Digest, Pod: "default/toolbox", Container: "main", Dir: bundle}); err != nil {
		t.Fatal(err)
	}
	out, err = runImage(t, "ls", "--data-dir", data)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME DIGEST SIZE IN USE BY" {
		t.Fatalf("ls:\n%s", out)
	}
	row := strings.Fields(lines[1])
	if row[0] != "example.test/tools:1" || row[1] != "sha256:"+stored.Digest[7:19] || row[len(row)-1] != "default/toolbox" {
		t.Errorf("ls row %q", lines[1])
	}

	_, err = runImage(t, "rm", "--data-dir", data, "example.test/tools:1")
	if err == nil || !strings.Contains(err.Error(), "in use by pod(s) default/toolbox") {
		t.Fatalf("rm of an image in use: %v", err)
	}
	if err := store.Release(bundle); err != nil {
		t.Fatal(err)
	}
	out, err = runImage(t, "rm", "--data-dir", data, stored.Digest)
	if err != nil || !strings.Contains(out, "Deleted: example.test/tools:1") {
		t.Fatalf("rm: %v\n%s", err, out)
	}
	if _, err := runImage(t, "rm", "--data-dir", data, "example.test/tools:1"); err == nil {
		t.Error("rm of a removed image succeeded")
	}
	if _, err := runImage(t, "ls", "--data-dir", filepath.Join(data, "nonexistent")); err == nil || !strings.Contains(err.Error(), "no local cluster data") {
		t.Errorf("ls without a cluster: %v", err)
	}
}

// TestImageGCFlags: `tranche up` and `tranche agent` refuse thresholds kubelet refuses,
// with kubelet's message, before they start anything.
func TestImageGCFlags(t *testing.T) {
	agentArgs := []string{"--node-name", "n", "--kubeconfig", "/nonexistent", "--cluster-file", "/nonexistent", "--root-dir", "/nonexistent"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--image-gc-high-threshold", "80", "--image-gc-low-threshold", "85"},
			"invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 85 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 80"},
		{[]string{"--image-gc-high-threshold", "101"},
			"invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive"},
	} {
		if err := execute(upCmd(), tc.args...); err == nil || err.Error() != tc.want {
			t.Errorf("tranche up %v: %v, want %q", tc.args, err, tc.want)
		}
		if err := execute(agentCmd(), append(agentArgs, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("tranche agent %v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
