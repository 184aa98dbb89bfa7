package imagebuild

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// benchSource uses the tranche binary named by TRANCHE_BIN, or builds one (static,
// as make build does) when it is unset, so that the layers have their real size.
func benchSource(b *testing.B) Source {
	b.Helper()
	if self := os.Getenv("TRANCHE_BIN"); self != "" {
		return Source{SelfExe: self}
	}
	self := filepath.Join(b.TempDir(), "tranche")
	cmd := exec.Command("go", "build", "-o", self, "github.com/tranche/tranche/cmd/tranche")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building tranche (set TRANCHE_BIN to skip this): %v\n%s", err, out)
	}
	return Source{SelfExe: self}
}

// store writes every layer of img under dir as a store would (each blob once), and
// returns the bytes written.
func store(img v1.Image, dir string) (int64, error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return 0, err
		}
		p := filepath.Join(dir, d.Hex)
		if _, err := os.Stat(p); err == nil {
			continue
		}
		rc, err := l.Compressed()
		if err != nil {
			return 0, err
		}
		f, err := os.Create(p)
		if err != nil {
			rc.Close()
			return 0, err
		}
		n, err := io.Copy(f, rc)
		rc.Close()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// hostFiles lists the host files an image's plan reads.
func hostFiles(b *testing.B, e Entry, src Source) []string {
	p, err := planFor(context.Background(), e, src)
	if err != nil {
		b.Fatal(err)
	}
	seen := map[string]bool{}
	var files []string
	for _, t := range p.layers {
		for _, n := range t.nodes {
			if n.host != "" && !seen[n.host] {
				seen[n.host] = true
				files = append(files, n.host)
			}
		}
	}
	sort.Strings(files)
	return files
}

// BenchmarkBuild prints, for each catalog image, the time to build it and write its
// layers as a store would (first build of the run, and the mean), the time to compute
// its Key (what a store pays when its cached build is current), and, as the peer, the
// time to copy its source files with cp(1): the ratio build/cp is what the tar format
// and hashing cost over copying the same files. "all" builds every image into one
// blob directory, each layer written once, as the first `tranche up` does (limit:
// 5 s). Host files are in the page cache after the first iteration, for cp too.
func BenchmarkBuild(b *testing.B) {
	src := benchSource(b)
	ctx := context.Background()
	type result struct {
		files                 int
		written               int64
		first, build, key, cp time.Duration
	}
	results := map[string]result{}
	names := []string{}
	measure := func(b *testing.B, name string, entries []Entry) {
		var files []string
		for _, e := range entries {
			files = append(files, hostFiles(b, e, src)...)
		}
		var r result
		for i := 0; i < b.N; i++ {
			dir := b.TempDir()
			blobs, dest := filepath.Join(dir, "blobs"), filepath.Join(dir, "cp")
			if err := os.Mkdir(blobs, 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.Mkdir(dest, 0o755); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			r.written = 0
			for _, e := range entries {
				img, err := Build(ctx, e, src)
				if err != nil {
					b.Fatal(err)
				}
				n, err := store(img, blobs)
				if err != nil {
					b.Fatal(err)
				}
				r.written += n
			}
			d := time.Since(start)
			r.build += d
			if i == 0 {
				r.first = d
			}
			start = time.Now()
			for _, e := range entries {
				if _, err := Key(ctx, e, src); err != nil {
					b.Fatal(err)
				}
			}
			r.key += time.Since(start)
			start = time.Now()
			cmd := exec.Command("cp", append(append([]string{"-L", "--parents"}, files...), dest)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("cp: %v\n%s", err, out)
			}
			r.cp += time.Since(start)
		}
		n := time.Duration(b.N)
		r.files, r.build, r.key, r.cp = len(files), r.build/n, r.key/n, r.cp/n
		b.ReportMetric(ms(r.build), "build-ms")
		b.ReportMetric(ms(r.cp), "cp-ms")
		b.ReportMetric(float64(r.build)/float64(r.cp), "build/cp")
		if _, ok := results[name]; !ok {
			names = append(names, name)
		}
		results[name] = r
	}
	for _, e := range Catalog() {
		b.Run(e.Name, func(b *testing.B) { measure(b, e.Name, []Entry{e}) })
	}
	b.Run("all", func(b *testing.B) { measure(b, "all", Catalog()) })
	fmt.Printf("\n%-50s %6s %8s %8s %8s %7s %8s %8s\n", "image", "files", "MB", "first ms", "build ms", "key ms", "cp ms", "build/cp")
	for _, name := range names {
		r := results[name]
		fmt.Printf("%-50s %6d %8.1f %8.0f %8.0f %7.1f %8.0f %8.2f\n", name, r.files, float64(r.written)/1e6,
			ms(r.first), ms(r.build), ms(r.key), ms(r.cp), float64(r.build)/float64(r.cp))
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// BenchmarkLayerEncoding measures what the tranche binary's layer costs to produce
// uncompressed (hashing the tar stream, what Build does) against gzip at the default
// level and at BestSpeed, for the choice of layerMediaType.
func BenchmarkLayerEncoding(b *testing.B) {
	src := benchSource(b)
	t, err := binaryLayer(src)
	if err != nil {
		b.Fatal(err)
	}
	l, err := newLayer(context.Background(), t)
	if err != nil {
		b.Fatal(err)
	}
	for _, enc := range []struct {
		name  string
		level int // 0: uncompressed
	}{{"uncompressed", 0}, {"gzip-default", gzip.DefaultCompression}, {"gzip-bestspeed", gzip.BestSpeed}} {
		b.Run(enc.name, func(b *testing.B) {
			var size int64
			start := time.Now()
			for i := 0; i < b.N; i++ {
				rc, err := l.Uncompressed()
				if err != nil {
					b.Fatal(err)
				}
				cw := &countWriter{w: io.Discard}
				var w io.Writer = cw
				var zw *gzip.Writer
				if enc.level != 0 {
					zw, _ = gzip.NewWriterLevel(cw, enc.level)
					w = zw
				}
				_, err = io.Copy(w, rc)
				rc.Close()
				if err == nil && zw != nil {
					err = zw.Close()
				}
				if err != nil {
					b.Fatal(err)
				}
				size = cw.n
			}
			per := time.Since(start) / time.Duration(b.N)
			b.ReportMetric(float64(size)/1e6, "MB")
			fmt.Printf("tranche binary layer %-15s %7.1f MB in %6.0f ms (uncompressed tar: %.1f MB)\n", enc.name, float64(size)/1e6, ms(per), float64(l.size)/1e6)
		})
	}
}
