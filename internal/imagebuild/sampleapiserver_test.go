package imagebuild

import (
	"archive/tar"
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestAggregatorImages checks the two images of the Aggregator conformance spec under
// the names it uses (test/utils/image/manifest.go) and what its Deployment runs of
// them: the sample-apiserver image's entrypoint and the etcd image's
// /usr/local/bin/etcd, which must reach an executable with its libraries.
func TestAggregatorImages(t *testing.T) {
	for ref, want := range map[string]string{
		"registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2": sampleAPIServerName,
		"registry.k8s.io/e2e-test-images/sample-apiserver:1.17.5": sampleAPIServerName,
		"registry.k8s.io/etcd:3.7.0-0":                            etcdName,
		"registry.k8s.io/etcd:3.5.21-0":                           etcdName,
	} {
		if e, ok := Match(ref); !ok || e.Name != want {
			t.Errorf("Match(%q) = %q, %v; want %q", ref, e.Name, ok, want)
		}
	}

	src := testSource(t)
	tests := []struct {
		name   string
		config v1.Config
		files  map[string]file
	}{
		{
			name:   sampleAPIServerName,
			config: v1.Config{Entrypoint: []string{"/sample-apiserver"}, Env: []string{"PATH=" + defaultPath}},
			files:  map[string]file{"/tranche": reg(0o755), "/sample-apiserver": symlink("/tranche"), "/bin/sh": hardlink("bin/busybox")},
		},
		{
			name: etcdName,
			config: v1.Config{Cmd: []string{"/usr/local/bin/etcd"}, Env: []string{"PATH=" + defaultPath},
				ExposedPorts: map[string]struct{}{"2379/tcp": {}, "2380/tcp": {}}},
			files: map[string]file{"/usr/bin/etcd": reg(0o755), "/usr/local/bin/etcd": symlink("/usr/bin/etcd"), "/lib64": symlink("usr/lib64")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := build(t, tc.name, src)
			checkLayerBytes(t, img)
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.config, cf.Config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			got := files(t, img)
			for p, f := range tc.files {
				if g, ok := got[p]; !ok {
					t.Errorf("%s: missing", p)
				} else if diff := cmp.Diff(f, g, cmp.AllowUnexported(file{})); diff != "" {
					t.Errorf("%s: %s", p, diff)
				}
			}
			if tc.name != etcdName {
				return
			}
			// Every library etcd loads is in the image, with the links on the way.
			closure, err := elfClosure("/usr/bin/etcd")
			if err != nil {
				t.Fatal(err)
			}
			for _, lib := range closure {
				if !resolves(got, lib) {
					t.Errorf("%s (needed by etcd) does not resolve in the image", lib)
				}
			}
		})
	}
}

// resolves reports whether p leads to a regular file of files, following symbolic
// links on the file and on the directories of its path (/lib64 -> usr/lib64).
func resolves(files map[string]file, p string) bool {
	target := func(at, link string) string {
		if path.IsAbs(link) {
			return link
		}
		return path.Join(path.Dir(at), link)
	}
hop:
	for hops := 0; hops < 40; hops++ {
		p = path.Clean(p)
		if f, ok := files[p]; ok {
			if f.typ == tar.TypeSymlink {
				p = target(p, f.link)
				continue
			}
			return f.typ == tar.TypeReg
		}
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if f, ok := files[d]; ok && f.typ == tar.TypeSymlink {
				p = target(d, f.link) + strings.TrimPrefix(p, d)
				continue hop
			}
		}
		return false
	}
	return false
}
