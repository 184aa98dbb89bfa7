package imagebuild

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// builderVersion is part of every Key: change it whenever a change to this package
// changes what an image holds, so that stores build again.
const builderVersion = "imagebuild/1"

// Host paths the nginx and postgres images take their programs from (Debian's
// packages, installed by make deps).
const (
	hostNginx         = "/usr/sbin/nginx"
	hostPostgresLib   = "/usr/lib/postgresql"
	hostPostgresShare = "/usr/share/postgresql"
	hostZoneinfo      = "/usr/share/zoneinfo"
	hostCUTF8         = "/usr/lib/locale/C.utf8"
	hostCACerts       = "/etc/ssl/certs/ca-certificates.crt"
)

// agnhostTools are the host programs the agnhost image carries, when installed, for
// the tests that exec them in agnhost pods (its busybox applets cover nc, wget,
// nslookup, ping and ip).
var agnhostTools = []string{"/usr/bin/bash", "/usr/bin/curl", "/usr/bin/socat"}

// busyboxApplets are the applets the e2e tests and kubectl use in busybox-based
// images; a busybox without one of them is refused.
var busyboxApplets = []string{"sh", "wget", "nc", "nslookup", "ping", "ps", "sleep", "cat", "touch", "id",
	"grep", "tr", "head", "tail", "dd", "tar", "hostname", "ip", "su", "mktemp", "chown"}

// Source says where the builders take their files from.
type Source struct {
	// SelfExe is the tranche binary, statically linked (CGO_ENABLED=0): the agnhost,
	// pause and tranche images carry it.
	SelfExe string
	// Busybox is a statically linked busybox, /bin/busybox when empty: every image
	// but pause has it as its base.
	Busybox string
	// Pause is the pause image's program, a small static executable (EmbeddedPause
	// gives the one `make build` puts in the tranche binary). When it is empty the
	// pause image starts SelfExe as /pause, which works but costs a container start
	// ~75 ms more CPU.
	Pause []byte
}

func (s Source) busybox() string {
	if s.Busybox == "" {
		return "/bin/busybox"
	}
	return s.Busybox
}

// plan is what an image holds: its layers, bottom first, and its configuration.
type plan struct {
	layers []*tree
	config v1.Config
}

// Key is a content key of everything the entry's build reads: the builder version,
// the image's plan (every path, mode, owner, link and written content) and each host
// file's path, size, modification time, inode and device. It reads no file's contents
// (it runs busybox --list-full and reads ELF headers), so a store can tell a cached
// build is current without building; any change to a source file gives another key.
func Key(ctx context.Context, e Entry, src Source) (string, error) {
	p, err := planFor(ctx, e, src)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", builderVersion, e.Name)
	cfg, err := json.Marshal(p.config)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", e.Name, err)
	}
	fmt.Fprintf(h, "%s\n", cfg)
	for _, t := range p.layers {
		nodes, err := t.entries()
		if err != nil {
			return "", fmt.Errorf("image %s: %w", e.Name, err)
		}
		fmt.Fprintf(h, "layer %q\n", t.name)
		for _, n := range nodes {
			data := sha256.Sum256(n.data)
			fmt.Fprintf(h, "%q %c %o %d:%d %q %x %q %d %d %d %d\n",
				n.path, n.typ, n.mode, n.uid, n.gid, n.link, data, n.host, n.size, n.mtime, n.ino, n.dev)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// Build builds the entry's image: an OCI image with uncompressed layers, the same
// digest for the same inputs.
func Build(ctx context.Context, e Entry, src Source) (v1.Image, error) {
	p, err := planFor(ctx, e, src)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	adds := make([]mutate.Addendum, 0, len(p.layers))
	for _, t := range p.layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l, err := newLayer(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", e.Name, err)
		}
		adds = append(adds, mutate.Addendum{
			Layer:     l,
			MediaType: layerMediaType,
			History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "tranche imagebuild: " + t.name},
		})
	}
	img, err = mutate.Append(img, adds...)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", e.Name, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", e.Name, err)
	}
	cf = cf.DeepCopy()
	cf.Architecture = runtime.GOARCH
	cf.OS = "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.RootFS.Type = "layers"
	cf.Config = p.config
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", e.Name, err)
	}
	return img, nil
}

// planFor chooses the builder by the entry's name.
func planFor(ctx context.Context, e Entry, src Source) (*plan, error) {
	var p *plan
	var err error
	switch e.Name {
	case busyboxName:
		p, err = busyboxPlan(ctx, src)
	case e2eBusybox:
		p, err = e2eBusyboxPlan(ctx, src)
	case trancheName:
		p, err = tranchePlan(ctx, src)
	case agnhostName:
		p, err = agnhostPlan(ctx, src)
	case pauseName:
		p, err = pausePlan(src)
	case nginxName:
		p, err = nginxPlan(ctx, src)
	case postgresName:
		p, err = postgresPlan(ctx, src)
	case nautilusName, kittenName:
		p, err = updateDemoPlan(ctx, src, e.Name)
	case glibcDNSTestingName:
		p, err = glibcDNSTestingPlan(ctx, src)
	case nonewprivsName:
		p, err = nonewprivsPlan(ctx, src)
	case sampleAPIServerName, etcdName:
		p, err = aggregatorPlan(ctx, src, e.Name)
	default:
		return nil, fmt.Errorf("image %s (pattern %q) is not one imagebuild can build: use an entry of Catalog()", e.Name, e.Pattern)
	}
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", e.Name, err)
	}
	for _, t := range p.layers {
		if t.err != nil {
			return nil, fmt.Errorf("image %s: %w", e.Name, t.err)
		}
	}
	return p, nil
}

// busyboxLayer is the base layer of every image but pause: a static busybox at
// /bin/busybox, every applet a hard link to it where busybox --list-full puts it (as
// the official image has them), and the directories and /etc files images have.
func busyboxLayer(ctx context.Context, src Source) (*tree, error) {
	bb := src.busybox()
	static, err := isStatic(bb)
	if err != nil {
		return nil, fmt.Errorf("busybox: %w (install Debian's busybox-static: make deps)", err)
	}
	if !static {
		return nil, fmt.Errorf("busybox %s is dynamically linked (it has an ELF interpreter) and cannot run in an image without its libraries: install Debian's busybox-static (make deps), which replaces it with a static one", bb)
	}
	out, err := exec.CommandContext(ctx, bb, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox: %s --list-full: %w", bb, err)
	}
	t := newTree("busybox")
	t.hostFile("bin/busybox", bb)
	have := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		p := clean(sc.Text())
		// linuxrc is the applet of an initramfs's root, no use in a container.
		if p == "" || p == "bin/busybox" || !strings.Contains(p, "/") {
			continue
		}
		t.hardlink(p, "bin/busybox")
		t.hardlink("bin/"+path.Base(p), "bin/busybox") // also in /bin, as the e2e busybox image has them (/bin/sysctl)
		have[path.Base(p)] = true
	}
	var missing []string
	for _, a := range busyboxApplets {
		if !have[a] {
			missing = append(missing, a)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("busybox %s lacks the applets %s that tests and kubectl use: install Debian's busybox-static (make deps)", bb, strings.Join(missing, ", "))
	}
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "usr/local/bin", "etc", "home", "var", "var/spool/mail", "var/www", "proc", "sys", "dev"} {
		t.dir(d, 0o755, 0, 0)
	}
	t.dir("root", 0o700, 0, 0)
	t.dir("tmp", 0o1777, 0, 0)
	passwd, group := accounts(nil, nil)
	t.file("etc/passwd", 0o644, passwd)
	t.file("etc/group", 0o644, group)
	t.file("etc/nsswitch.conf", 0o644, nsswitch)
	// Placeholders the runtime bind-mounts over, as images have them.
	for _, f := range []string{"etc/hosts", "etc/hostname", "etc/resolv.conf"} {
		t.file(f, 0o644, "")
	}
	return t, nil
}

// binaryLayer holds only the tranche binary at /tranche, so that the agnhost, pause
// and tranche images share it and a store keeps its 100 MB once.
func binaryLayer(src Source) (*tree, error) {
	if src.SelfExe == "" {
		return nil, fmt.Errorf("no tranche binary given (Source.SelfExe)")
	}
	static, err := isStatic(src.SelfExe)
	if err != nil {
		return nil, fmt.Errorf("tranche binary: %w", err)
	}
	if !static {
		return nil, fmt.Errorf("tranche binary %s is dynamically linked and cannot run in an image: build it with CGO_ENABLED=0 (make build)", src.SelfExe)
	}
	t := newTree("tranche binary")
	t.hostFile("tranche", src.SelfExe)
	return t, nil
}

func busyboxPlan(ctx context.Context, src Source) (*plan, error) {
	base, err := busyboxLayer(ctx, src)
	if err != nil {
		return nil, err
	}
	return &plan{layers: []*tree{base}, config: v1.Config{Cmd: []string{"sh"}, Env: []string{"PATH=" + defaultPath}}}, nil
}

// e2eBusyboxPlan is the e2e suite's busybox image: busybox, with the host's bash as
// sh. Upstream's image has busybox 1.37, whose sh passes on environment variables
// whose names are not shell names (data-1=value-1 from a ConfigMap's envFrom) to the
// commands it runs; Debian's busybox 1.35 sh drops them, bash keeps them. The plain
// busybox image keeps busybox's own sh. Without bash on the host it is busybox alone.
func e2eBusyboxPlan(ctx context.Context, src Source) (*plan, error) {
	p, err := busyboxPlan(ctx, src)
	if err != nil {
		return nil, err
	}
	bash, err := filepath.EvalSymlinks("/usr/bin/bash")
	if err != nil {
		return p, nil
	}
	t := newTree("e2e-busybox")
	if err := addClosure(t, bash); err != nil {
		return nil, err
	}
	t.symlink("bin/bash", bash)
	t.symlink("bin/sh", bash)
	p.layers = append(p.layers, t)
	return p, nil
}

// busyboxAndBinary are the two shared layers of the images that carry the tranche
// binary and a shell: busybox's, then the binary's.
func busyboxAndBinary(ctx context.Context, src Source) (base, bin *tree, err error) {
	if base, err = busyboxLayer(ctx, src); err != nil {
		return nil, nil, err
	}
	if bin, err = binaryLayer(src); err != nil {
		return nil, nil, err
	}
	return base, bin, nil
}

// tranchePlan is tranche's own image, which system pods run with a subcommand
// (["dns", "--flag=..."]); busybox gives kubectl exec a shell.
func tranchePlan(ctx context.Context, src Source) (*plan, error) {
	base, bin, err := busyboxAndBinary(ctx, src)
	if err != nil {
		return nil, err
	}
	return &plan{layers: []*tree{base, bin}, config: v1.Config{Entrypoint: []string{"/tranche"}, Env: []string{"PATH=" + defaultPath}}}, nil
}

// agnhostPlan is the e2e agnhost image: /agnhost is a link to the tranche binary,
// which runs the agnhost CLI when started under that name: Kubernetes' own agnhost
// subcommands, linked into the tranche binary from k8s.io/kubernetes (see
// internal/agent/images/builtin).
func agnhostPlan(ctx context.Context, src Source) (*plan, error) {
	base, bin, err := busyboxAndBinary(ctx, src)
	if err != nil {
		return nil, err
	}
	t := newTree("agnhost")
	t.symlink("agnhost", "/tranche")
	t.symlink("usr/bin/wget", "/tranche") // busybox's wget with -T, which Debian's lacks (builtin.Main)
	t.symlink("usr/bin/nc", "/tranche")   // OpenBSD's netcat client, as upstream's image has (builtin.Main)
	for _, l := range dnsToolLinks {
		t.symlink(l, "/tranche") // upstream's has bind-tools' dig and musl's getent
	}
	t.symlink("agnhost-2", "/tranche") // upstream's second name, which the Containers conformance specs run
	crt, key, err := localhostCert()
	if err != nil {
		return nil, err
	}
	t.file("localhost.crt", 0o644, crt)
	t.file("localhost.key", 0o644, key)
	passwd, group := accounts([]string{"agnhost:x:1000:1000:agnhost:/home/agnhost:/bin/sh"}, []string{"agnhost:x:1000:"})
	t.file("etc/passwd", 0o644, passwd)
	t.file("etc/group", 0o644, group)
	t.dir("home/agnhost", 0o755, 1000, 1000)
	var tools []string
	for _, tool := range agnhostTools {
		if _, err := os.Stat(tool); err != nil {
			continue
		}
		real, err := filepath.EvalSymlinks(tool)
		if err != nil {
			return nil, err
		}
		tools = append(tools, real)
	}
	if err := addClosure(t, tools...); err != nil {
		return nil, err
	}
	for _, tool := range tools {
		if path.Base(tool) == "bash" {
			// Scripts start with #!/bin/bash; /bin is busybox's directory.
			t.symlink("bin/bash", tool)
			// Debian's busybox-static sh runs its own applets before PATH (nc
			// above), so sh is bash, as upstream's image has an sh that honours PATH.
			t.symlink("bin/sh", tool)
		}
	}
	if _, err := os.Stat(hostCACerts); err == nil {
		t.hostPath(hostCACerts)
	}
	return &plan{
		layers: []*tree{base, bin, t},
		config: v1.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{"PATH=" + defaultPath}},
	}, nil
}

// pausePlan is the pause image: one layer with the small pause program (or, without
// one, the tranche binary started as /pause), run as the nobody user 65535 like
// upstream's, with no shell.
func pausePlan(src Source) (*plan, error) {
	config := v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535", Env: []string{"PATH=" + defaultPath}}
	if len(src.Pause) > 0 {
		t := newTree("pause")
		t.file("pause", 0o755, string(src.Pause))
		return &plan{layers: []*tree{t}, config: config}, nil
	}
	bin, err := binaryLayer(src)
	if err != nil {
		return nil, err
	}
	t := newTree("pause")
	t.symlink("pause", "/tranche")
	return &plan{layers: []*tree{bin, t}, config: config}, nil
}

// addClosure adds the programs and everything elfClosure finds they load.
func addClosure(t *tree, programs ...string) error {
	if len(programs) == 0 {
		return nil
	}
	files, err := elfClosure(programs...)
	if err != nil {
		return fmt.Errorf("layer %s: %w", t.name, err)
	}
	for _, f := range files {
		t.hostPath(f)
	}
	return nil
}

// nginxPlan is Debian's nginx in the official image's layout and configuration.
// Debian's nginx needs no dynamic module for this configuration (its modules are
// loaded only by load_module lines), so none is carried.
func nginxPlan(ctx context.Context, src Source) (*plan, error) {
	base, err := busyboxLayer(ctx, src)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(hostNginx); err != nil {
		return nil, fmt.Errorf("Debian's nginx is not installed (%w): install it (make deps)", err)
	}
	t := newTree("nginx")
	if err := addClosure(t, hostNginx); err != nil {
		return nil, err
	}
	t.file("etc/nginx/nginx.conf", 0o644, nginxConf)
	t.file("etc/nginx/mime.types", 0o644, nginxMimeTypes)
	t.file("etc/nginx/conf.d/default.conf", 0o644, nginxDefaultServer)
	t.file("usr/share/nginx/html/index.html", 0o644, nginxIndex)
	t.file("usr/share/nginx/html/50x.html", 0o644, nginx50x)
	passwd, group := accounts([]string{"nginx:x:101:101:nginx user:/nonexistent:/bin/false"}, []string{"nginx:x:101:"})
	t.file("etc/passwd", 0o644, passwd)
	t.file("etc/group", 0o644, group)
	t.dir("var/cache/nginx", 0o755, 0, 0)
	// Debian's nginx keeps request bodies and proxy buffers in /var/lib/nginx (its
	// compiled-in temporary paths) and creates the directories below it as root.
	t.dir("var/lib/nginx", 0o755, 0, 0)
	t.dir("var/log/nginx", 0o755, 0, 0)
	// The compiled-in access log path goes to the container's output, as in the
	// official image.
	t.symlink("var/log/nginx/access.log", "/dev/stdout")
	t.symlink("var/log/nginx/error.log", "/dev/stderr")
	t.dir("var/run", 0o755, 0, 0)
	return &plan{
		layers: []*tree{base, t},
		config: v1.Config{
			Cmd:          []string{"nginx", "-g", "daemon off;"},
			Env:          []string{"PATH=" + defaultPath},
			ExposedPorts: map[string]struct{}{"80/tcp": {}},
			StopSignal:   "SIGQUIT",
		},
	}, nil
}

// postgresMajor returns the newest PostgreSQL major version installed from Debian.
func postgresMajor() (string, error) {
	matches, _ := filepath.Glob(path.Join(hostPostgresLib, "*", "bin", "postgres"))
	best := -1
	for _, m := range matches {
		v, err := strconv.Atoi(path.Base(path.Dir(path.Dir(m))))
		if err == nil && v > best {
			best = v
		}
	}
	if best < 0 {
		return "", fmt.Errorf("Debian's postgresql is not installed (no %s/*/bin/postgres): install it (make deps)", hostPostgresLib)
	}
	return strconv.Itoa(best), nil
}

// postgresPlan is Debian's PostgreSQL in the official image's layout: the server and
// client programs, the server's modules, its share directory, the time zone data it
// was built to use (Debian links it with the system's) and the C.UTF-8 locale, run by
// an entrypoint that initialises PGDATA from POSTGRES_* variables. The JIT (llvmjit,
// which loads the 100 MB libLLVM) is left out: without it PostgreSQL runs queries
// without JIT compilation, which the official image's users rarely rely on.
func postgresPlan(ctx context.Context, src Source) (*plan, error) {
	base, err := busyboxLayer(ctx, src)
	if err != nil {
		return nil, err
	}
	major, err := postgresMajor()
	if err != nil {
		return nil, err
	}
	root := path.Join(hostPostgresLib, major)
	t := newTree("postgres")
	skip := func(p string) bool {
		b := path.Base(p)
		return strings.HasPrefix(b, "llvmjit") || p == path.Join(root, "lib", "bitcode")
	}
	t.hostTree(root, skip)
	t.hostTree(path.Join(hostPostgresShare, major), nil)
	var elves []string
	for _, n := range t.nodes {
		if n.typ == tar.TypeReg && (strings.HasPrefix(n.path, clean(root+"/bin/")) || strings.HasSuffix(n.path, ".so")) {
			elves = append(elves, n.host)
		}
	}
	sort.Strings(elves)
	if err := addClosure(t, elves...); err != nil {
		return nil, err
	}
	if _, err := os.Stat(hostZoneinfo); err == nil {
		t.hostTree(hostZoneinfo, nil)
	}
	lang := "C"
	_, err = os.Stat(hostCUTF8)
	if err == nil {
		t.hostTree(hostCUTF8, nil)
		lang = "C.UTF-8"
	}
	t.file("usr/bin/locale", 0o755, localeScript(err == nil))
	passwd, group := accounts([]string{"postgres:x:999:999::/var/lib/postgresql:/bin/sh"}, []string{"postgres:x:999:"})
	t.file("etc/passwd", 0o644, passwd)
	t.file("etc/group", 0o644, group)
	t.dir("var/lib/postgresql", 0o755, 999, 999)
	t.dir("var/lib/postgresql/data", 0o1777, 999, 999)
	t.dir("var/run/postgresql", 0o3777, 999, 999)
	t.dir("docker-entrypoint-initdb.d", 0o755, 0, 0)
	t.file("usr/local/bin/docker-entrypoint.sh", 0o755, postgresEntrypoint)
	const pgdata = "/var/lib/postgresql/data"
	return &plan{
		layers: []*tree{base, t},
		config: v1.Config{
			Entrypoint:   []string{"docker-entrypoint.sh"},
			Cmd:          []string{"postgres"},
			Env:          []string{"PATH=" + defaultPath + ":" + path.Join(root, "bin"), "PG_MAJOR=" + major, "PGDATA=" + pgdata, "LANG=" + lang},
			ExposedPorts: map[string]struct{}{"5432/tcp": {}},
			Volumes:      map[string]struct{}{pgdata: {}},
			StopSignal:   "SIGINT",
		},
	}, nil
}
