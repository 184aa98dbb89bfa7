package e2e

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	crv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageCLI runs `tranche image ARGS --data-dir DATA` for c and returns its combined output.
func (c *localCluster) imageCLI(args ...string) (string, error) {
	out, err := exec.Command(trancheBin, append(append([]string{"image"}, args...), "--data-dir", c.dataDir)...).CombinedOutput()
	return string(out), err
}

// layerTar is an uncompressed layer of name -> (mode, content), where a content starting
// with "->" makes a symlink.
func layerTar(t *testing.T, files [][3]string) crv1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: f[0], Mode: 0o755, Typeflag: tar.TypeReg, Size: int64(len(f[2]))}
		if target, ok := strings.CutPrefix(f[2], "->"); ok {
			hdr = &tar.Header{Name: f[0], Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: target}
		} else if f[1] == "dir" {
			hdr = &tar.Header{Name: f[0], Mode: 0o755, Typeflag: tar.TypeDir}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			io.WriteString(tw, f[2])
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return static.NewLayer(buf.Bytes(), types.DockerUncompressedLayer)
}

// dockerSaveFile writes img as `docker save` does under ref into a temporary file.
func dockerSaveFile(t *testing.T, ref string, layers []crv1.Layer, cfg crv1.Config) string {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.Config(img, cfg); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "image.tar")
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestImageLoadAndManage: an image built by the test (busybox-static in one layer) saved as
// docker save does, loaded with `tranche image load`, runs in a pod with imagePullPolicy
// Never; `tranche image ls` shows the pod using it, `rm` refuses it while the pod lives and
// removes it afterwards; the node reports it in status.images. A tarball whose layer writes
// through "../" is refused, naming the entry.
func TestImageLoadAndManage(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("busybox-static is needed to build the test image: %v", err)
	}
	ref := fmt.Sprintf("example.test/imgcli/app:%d", time.Now().UnixNano())
	file := dockerSaveFile(t, ref, []crv1.Layer{layerTar(t, [][3]string{
		{"bin", "dir", ""}, {"bin/busybox", "", string(busybox)}, {"bin/sh", "", "->busybox"}, {"bin/sleep", "", "->busybox"},
	})}, crv1.Config{Cmd: []string{"/bin/sh", "-c", "echo loaded-image-runs; exec sleep 3600"}})

	out, err := c.imageCLI("load", file)
	if err != nil || !strings.Contains(out, "Loaded image: "+ref) {
		t.Fatalf("tranche image load: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = c.imageCLI("rm", "--force", ref) })

	pod := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: loaded
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    imagePullPolicy: Never
`, ref)
	if _, errOut, err := s.kubectl(t, pod, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitReady(t, ns, "loaded")
	eventually(t, 10*time.Second, "the loaded image's program on the container's output", func() (bool, string) {
		log := c.podLog(t, ns, "loaded", "app")
		return strings.Contains(log, "loaded-image-runs"), log
	})

	out, err = c.imageCLI("ls")
	if err != nil {
		t.Fatalf("tranche image ls: %v\n%s", err, out)
	}
	var row []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == ref {
			row = f
		}
	}
	if len(row) < 5 || !strings.HasPrefix(row[1], "sha256:") || row[len(row)-1] != ns+"/loaded" {
		t.Fatalf("tranche image ls has no row for %s used by %s/loaded:\n%s", ref, ns, out)
	}

	out, err = c.imageCLI("rm", ref)
	if err == nil || !strings.Contains(out, "in use by pod(s) "+ns+"/loaded") {
		t.Fatalf("tranche image rm of an image in use: %v\n%s", err, out)
	}

	node := s.must(t, "get", "pod", "loaded", "-n", ns, "-o", "jsonpath={.spec.nodeName}")
	eventually(t, 30*time.Second, "the loaded image in the node's status.images", func() (bool, string) {
		images, _, _ := s.kubectl(t, "", "get", "node", node, "-o", "jsonpath={.status.images}")
		return strings.Contains(images, `"`+ref+`"`), images
	})

	s.must(t, "delete", "pod", "loaded", "-n", ns, "--wait=true", "--timeout=60s")
	eventually(t, 30*time.Second, "tranche image rm once the pod is gone", func() (bool, string) {
		out, err := c.imageCLI("rm", ref)
		return err == nil && strings.Contains(out, "Deleted: "+ref), out
	})
	if out, _ := c.imageCLI("ls"); strings.Contains(out, ref) {
		t.Errorf("tranche image ls still lists %s after rm:\n%s", ref, out)
	}

	evil := dockerSaveFile(t, "example.test/imgcli/evil:1", []crv1.Layer{layerTar(t, [][3]string{{"../../escaped-by-imgcli", "", "x"}})}, crv1.Config{})
	out, err = c.imageCLI("load", evil)
	if err == nil || !strings.Contains(out, `tar entry "../../escaped-by-imgcli"`) || !strings.Contains(out, "outside") {
		t.Errorf("tranche image load of a layer escaping its root: %v\n%s", err, out)
	}
	if out, _ := c.imageCLI("ls"); strings.Contains(out, "evil") {
		t.Errorf("the refused image is listed:\n%s", out)
	}
}

// TestImageGCKeepsImagesInUse: on a cluster of its own whose image garbage collection runs
// every 2 s with a high threshold of 1% (this machine's disk is always fuller than that), a
// low one of 0% (never reached) and a minimum age of 20 s, the agent removes a loaded image no pod uses, keeps the
// one a running pod uses, and warns on the Node with kubelet's FreeDiskSpaceFailed, then
// ImageGCFailed for the repeated failure.
func TestImageGCKeepsImagesInUse(t *testing.T) {
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("busybox-static is needed to build the test images: %v", err)
	}
	c := upOwn(t, "igc", 1, "--image-gc-high-threshold", "1", "--image-gc-low-threshold", "0",
		"--minimum-image-ttl-duration", "20s", "--image-gc-period", "2s")
	s := c.srv
	ns := s.namespace(t)
	layer := layerTar(t, [][3]string{{"bin", "dir", ""}, {"bin/busybox", "", string(busybox)}, {"bin/sh", "", "->busybox"}, {"bin/sleep", "", "->busybox"}})
	load := func(n string) {
		file := dockerSaveFile(t, "example.test/imggc/"+n+":1", []crv1.Layer{layer, layerTar(t, [][3]string{{"which", "", n}})},
			crv1.Config{Cmd: []string{"/bin/sleep", "3600"}})
		if out, err := c.imageCLI("load", file); err != nil {
			t.Fatalf("tranche image load: %v\n%s", err, out)
		}
	}
	// keep is younger than --minimum-image-ttl-duration until its pod holds it.
	load("keep")
	pod := `apiVersion: v1
kind: Pod
metadata:
  name: keeper
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: example.test/imggc/keep:1
    imagePullPolicy: Never
`
	if _, errOut, err := s.kubectl(t, pod, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitReady(t, ns, "keeper")
	load("drop")
	eventually(t, 60*time.Second, "the unused image collected, the used one kept", func() (bool, string) {
		out, _ := c.imageCLI("ls")
		return !strings.Contains(out, "example.test/imggc/drop:1") && strings.Contains(out, "example.test/imggc/keep:1"), out
	})
	for _, reason := range []string{"FreeDiskSpaceFailed", "ImageGCFailed"} {
		eventually(t, 30*time.Second, "a "+reason+" warning on the Node", func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "get", "events", "-A", "--field-selector", "involvedObject.kind=Node,reason="+reason,
				"-o", "jsonpath={range .items[*]}{.type} {.message}{\"\\n\"}{end}")
			return strings.Contains(out, "Warning Insufficient free disk space on the node's image filesystem"), out
		})
	}
	if phase := s.must(t, "get", "pod", "keeper", "-n", ns, "-o", "jsonpath={.status.phase}"); phase != "Running" {
		t.Errorf("the pod using the kept image is %s", phase)
	}
}
