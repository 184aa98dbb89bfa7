package imagestore

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BenchmarkLoadDockerSave loads a docker-save tarball of 5 uncompressed layers of 8 MB of
// random data each (Load: read, gzip for the store, unpack and check every layer, fsync), and
// in the same run does what a plain import would with tar(1): extract the tarball, extract
// each layer into one directory, sync -f. It reports both and their ratio (load/tar).
func BenchmarkLoadDockerSave(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("unpacking needs root")
	}
	if _, err := exec.LookPath("tar"); err != nil {
		b.Skip("tar not found")
	}
	const layers, size = 5, 8 << 20
	rng := rand.NewChaCha8([32]byte{2})
	var ls []v1.Layer
	for i := range layers {
		data := make([]byte, size)
		rng.Read(data)
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("data%d", i), Mode: 0o644, Size: size}); err != nil {
			b.Fatal(err)
		}
		tw.Write(data)
		tw.Close()
		ls = append(ls, static.NewLayer(buf.Bytes(), types.DockerUncompressedLayer))
	}
	img := makeImage(b, ls)
	dir := b.TempDir()
	file := filepath.Join(dir, "image.tar")
	tag, _ := name.NewTag("bench:1")
	if err := tarball.WriteToFile(file, tag, img); err != nil {
		b.Fatal(err)
	}
	opener := func() (io.ReadCloser, error) { return os.Open(file) }
	var load, plain time.Duration
	n := 0
	b.SetBytes(layers * size)
	for b.Loop() {
		b.StopTimer()
		run := filepath.Join(dir, "run")
		s, err := Open(filepath.Join(run, "images"))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if _, err := s.Load(context.Background(), file, ""); err != nil {
			b.Fatal(err)
		}
		load += time.Since(start)
		b.StopTimer()

		x, root := filepath.Join(run, "x"), filepath.Join(run, "rootfs")
		os.MkdirAll(x, 0o755)
		os.MkdirAll(root, 0o755)
		start = time.Now()
		if out, err := exec.Command("tar", "-xf", file, "-C", x).CombinedOutput(); err != nil {
			b.Fatalf("tar: %v: %s", err, out)
		}
		manifest, err := tarball.LoadManifest(opener)
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range manifest[0].Layers {
			if out, err := exec.Command("tar", "-xf", filepath.Join(x, l), "-C", root).CombinedOutput(); err != nil {
				b.Fatalf("tar: %v: %s", err, out)
			}
		}
		if out, err := exec.Command("sync", "-f", root).CombinedOutput(); err != nil {
			b.Fatalf("sync: %v: %s", err, out)
		}
		plain += time.Since(start)
		if err := os.RemoveAll(run); err != nil {
			b.Fatal(err)
		}
		n++
		b.StartTimer()
	}
	b.ReportMetric(float64(load.Nanoseconds())/float64(n), "load-ns/op")
	b.ReportMetric(float64(plain.Nanoseconds())/float64(n), "tar-ns/op")
	b.ReportMetric(float64(load)/float64(plain), "load/tar")
}
