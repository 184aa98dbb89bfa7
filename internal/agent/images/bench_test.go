package images

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/v1/random"
	corev1 "k8s.io/api/core/v1"

	"github.com/tranche/tranche/internal/imagebuild"
	"github.com/tranche/tranche/internal/imagestore"
)

// BenchmarkPullAndUnpack pulls an image of 5 layers of 20 MB (gzip, incompressible
// content) from go-containerregistry's in-process registry over loopback into a fresh
// store (fetch, digest checks, unpack with diffID checks, fsync and syncfs), and in the
// same run does what `crane pull` + `tar -x` does with the same image: crane.Pull, each
// layer's uncompressed stream into tar(1). Figures: tranche-ns/op, crane+tar-ns/op,
// crane+tar+sync-ns/op (the same durability as the store), their ratios, and the bytes
// a second pull of the present image fetched (second-pull-bytes, 0 expected).
func BenchmarkPullAndUnpack(b *testing.B) {
	if _, err := exec.LookPath("tar"); err != nil {
		b.Skip("tar not found")
	}
	const layers, layerSize = 5, 20 << 20
	tr := newTestRegistry(b)
	img, err := random.Image(layerSize, layers)
	if err != nil {
		b.Fatal(err)
	}
	tr.push(b, "bench/big:1", img)
	ref := tr.host + "/bench/big:1"
	dir := b.TempDir()

	var ours, peer, peerSync time.Duration
	var second int64
	n := 0
	b.SetBytes(layers * layerSize)
	for b.Loop() {
		b.StopTimer()
		run := filepath.Join(dir, "run")
		store, err := imagestore.Open(filepath.Join(run, "images"))
		if err != nil {
			b.Fatal(err)
		}
		s := New(store, imagebuild.Source{})
		b.StartTimer()

		start := time.Now()
		if _, err := s.EnsurePulled(context.Background(), PullRequest{Image: ref, Policy: corev1.PullIfNotPresent}); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(start)

		b.StopTimer()
		before := s.Fetched()
		if _, err := s.EnsurePulled(context.Background(), PullRequest{Image: ref, Policy: corev1.PullIfNotPresent}); err != nil {
			b.Fatal(err)
		}
		second += s.Fetched() - before

		out := filepath.Join(run, "crane")
		if err := os.MkdirAll(out, 0o755); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		craneExtract(b, ref, out)
		peer += time.Since(start)
		if o, err := exec.Command("sync", "-f", out).CombinedOutput(); err != nil {
			b.Fatalf("sync: %v: %s", err, o)
		}
		peerSync += time.Since(start)
		if err := os.RemoveAll(run); err != nil {
			b.Fatal(err)
		}
		n++
		b.StartTimer()
	}
	b.ReportMetric(float64(ours.Nanoseconds())/float64(n), "tranche-ns/op")
	b.ReportMetric(float64(peer.Nanoseconds())/float64(n), "crane+tar-ns/op")
	b.ReportMetric(float64(peerSync.Nanoseconds())/float64(n), "crane+tar+sync-ns/op")
	b.ReportMetric(float64(ours)/float64(peer), "tranche/crane+tar")
	b.ReportMetric(float64(ours)/float64(peerSync), "tranche/crane+tar+sync")
	b.ReportMetric(float64(second)/float64(n), "second-pull-bytes")
}

// craneExtract pulls ref with crane and pipes each layer's tar into `tar -x -C dir`.
func craneExtract(b *testing.B, ref, dir string) {
	img, err := crane.Pull(ref)
	if err != nil {
		b.Fatal(err)
	}
	ls, err := img.Layers()
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range ls {
		rc, err := l.Uncompressed()
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command("tar", "-x", "-C", dir)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		_, cerr := io.Copy(stdin, rc)
		stdin.Close()
		rc.Close()
		if err := cmd.Wait(); err != nil || cerr != nil {
			b.Fatalf("tar -x: %v %v", err, cerr)
		}
	}
}
