// Package images decides what runs for a container's image. There is no registry and no
// container engine: an image catalog (catalog.yaml, embedded; another file can replace
// it) maps image patterns to runners, and Resolve turns an image and a container into a
// Plan the runtime executes, with an event message that says plainly what runs.
package images

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/tranche/tranche/internal/agent/images/builtin"
)

// Runner is how a container runs.
type Runner string

// The runners a catalog entry can name.
const (
	// RunnerBusybox runs the container's command with the host's busybox applets first
	// in PATH.
	RunnerBusybox Runner = "busybox"
	// RunnerBuiltin runs one of the tranche binary's built-in servers, or, for tranche's
	// own image, a tranche subcommand.
	RunnerBuiltin Runner = "builtin"
	// RunnerDebianProgram runs a Debian program (nginx, postgres) with a per-pod
	// configuration and data directory.
	RunnerDebianProgram Runner = "debian-program"
	// RunnerHostCommand runs the container's command from the host file system, or the
	// echo server when the container has no command.
	RunnerHostCommand Runner = "host-command"
	// RunnerEcho runs the built-in echo server on the container's declared ports.
	RunnerEcho Runner = "echo"
)

var runners = []Runner{RunnerBusybox, RunnerBuiltin, RunnerDebianProgram, RunnerHostCommand, RunnerEcho}

// ErrUnmappable is wrapped by Resolve's errors for images tranche cannot run; the agent
// reports them as ErrImagePull (then ImagePullBackOff), with the error's message.
var ErrUnmappable = errors.New("image cannot be run by tranche")

//go:embed catalog.yaml
var defaultCatalog []byte

// Entry maps an image pattern to a runner.
type Entry struct {
	// Pattern is matched against the image as written and its short form; '*'
	// matches any run of characters.
	Pattern string `json:"pattern"`
	Runner  Runner `json:"runner"`
	// Entrypoint (builtin) is the image's entrypoint binary name ("agnhost"); a
	// container command naming it is dropped, the rest being the server's arguments.
	Entrypoint string `json:"entrypoint,omitempty"`
	// DefaultArgs (builtin) are the arguments when the container gives none (the
	// image's CMD).
	DefaultArgs []string `json:"defaultArgs,omitempty"`
	// Program (debian-program) is "nginx" or "postgres"; Path is its binary (nginx) or
	// the directory of its binaries (postgres).
	Program string `json:"program,omitempty"`
	Path    string `json:"path,omitempty"`
}

// Catalog is a parsed image catalog.
type Catalog struct {
	// Busybox is the host's busybox binary.
	Busybox string  `json:"busybox"`
	Images  []Entry `json:"images"`
	// source names the file in messages.
	source string
}

// Default returns the catalog shipped in the binary.
func Default() *Catalog {
	c, err := Parse(defaultCatalog, "(built-in catalog)")
	if err != nil {
		panic(fmt.Sprintf("the embedded image catalog is invalid: %v", err))
	}
	return c
}

// Load reads the catalog at file, or returns Default when file is empty.
func Load(file string) (*Catalog, error) {
	if file == "" {
		return Default(), nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("image catalog: %w", err)
	}
	return Parse(data, file)
}

// Parse parses and checks a catalog (YAML or JSON); source names it in messages.
func Parse(data []byte, source string) (*Catalog, error) {
	var c Catalog
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("image catalog %s: %w", source, err)
	}
	c.source = source
	for i, e := range c.Images {
		where := fmt.Sprintf("image catalog %s: images[%d] (%q)", source, i, e.Pattern)
		if e.Pattern == "" {
			return nil, fmt.Errorf("%s: pattern is empty", where)
		}
		known := false
		for _, r := range runners {
			known = known || e.Runner == r
		}
		if !known {
			return nil, fmt.Errorf("%s: unknown runner %q (one of %v)", where, e.Runner, runners)
		}
		switch {
		case e.Runner == RunnerBusybox && c.Busybox == "":
			return nil, fmt.Errorf("%s: runner busybox needs the catalog's busybox path", where)
		case e.Runner == RunnerDebianProgram && e.Program != "nginx" && e.Program != "postgres":
			return nil, fmt.Errorf("%s: program %q is not one tranche can configure (nginx, postgres)", where, e.Program)
		case e.Runner == RunnerDebianProgram && e.Path == "":
			return nil, fmt.Errorf("%s: program %s needs a path", where, e.Program)
		}
	}
	return &c, nil
}

// Resolve chooses what runs for image in container c: the first catalog entry matching
// the image gives the runner, and the container's command, args and ports give the
// details. The error, wrapping ErrUnmappable, says how to make the image runnable.
func (cat *Catalog) Resolve(image string, c *v1.Container) (Plan, error) {
	if c == nil {
		c = &v1.Container{}
	}
	full, short := normalize(image)
	for _, e := range cat.Images {
		if !match(e.Pattern, image) && !match(e.Pattern, short) {
			continue
		}
		p := Plan{Image: full, Runner: e.Runner}
		var err error
		switch e.Runner {
		case RunnerBusybox:
			p = cat.busybox(p, image, c)
		case RunnerBuiltin:
			p, err = builtinPlan(p, e, image, c, cat.Busybox)
		case RunnerDebianProgram:
			p = debianPlan(p, e, image, c)
		case RunnerHostCommand:
			p = hostCommandPlan(p, image, c)
		case RunnerEcho:
			p = echoPlan(p, image, c, "is mapped to the echo server")
		}
		if err != nil {
			return Plan{}, err
		}
		p.ImageID = "tranche://" + string(p.Runner) + "/" + full
		return p, nil
	}
	return Plan{}, fmt.Errorf("%w: image %q has no entry in the image catalog %s: add an entry mapping its name to a runner (%s)",
		ErrUnmappable, image, cat.source, joinRunners())
}

func joinRunners() string {
	s := make([]string, len(runners))
	for i, r := range runners {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// busybox runs the container's command (or its args, the busybox image having no
// entrypoint, or sh, its CMD) as busybox applets.
func (cat *Catalog) busybox(p Plan, image string, c *v1.Container) Plan {
	argv := append(append([]string(nil), c.Command...), c.Args...)
	if len(c.Command) == 0 && len(c.Args) == 0 {
		argv = []string{"sh"}
	}
	// "/bin/sh" in the image is busybox's sh applet.
	argv[0] = path.Base(argv[0])
	p.Argv = append([]string{cat.Busybox}, argv...)
	p.Applets = cat.Busybox
	p.Message = fmt.Sprintf("image %q runs with the host's busybox applets (%s): %s", image, cat.Busybox, quoteArgs(argv))
	return p
}

// pauseScript is the pause process: it exits 0 on SIGTERM or SIGINT, as the pause
// container does, and otherwise waits (sleep in the background, so that the trap runs
// at once).
const pauseScript = `trap 'exit 0' TERM INT; while :; do sleep 2147483647 & wait $!; done`

// builtinPlan picks the built-in server from the container's command and args the way
// the image's own entrypoint would read them.
func builtinPlan(p Plan, e Entry, image string, c *v1.Container, busybox string) (Plan, error) {
	var args []string
	switch {
	case len(c.Command) > 0:
		if e.Entrypoint != "" && path.Base(c.Command[0]) != e.Entrypoint {
			return Plan{}, fmt.Errorf("%w: image %q: command %q is not available: tranche runs this image as its built-in %s, so the command must be %s or left out",
				ErrUnmappable, image, c.Command[0], e.Entrypoint, e.Entrypoint)
		}
		args = append(append(args, c.Command[1:]...), c.Args...)
	default:
		args = append(args, c.Args...)
	}
	if e.Entrypoint == "pause" {
		// The pause image takes no arguments.
		args = nil
	}
	if len(args) == 0 {
		args = e.DefaultArgs
	}
	if len(args) == 0 {
		return Plan{}, fmt.Errorf("%w: image %q: no built-in server named: give one of %v as the first argument", ErrUnmappable, image, builtin.Names())
	}
	p.Builtin, p.BuiltinArgs = args[0], append([]string(nil), args[1:]...)
	if p.Builtin == "pause" && len(p.BuiltinArgs) == 0 && busybox != "" {
		// A busybox shell waiting for SIGTERM or SIGINT behaves as the pause container
		// does, at a fraction of the memory and start-up CPU of the tranche binary
		// (about 1 MB and 1 ms rather than 50 MB and 20 ms), which counts for the
		// many pause pods of a density test.
		p.Builtin, p.BuiltinArgs = "", nil
		p.Argv = []string{busybox, "sh", "-c", pauseScript}
		p.Message = fmt.Sprintf("image %q runs as a pause process: the host's busybox shell (%s) waiting for SIGTERM", image, busybox)
		return p, nil
	}
	if builtin.Has(p.Builtin) {
		p.Message = fmt.Sprintf("image %q runs as tranche's built-in %s", image, quoteArgs(args))
		return p, nil
	}
	if e.Entrypoint == "tranche" {
		p.Self = true
		p.Message = fmt.Sprintf("image %q runs the tranche binary: tranche %s", image, quoteArgs(args))
		return p, nil
	}
	return Plan{}, fmt.Errorf("%w: image %q: %s subcommand %q is not built into tranche (built in: %s); use one of those or map the image to another runner in the image catalog",
		ErrUnmappable, image, entrypointName(e), p.Builtin, strings.Join(builtin.Names(), ", "))
}

func entrypointName(e Entry) string {
	if e.Entrypoint != "" {
		return e.Entrypoint
	}
	return "the image's"
}

// hostCommandPlan runs the container's command as a host program, or the echo server
// when there is none (an image's entrypoint is unknown without the image).
func hostCommandPlan(p Plan, image string, c *v1.Container) Plan {
	if len(c.Command) == 0 {
		return echoPlan(p, image, c, "is not in the image catalog and the container has no command")
	}
	p.Argv = append(append([]string(nil), c.Command...), c.Args...)
	p.Message = fmt.Sprintf("image %q is not in the image catalog: its command runs from the host file system: %s", image, quoteArgs(p.Argv))
	return p
}

// echoPlan runs the echo server on the container's TCP and UDP ports.
func echoPlan(p Plan, image string, c *v1.Container, why string) Plan {
	p.Runner = RunnerEcho
	p.Builtin = "echo"
	var ports []string
	for _, port := range c.Ports {
		switch port.Protocol {
		case v1.ProtocolTCP, "":
			p.BuiltinArgs = append(p.BuiltinArgs, fmt.Sprintf("--port=%d", port.ContainerPort))
			ports = append(ports, fmt.Sprintf("%d/TCP", port.ContainerPort))
		case v1.ProtocolUDP:
			p.BuiltinArgs = append(p.BuiltinArgs, fmt.Sprintf("--udp-port=%d", port.ContainerPort))
			ports = append(ports, fmt.Sprintf("%d/UDP", port.ContainerPort))
		}
	}
	on := "on its declared ports " + strings.Join(ports, ", ")
	if len(ports) == 0 {
		on = "with no port to echo on (the container declares no TCP or UDP port)"
	}
	p.Message = fmt.Sprintf("image %q %s: tranche's built-in echo server runs %s", image, why, on)
	return p
}

// quoteArgs prints a command line, quoting the words that need it.
func quoteArgs(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$;&|<>*?()") {
			out[i] = fmt.Sprintf("%q", a)
		} else {
			out[i] = a
		}
	}
	return strings.Join(out, " ")
}

// normalize returns the image's full reference as a container runtime reports it
// (docker.io/library/nginx:latest) and its short form (nginx:latest).
func normalize(image string) (full, short string) {
	name := image
	if i := strings.IndexByte(name, '/'); i < 0 {
		name = "docker.io/library/" + name
	} else if first := name[:i]; !strings.ContainsAny(first, ".:") && first != "localhost" {
		name = "docker.io/" + name
	}
	last := name[strings.LastIndexByte(name, '/')+1:]
	if !strings.ContainsAny(last, ":@") {
		name += ":latest"
	}
	short = strings.TrimPrefix(name, "docker.io/")
	short = strings.TrimPrefix(short, "library/")
	return name, short
}

// match reports whether s matches pattern, where '*' matches any run of characters
// (slashes included) and everything else matches itself.
func match(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}
