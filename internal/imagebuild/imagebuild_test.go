package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"image/jpeg"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// testSource returns a Source whose tranche binary is a copy of the static busybox
// (the tests look at where it goes, not at what it runs; building tranche would take
// a minute), in a directory of the test's own.
func testSource(t testing.TB) Source {
	t.Helper()
	dir := t.TempDir()
	self := filepath.Join(dir, "tranche")
	copyFile(t, "/bin/busybox", self)
	return Source{SelfExe: self, Busybox: "/bin/busybox"}
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

func entry(t testing.TB, name string) Entry {
	t.Helper()
	for _, e := range Catalog() {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no catalog entry named %s", name)
	return Entry{}
}

func build(t testing.TB, name string, src Source) v1.Image {
	t.Helper()
	img, err := Build(context.Background(), entry(t, name), src)
	if err != nil {
		t.Fatalf("Build(%s): %v", name, err)
	}
	return img
}

func TestMatch(t *testing.T) {
	tests := []struct {
		ref  string
		want string // "" when nothing matches
	}{
		{"busybox", busyboxName},
		{"busybox:1.36", busyboxName},
		{"docker.io/library/busybox:1.37", busyboxName},
		{"docker.io/busybox", busyboxName},
		{"registry.k8s.io/e2e-test-images/busybox:1.36.1-1", e2eBusybox},
		{"registry.k8s.io/e2e-test-images/agnhost:2.53", agnhostName},
		{"registry.k8s.io/pause:3.10", pauseName},
		{"tranche", trancheName},
		{"tranche:dev", trancheName},
		{"nginx:1.27", nginxName},
		{"docker.io/library/nginx@sha256:0123", nginxName},
		{"postgres:16", postgresName},
		{"registry.k8s.io/e2e-test-images/nginx:1.27.0-2", nginxName},
		{"registry.k8s.io/e2e-test-images/nautilus:1.8", nautilusName},
		{"registry.k8s.io/e2e-test-images/kitten:1.8", kittenName},
		{"registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1", glibcDNSTestingName},
		{"registry.k8s.io/e2e-test-images/nonewprivs:1.4", nonewprivsName},
		{"myregistry/api:2.1", ""},
		{"ghcr.io/acme/busybox", ""},
		{"example.com/echo:1", ""},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			e, ok := Match(tc.ref)
			if ok != (tc.want != "") || e.Name != tc.want {
				t.Errorf("Match(%q) = %q, %v; want %q", tc.ref, e.Name, ok, tc.want)
			}
		})
	}
}

// file is what the tests check of one path of an image's flattened file system.
type file struct {
	typ      byte
	mode     int64
	uid, gid int
	link     string
}

// files flattens img with mutate.Extract, the way a runtime sees the layers stacked.
func files(t testing.TB, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("extracting: %v", err)
		}
		out["/"+path.Clean(h.Name)] = file{typ: h.Typeflag, mode: h.Mode, uid: h.Uid, gid: h.Gid, link: h.Linkname}
	}
}

func reg(mode int64) file         { return file{typ: tar.TypeReg, mode: mode} }
func dir(mode int64, id int) file { return file{typ: tar.TypeDir, mode: mode, uid: id, gid: id} }
func symlink(target string) file  { return file{typ: tar.TypeSymlink, mode: 0o777, link: target} }
func hardlink(target string) file { return file{typ: tar.TypeLink, mode: 0o755, link: target} }

// busyboxFiles are in every image built on the busybox base.
var busyboxFiles = map[string]file{
	"/bin/busybox":       reg(0o755),
	"/bin/sh":            hardlink("bin/busybox"),
	"/usr/bin/wget":      hardlink("bin/busybox"),
	"/usr/bin/nc":        hardlink("bin/busybox"),
	"/bin/tar":           hardlink("bin/busybox"),
	"/sbin/ip":           hardlink("bin/busybox"),
	"/bin/ip":            hardlink("bin/busybox"), // every applet is in /bin too, as in the e2e busybox image
	"/bin/sysctl":        hardlink("bin/busybox"),
	"/bin/wget":          hardlink("bin/busybox"),
	"/etc/passwd":        reg(0o644),
	"/etc/group":         reg(0o644),
	"/etc/hosts":         reg(0o644),
	"/etc/resolv.conf":   reg(0o644),
	"/etc/nsswitch.conf": reg(0o644),
	"/tmp":               dir(0o1777, 0),
	"/root":              dir(0o700, 0),
	"/proc":              dir(0o755, 0),
	"/dev":               dir(0o755, 0),
	"/sys":               dir(0o755, 0),
	"/home":              dir(0o755, 0),
}

func TestImages(t *testing.T) {
	src := testSource(t)
	pgBin := "/usr/lib/postgresql/15/bin"
	tests := []struct {
		name    string
		layers  int
		busybox bool
		config  v1.Config
		files   map[string]file
		users   []string // lines /etc/passwd must have
	}{
		{
			name: busyboxName, layers: 1, busybox: true,
			config: v1.Config{Cmd: []string{"sh"}, Env: []string{"PATH=" + defaultPath}},
			users:  []string{"root:x:0:0:", "daemon:x:1:1:", "nobody:x:65534:65534:"},
		},
		{
			name: e2eBusybox, layers: 2, busybox: true,
			config: v1.Config{Cmd: []string{"sh"}, Env: []string{"PATH=" + defaultPath}},
			files:  map[string]file{"/usr/bin/bash": reg(0o755), "/bin/bash": symlink("/usr/bin/bash"), "/bin/sh": symlink("/usr/bin/bash")},
		},
		{
			name: trancheName, layers: 2, busybox: true,
			config: v1.Config{Entrypoint: []string{"/tranche"}, Env: []string{"PATH=" + defaultPath}},
			files:  map[string]file{"/tranche": reg(0o755)},
		},
		{
			name: agnhostName, layers: 3, busybox: true,
			config: v1.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{"PATH=" + defaultPath}},
			files: map[string]file{
				"/tranche":        reg(0o755),
				"/agnhost":        symlink("/tranche"),
				"/agnhost-2":      symlink("/tranche"),
				"/usr/bin/nc":     symlink("/tranche"),
				"/usr/bin/wget":   symlink("/tranche"),
				"/usr/bin/dig":    symlink("/tranche"),
				"/usr/bin/getent": symlink("/tranche"),
				"/localhost.crt":  reg(0o644),
				"/localhost.key":  reg(0o644),
				"/usr/bin/bash":   reg(0o755),
				"/bin/bash":       symlink("/usr/bin/bash"),
				"/bin/sh":         symlink("/usr/bin/bash"),
				"/usr/bin/curl":   reg(0o755),
				"/lib64":          symlink("usr/lib64"),
				"/home/agnhost":   dir(0o755, 1000),
			},
			users: []string{"root:x:0:0:", "agnhost:x:1000:1000:"},
		},
		{
			name: nautilusName, layers: 4, busybox: true,
			config: v1.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"test-webserver"}, Env: []string{"PATH=" + defaultPath},
				ExposedPorts: map[string]struct{}{"80/tcp": {}}},
			files: map[string]file{"/tranche": reg(0o755), "/agnhost": symlink("/tranche"), "/usr/bin/wget": symlink("/tranche"), "/usr/bin/nc": symlink("/tranche"), "/bin/sh": symlink("/usr/bin/bash"), "/data.json": reg(0o644), "/nautilus.jpg": reg(0o644)},
		},
		{
			name: kittenName, layers: 4, busybox: true,
			config: v1.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"test-webserver"}, Env: []string{"PATH=" + defaultPath},
				ExposedPorts: map[string]struct{}{"80/tcp": {}}},
			files: map[string]file{"/tranche": reg(0o755), "/agnhost": symlink("/tranche"), "/usr/bin/wget": symlink("/tranche"), "/usr/bin/nc": symlink("/tranche"), "/bin/sh": symlink("/usr/bin/bash"), "/data.json": reg(0o644), "/kitten.jpg": reg(0o644),
				"/etc/os-release": symlink("../usr/lib/os-release"), "/usr/lib/os-release": reg(0o644)},
		},
		{
			name: glibcDNSTestingName, layers: 3, busybox: true,
			config: v1.Config{Cmd: []string{"sh"}, Env: []string{"PATH=" + defaultPath}},
			files: map[string]file{
				"/tranche":           reg(0o755),
				"/usr/bin/dig":       symlink("/tranche"),
				"/usr/bin/getent":    symlink("/tranche"),
				"/etc/nsswitch.conf": reg(0o644),
			},
		},
		{
			name: nonewprivsName, layers: 2, busybox: true,
			config: v1.Config{Entrypoint: []string{"/usr/local/bin/nnp"}, Env: []string{"PATH=" + defaultPath}},
			files:  map[string]file{"/usr/local/bin/nnp": reg(0o4755)},
		},
		{
			name: pauseName, layers: 2,
			config: v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535", Env: []string{"PATH=" + defaultPath}},
			files:  map[string]file{"/tranche": reg(0o755), "/pause": symlink("/tranche")},
		},
		{
			name: nginxName, layers: 2, busybox: true,
			config: v1.Config{
				Cmd: []string{"nginx", "-g", "daemon off;"}, Env: []string{"PATH=" + defaultPath},
				ExposedPorts: map[string]struct{}{"80/tcp": {}}, StopSignal: "SIGQUIT",
			},
			files: map[string]file{
				"/usr/sbin/nginx":                  reg(0o755),
				"/usr/lib64/ld-linux-x86-64.so.2":  symlink("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"),
				"/lib64":                           symlink("usr/lib64"),
				"/lib":                             symlink("usr/lib"),
				"/etc/nginx/nginx.conf":            reg(0o644),
				"/etc/nginx/mime.types":            reg(0o644),
				"/etc/nginx/conf.d/default.conf":   reg(0o644),
				"/usr/share/nginx/html/index.html": reg(0o644),
				"/usr/share/nginx/html/50x.html":   reg(0o644),
				"/var/cache/nginx":                 dir(0o755, 0),
				"/var/log/nginx":                   dir(0o755, 0),
				"/var/log/nginx/access.log":        symlink("/dev/stdout"),
			},
			users: []string{"nginx:x:101:101:"},
		},
		{
			name: postgresName, layers: 2, busybox: true,
			config: v1.Config{
				Entrypoint: []string{"docker-entrypoint.sh"}, Cmd: []string{"postgres"},
				Env:          []string{"PATH=" + defaultPath + ":" + pgBin, "PG_MAJOR=15", "PGDATA=/var/lib/postgresql/data", "LANG=C.UTF-8"},
				ExposedPorts: map[string]struct{}{"5432/tcp": {}}, StopSignal: "SIGINT",
				Volumes: map[string]struct{}{"/var/lib/postgresql/data": {}},
			},
			files: map[string]file{
				"/usr/local/bin/docker-entrypoint.sh":   reg(0o755),
				pgBin + "/postgres":                     reg(0o755),
				pgBin + "/initdb":                       reg(0o755),
				pgBin + "/psql":                         reg(0o755),
				pgBin + "/pg_ctl":                       reg(0o755),
				"/usr/lib/postgresql/15/lib/plpgsql.so": reg(0o644),
				"/usr/share/postgresql/15/postgres.bki": reg(0o644),
				"/usr/share/zoneinfo/Etc/UTC":           reg(0o644),
				"/usr/share/zoneinfo/UTC":               symlink("Etc/UTC"),
				"/usr/lib/locale/C.utf8/LC_CTYPE":       reg(0o644),
				"/var/lib/postgresql":                   dir(0o755, 999),
				"/var/lib/postgresql/data":              dir(0o1777, 999),
				"/var/run/postgresql":                   dir(0o3777, 999),
			},
			users: []string{"postgres:x:999:999:"},
		},
	}
	baseDigest, binDigest := "", ""
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := build(t, tc.name, src)
			// Manifest and config agree with each other (validate.Image reads
			// layers only as gzip, hence Fast), and each layer's bytes have its
			// digest and size, as a registry or store checks them.
			if err := validate.Image(img, validate.Fast); err != nil {
				t.Errorf("validate: %v", err)
			}
			checkLayerBytes(t, img)
			mt, err := img.MediaType()
			if err != nil || mt != types.OCIManifestSchema1 {
				t.Errorf("media type %q (%v), want %q", mt, err, types.OCIManifestSchema1)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.config, cf.Config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if cf.OS != "linux" || cf.Architecture == "" {
				t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
			}
			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(layers) != tc.layers {
				t.Fatalf("%d layers, want %d", len(layers), tc.layers)
			}
			for _, l := range layers {
				if mt, _ := l.MediaType(); mt != types.OCIUncompressedLayer {
					t.Errorf("layer media type %q", mt)
				}
			}
			// The busybox base is the first layer of every image that has it, and
			// the tranche binary's layer the one holding /tranche: each must be
			// the same layer in every image, for the store to keep it once.
			shared := func(have *string, l v1.Layer, what string) {
				d, _ := l.Digest()
				if *have == "" {
					*have = d.String()
				} else if *have != d.String() {
					t.Errorf("%s layer %s differs from another image's %s", what, d, *have)
				}
			}
			if tc.busybox {
				shared(&baseDigest, layers[0], "busybox base")
			}
			if _, ok := tc.files["/tranche"]; ok {
				shared(&binDigest, layers[map[bool]int{true: 1, false: 0}[tc.busybox]], "tranche binary")
			}

			got := files(t, img)
			want := map[string]file{}
			if tc.busybox {
				for p, f := range busyboxFiles {
					want[p] = f
				}
			}
			for p, f := range tc.files {
				want[p] = f
			}
			var bad []string
			for p, f := range want {
				if g, ok := got[p]; !ok {
					bad = append(bad, p+": missing")
				} else if diff := cmp.Diff(f, g, cmp.AllowUnexported(file{})); diff != "" {
					bad = append(bad, p+": "+diff)
				}
			}
			sort.Strings(bad)
			for _, b := range bad {
				t.Error(b)
			}
			if tc.busybox {
				for _, a := range busyboxApplets {
					if !hasApplet(got, a) {
						t.Errorf("applet %s missing", a)
					}
				}
			}
			if len(tc.users) > 0 {
				passwd := readFile(t, img, "etc/passwd")
				for _, u := range tc.users {
					if !strings.Contains("\n"+passwd, "\n"+u) {
						t.Errorf("/etc/passwd lacks %q:\n%s", u, passwd)
					}
				}
			}
		})
	}
}

func hasApplet(files map[string]file, name string) bool {
	for _, d := range []string{"/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/"} {
		if _, ok := files[d+name]; ok {
			return true
		}
	}
	return false
}

// readFile returns the content of name (relative) in the flattened image.
func readFile(t testing.TB, img v1.Image, name string) string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not found: %v", name, err)
		}
		if path.Clean(h.Name) == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
}

// TestUpdateDemoData checks what the Update Demo specs read through the pod proxy:
// /data.json names the image's own picture, which is a JPEG.
func TestUpdateDemoData(t *testing.T) {
	src := testSource(t)
	for name, picture := range map[string]string{nautilusName: "nautilus.jpg", kittenName: "kitten.jpg"} {
		t.Run(name, func(t *testing.T) {
			img := build(t, name, src)
			var data struct{ Image string }
			if err := json.Unmarshal([]byte(readFile(t, img, "data.json")), &data); err != nil {
				t.Fatalf("data.json: %v", err)
			}
			if data.Image != picture {
				t.Errorf("data.json names %q, want %q", data.Image, picture)
			}
			if _, err := jpeg.Decode(strings.NewReader(readFile(t, img, picture))); err != nil {
				t.Errorf("%s is not a JPEG: %v", picture, err)
			}
		})
	}
}

// TestKittenImageVolumeFiles checks what the ImageVolume conformance spec reads from
// the kitten image mounted as a volume: data.json naming kitten.jpg and an
// etc/os-release (a link to usr/lib/os-release, as Alpine has it) saying Alpine Linux,
// with upstream's content.
func TestKittenImageVolumeFiles(t *testing.T) {
	img := build(t, kittenName, testSource(t))
	if got := readFile(t, img, "data.json"); got != "{\n  \"image\": \"kitten.jpg\"\n}\n" {
		t.Errorf("data.json %q, want upstream's", got)
	}
	if got := readFile(t, img, "usr/lib/os-release"); !strings.HasPrefix(got, "NAME=\"Alpine Linux\"\n") {
		t.Errorf("usr/lib/os-release %q, want Alpine's", got)
	}
}

func TestNginxConfig(t *testing.T) {
	img := build(t, nginxName, testSource(t))
	conf := readFile(t, img, "etc/nginx/nginx.conf")
	for _, want := range []string{"worker_processes auto;", "error_log /dev/stderr", "pid /var/run/nginx.pid;", "include /etc/nginx/conf.d/*.conf;", "access_log /dev/stdout", "user nginx;"} {
		if !strings.Contains(conf, want) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
	def := readFile(t, img, "etc/nginx/conf.d/default.conf")
	for _, want := range []string{"listen 80;", "root /usr/share/nginx/html;", "index index.html"} {
		if !strings.Contains(def, want) {
			t.Errorf("default.conf lacks %q", want)
		}
	}
	if page := readFile(t, img, "usr/share/nginx/html/index.html"); !strings.Contains(page, "<title>Welcome to nginx!</title>") {
		t.Errorf("index.html has not the official title:\n%s", page)
	}
}

func TestDeterminism(t *testing.T) {
	src := testSource(t)
	ctx := context.Background()
	for _, e := range Catalog() {
		t.Run(e.Name, func(t *testing.T) {
			k1, err := Key(ctx, e, src)
			if err != nil {
				t.Fatal(err)
			}
			d1, err := build(t, e.Name, src).Digest()
			if err != nil {
				t.Fatal(err)
			}
			d2, err := build(t, e.Name, src).Digest()
			if err != nil {
				t.Fatal(err)
			}
			k2, err := Key(ctx, e, src)
			if err != nil {
				t.Fatal(err)
			}
			if d1 != d2 {
				t.Errorf("two builds gave %s and %s", d1, d2)
			}
			if k1 != k2 {
				t.Errorf("Key changed from %s to %s with nothing changed", k1, k2)
			}
		})
	}
}

// TestKeyChanges changes a source file's time, then its content, and expects a new
// Key each time and a new digest for the content.
func TestKeyChanges(t *testing.T) {
	ctx := context.Background()
	src := testSource(t)
	src.Busybox = filepath.Join(t.TempDir(), "busybox")
	copyFile(t, "/bin/busybox", src.Busybox)
	for _, name := range []string{busyboxName, pauseName} {
		t.Run(name, func(t *testing.T) {
			e := entry(t, name)
			changed := src.Busybox
			if name == pauseName {
				changed = src.SelfExe
			}
			k1, err := Key(ctx, e, src)
			if err != nil {
				t.Fatal(err)
			}
			d1, _ := build(t, name, src).Digest()
			later := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
			if err := os.Chtimes(changed, later, later); err != nil {
				t.Fatal(err)
			}
			k2, err := Key(ctx, e, src)
			if err != nil {
				t.Fatal(err)
			}
			if k2 == k1 {
				t.Errorf("Key did not change when %s's mtime did", changed)
			}
			f, err := os.OpenFile(changed, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Write([]byte{0})
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			k3, err := Key(ctx, e, src)
			if err != nil {
				t.Fatal(err)
			}
			d3, _ := build(t, name, src).Digest()
			if k3 == k2 || d3 == d1 {
				t.Errorf("Key %s -> %s, digest %s -> %s when %s's content changed: want both to change", k2, k3, d1, d3, changed)
			}
		})
	}
}

// TestLayerChangedUnderneath checks that a layer whose file changes after the build
// fails to read rather than giving content that does not match its digest.
func TestLayerChangedUnderneath(t *testing.T) {
	src := testSource(t)
	img := build(t, pauseName, src)
	data, err := os.ReadFile(src.SelfExe)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(src.SelfExe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err == nil || !strings.Contains(err.Error(), "changed since the image was built") {
		t.Errorf("reading a changed layer: %v, want an error saying it changed", err)
	}
}

func TestSourceChecks(t *testing.T) {
	ctx := context.Background()
	dynamic := "/usr/bin/bash" // any dynamically linked program
	tests := []struct {
		name string
		src  Source
		want string
	}{
		{busyboxName, Source{Busybox: dynamic}, "install Debian's busybox-static"},
		{busyboxName, Source{Busybox: "/nonexistent/busybox"}, "install Debian's busybox-static"},
		{pauseName, Source{SelfExe: dynamic}, "CGO_ENABLED=0"},
		{trancheName, Source{}, "Source.SelfExe"},
	}
	for _, tc := range tests {
		t.Run(tc.name+" "+tc.want, func(t *testing.T) {
			if _, err := Build(ctx, entry(t, tc.name), tc.src); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build: %v, want an error containing %q", err, tc.want)
			}
			if _, err := Key(ctx, entry(t, tc.name), tc.src); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Key: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := Build(ctx, Entry{Pattern: "x*", Name: "example.com/x"}, testSource(t)); err == nil {
		t.Error("Build of an entry not in the catalog succeeded")
	}
}

// TestELFClosure resolves nginx's closure and compares it with what the host's
// dynamic loader loads (ldd), by file name.
func TestELFClosure(t *testing.T) {
	got, err := elfClosure("/usr/sbin/nginx")
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != "/usr/sbin/nginx" {
		t.Errorf("closure starts with %s, want the program", got[0])
	}
	names := map[string]bool{}
	for _, p := range got {
		names[path.Base(p)] = true
	}
	for _, want := range []string{"ld-linux-x86-64.so.2", "libc.so.6", "libssl.so.3", "libcrypto.so.3", "libpcre2-8.so.0", "libz.so.1"} {
		if !names[want] {
			t.Errorf("closure %v lacks %s", got, want)
		}
	}
	if _, err := exec.LookPath("ldd"); err == nil {
		out, err := exec.Command("ldd", "/usr/sbin/nginx").Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			fields := strings.Fields(line)
			if len(fields) == 0 || strings.HasPrefix(fields[0], "linux-vdso") {
				continue
			}
			if !names[path.Base(fields[0])] {
				t.Errorf("ldd loads %s, not in the closure %v", fields[0], got)
			}
		}
		if len(names) != strings.Count(strings.TrimSpace(string(out)), "\n")+1 { // ldd's vdso line counts for nginx itself
			t.Errorf("closure has %d files, ldd lists %d lines:\n%s", len(names), strings.Count(string(out), "\n"), out)
		}
	}
	static, err := elfClosure("/bin/busybox")
	if err != nil || len(static) != 1 {
		t.Errorf("closure of a static program = %v, %v; want only itself", static, err)
	}
	if _, err := elfClosure("/etc/passwd"); err == nil {
		t.Error("closure of a non-ELF file succeeded")
	}
}

func checkLayerBytes(t *testing.T, img v1.Image) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		h, n, err := v1.SHA256(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("layer %d: %v", i, err)
		}
		digest, _ := l.Digest()
		diffID, _ := l.DiffID()
		size, _ := l.Size()
		if h != digest || h != diffID || n != size {
			t.Errorf("layer %d: content has digest %s and size %d; layer says digest %s, DiffID %s, size %d", i, h, n, digest, diffID, size)
		}
	}
}

// TestLayoutRoundTrip writes images to an OCI image layout, as a store may keep them,
// and reads them back: the shared layers are written once, and the image
// read back has the digest and files of the one built.
func TestLayoutRoundTrip(t *testing.T) {
	src := testSource(t)
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	built := map[string]v1.Image{}
	for _, name := range []string{agnhostName, pauseName, trancheName} {
		img := build(t, name, src)
		built[name] = img
		if err := p.AppendImage(img); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	blobs, err := filepath.Glob(filepath.Join(dir, "blobs", "sha256", "*"))
	if err != nil {
		t.Fatal(err)
	}
	// The busybox base and the tranche binary once each, the agnhost and pause
	// layers, and one manifest and one config per image.
	if len(blobs) != 4+3+3 {
		t.Errorf("%d blobs, want 10 (4 distinct layers, 3 manifests, 3 configs)", len(blobs))
	}
	for name, img := range built {
		d, _ := img.Digest()
		back, err := p.Image(d)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(files(t, img), files(t, back), cmp.AllowUnexported(file{})); diff != "" {
			t.Errorf("%s read back from the layout differs (-built +read):\n%s", name, diff)
		}
	}
}

func TestBuildCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Build(ctx, entry(t, pauseName), testSource(t)); !errors.Is(err, context.Canceled) {
		t.Errorf("Build with a cancelled context: %v, want context.Canceled", err)
	}
}

// TestPauseProgram checks that a Source with a pause program gives the pause image that
// program alone at /pause, with the same configuration as without it.
func TestPauseProgram(t *testing.T) {
	src := testSource(t)
	src.Pause = []byte("\x7fELF pretend pause program")
	img := build(t, pauseName, src)
	want := map[string]file{"/pause": reg(0o755)}
	if diff := cmp.Diff(want, files(t, img), cmp.AllowUnexported(file{})); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(tr)
	if err != nil || !bytes.Equal(got, src.Pause) {
		t.Errorf("/pause holds %q (%v), want the Source's program %q", got, err, src.Pause)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535", Env: []string{"PATH=" + defaultPath}}, cf.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	k1, err := Key(context.Background(), entry(t, pauseName), src)
	if err != nil {
		t.Fatal(err)
	}
	src.Pause = append(src.Pause, '!')
	k2, err := Key(context.Background(), entry(t, pauseName), src)
	if err != nil || k1 == k2 {
		t.Errorf("Key %s -> %s (%v) when the pause program changed: want a new key", k1, k2, err)
	}
}

// TestEmbeddedPause checks the program `make build` embeds, when this test binary has
// one: a static executable for this machine, small beside the tranche binary.
func TestEmbeddedPause(t *testing.T) {
	p := EmbeddedPause()
	if p == nil {
		t.Log("no pause program embedded (built without make build); the pause image carries the tranche binary")
		return
	}
	f, err := elf.NewFile(bytes.NewReader(p))
	if err != nil {
		t.Fatalf("embedded pause is not an ELF file: %v", err)
	}
	defer f.Close()
	if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]; want != 0 && f.Machine != want {
		t.Errorf("embedded pause is for %v, want %v", f.Machine, want)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("embedded pause is dynamically linked")
		}
	}
	if len(p) > 4<<20 {
		t.Errorf("embedded pause is %d bytes, want a small program (< 4 MiB)", len(p))
	}
}
