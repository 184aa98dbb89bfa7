package imagestore

import (
	"archive/tar"
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BenchmarkPutAndUnpack stores and unpacks an image of one uncompressed layer holding one
// 100 MB file, and in the same run copies the same file with cp(1), so the store's cost can be
// read against the disk's: store-ns/op (Put + Lowers, including their fsync and syncfs),
// cp-ns/op, cp+sync-ns/op (cp then sync -f, the same durability as the store) and the ratios.
func BenchmarkPutAndUnpack(b *testing.B) {
	if _, err := exec.LookPath("cp"); err != nil {
		b.Skip("cp not found")
	}
	const size = 100 << 20
	data := make([]byte, size)
	rng := rand.NewChaCha8([32]byte{1})
	rng.Read(data)

	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "data", Mode: 0o644, Size: size}); err != nil {
		b.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		b.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	img := makeImage(b, []v1.Layer{static.NewLayer(buf.Bytes(), types.OCIUncompressedLayer)})
	if _, err := img.Digest(); err != nil {
		b.Fatal(err)
	}

	var store, cp, cpSync time.Duration
	n := 0
	b.SetBytes(size)
	for b.Loop() {
		b.StopTimer()
		run := filepath.Join(dir, "run")
		s, err := Open(filepath.Join(run, "images"))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()

		start := time.Now()
		stored, err := s.Put(context.Background(), img, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Lowers(context.Background(), stored); err != nil {
			b.Fatal(err)
		}
		store += time.Since(start)

		b.StopTimer()
		dst := filepath.Join(run, "copy")
		start = time.Now()
		if out, err := exec.Command("cp", src, dst).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v: %s", err, out)
		}
		cp += time.Since(start)
		if out, err := exec.Command("sync", "-f", dst).CombinedOutput(); err != nil {
			b.Fatalf("sync: %v: %s", err, out)
		}
		cpSync += time.Since(start)
		if err := os.RemoveAll(run); err != nil {
			b.Fatal(err)
		}
		n++
		b.StartTimer()
	}
	b.ReportMetric(float64(store.Nanoseconds())/float64(n), "store-ns/op")
	b.ReportMetric(float64(cp.Nanoseconds())/float64(n), "cp-ns/op")
	b.ReportMetric(float64(cpSync.Nanoseconds())/float64(n), "cp+sync-ns/op")
	b.ReportMetric(float64(store)/float64(cp), "store/cp")
	b.ReportMetric(float64(store)/float64(cpSync), "store/cp+sync")
}
