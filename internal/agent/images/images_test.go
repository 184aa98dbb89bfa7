package images

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func makeContainer(mutate func(*v1.Container)) *v1.Container {
	c := &v1.Container{Name: "app"}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func TestResolve(t *testing.T) {
	cat := Default()
	tests := []struct {
		name      string
		image     string
		container *v1.Container
		want      Plan
		wantErr   string
	}{{
		name:      "busybox shell",
		image:     "busybox:1.36",
		container: makeContainer(func(c *v1.Container) { c.Command = []string{"/bin/sh", "-c", "sleep 3600"} }),
		want: Plan{
			Image: "docker.io/library/busybox:1.36", ImageID: "tranche://busybox/docker.io/library/busybox:1.36", Runner: RunnerBusybox,
			Argv: []string{"/usr/bin/busybox", "sh", "-c", "sleep 3600"}, Applets: "/usr/bin/busybox",
			Message: `image "busybox:1.36" runs with the host's busybox applets (/usr/bin/busybox): sh -c "sleep 3600"`,
		},
	}, {
		name:      "kubectl run busybox -- sh puts sh in args",
		image:     "docker.io/library/busybox",
		container: makeContainer(func(c *v1.Container) { c.Args = []string{"sh"} }),
		want: Plan{
			Image: "docker.io/library/busybox:latest", ImageID: "tranche://busybox/docker.io/library/busybox:latest", Runner: RunnerBusybox,
			Argv: []string{"/usr/bin/busybox", "sh"}, Applets: "/usr/bin/busybox",
			Message: `image "docker.io/library/busybox" runs with the host's busybox applets (/usr/bin/busybox): sh`,
		},
	}, {
		name:      "busybox default command",
		image:     "busybox",
		container: makeContainer(nil),
		want: Plan{
			Image: "docker.io/library/busybox:latest", ImageID: "tranche://busybox/docker.io/library/busybox:latest", Runner: RunnerBusybox,
			Argv: []string{"/usr/bin/busybox", "sh"}, Applets: "/usr/bin/busybox",
			Message: `image "busybox" runs with the host's busybox applets (/usr/bin/busybox): sh`,
		},
	}, {
		name:      "agnhost netexec from args",
		image:     "registry.k8s.io/e2e-test-images/agnhost:2.53",
		container: makeContainer(func(c *v1.Container) { c.Args = []string{"netexec", "--http-port=8080", "--udp-port=8081"} }),
		want: Plan{
			Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", ImageID: "tranche://builtin/registry.k8s.io/e2e-test-images/agnhost:2.53", Runner: RunnerBuiltin,
			Builtin: "netexec", BuiltinArgs: []string{"--http-port=8080", "--udp-port=8081"},
			Message: `image "registry.k8s.io/e2e-test-images/agnhost:2.53" runs as tranche's built-in netexec --http-port=8080 --udp-port=8081`,
		},
	}, {
		name:  "agnhost from command",
		image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
		container: makeContainer(func(c *v1.Container) {
			c.Command = []string{"/agnhost", "serve-hostname"}
			c.Args = []string{"--port=9376"}
		}),
		want: Plan{
			Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", ImageID: "tranche://builtin/registry.k8s.io/e2e-test-images/agnhost:2.53", Runner: RunnerBuiltin,
			Builtin: "serve-hostname", BuiltinArgs: []string{"--port=9376"},
			Message: `image "registry.k8s.io/e2e-test-images/agnhost:2.53" runs as tranche's built-in serve-hostname --port=9376`,
		},
	}, {
		name:      "agnhost without args pauses",
		image:     "registry.k8s.io/e2e-test-images/agnhost:2.53",
		container: makeContainer(nil),
		want: Plan{
			Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", ImageID: "tranche://builtin/registry.k8s.io/e2e-test-images/agnhost:2.53", Runner: RunnerBuiltin,
			Argv:    []string{"/usr/bin/busybox", "sh", "-c", pauseScript},
			Message: `image "registry.k8s.io/e2e-test-images/agnhost:2.53" runs as a pause process: the host's busybox shell (/usr/bin/busybox) waiting for SIGTERM`,
		},
	}, {
		name:      "agnhost pause with arguments stays the built-in, which refuses them",
		image:     "registry.k8s.io/e2e-test-images/agnhost:2.53",
		container: makeContainer(func(c *v1.Container) { c.Args = []string{"pause", "--extra"} }),
		want: Plan{
			Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", ImageID: "tranche://builtin/registry.k8s.io/e2e-test-images/agnhost:2.53", Runner: RunnerBuiltin,
			Builtin: "pause", BuiltinArgs: []string{"--extra"},
			Message: `image "registry.k8s.io/e2e-test-images/agnhost:2.53" runs as tranche's built-in pause --extra`,
		},
	}, {
		name:      "pause image",
		image:     "registry.k8s.io/pause:3.10",
		container: makeContainer(func(c *v1.Container) { c.Command = []string{"/pause"} }),
		want: Plan{
			Image: "registry.k8s.io/pause:3.10", ImageID: "tranche://builtin/registry.k8s.io/pause:3.10", Runner: RunnerBuiltin,
			Argv:    []string{"/usr/bin/busybox", "sh", "-c", pauseScript},
			Message: `image "registry.k8s.io/pause:3.10" runs as a pause process: the host's busybox shell (/usr/bin/busybox) waiting for SIGTERM`,
		},
	}, {
		name:      "tranche image running a subcommand",
		image:     "tranche",
		container: makeContainer(func(c *v1.Container) { c.Command = []string{"tranche", "dns"}; c.Args = []string{"--port=53"} }),
		want: Plan{
			Image: "docker.io/library/tranche:latest", ImageID: "tranche://builtin/docker.io/library/tranche:latest", Runner: RunnerBuiltin,
			Builtin: "dns", BuiltinArgs: []string{"--port=53"}, Self: true,
			Message: `image "tranche" runs the tranche binary: tranche dns --port=53`,
		},
	}, {
		name:      "tranche image running a test server",
		image:     "tranche:dev",
		container: makeContainer(func(c *v1.Container) { c.Args = []string{"echo", "--port=7"} }),
		want: Plan{
			Image: "docker.io/library/tranche:dev", ImageID: "tranche://builtin/docker.io/library/tranche:dev", Runner: RunnerBuiltin,
			Builtin: "echo", BuiltinArgs: []string{"--port=7"},
			Message: `image "tranche:dev" runs as tranche's built-in echo --port=7`,
		},
	}, {
		name:      "nginx",
		image:     "nginx:1.27",
		container: makeContainer(func(c *v1.Container) { c.Ports = []v1.ContainerPort{{ContainerPort: 80}} }),
		want: Plan{
			Image: "docker.io/library/nginx:1.27", ImageID: "tranche://debian-program/docker.io/library/nginx:1.27", Runner: RunnerDebianProgram,
			Argv: []string{"/usr/sbin/nginx", "-g", "daemon off;"},
			Files: map[string]string{"nginx.conf": nginxConf, "mime.types": nginxMimeTypes, "conf.d/default.conf": nginxDefaultServer,
				"html/index.html": nginxIndex, "html/50x.html": nginxErrorPage},
			Mounts:     []Mount{{"{{configDir}}", "/etc/nginx"}, {"{{configDir}}/html", "/usr/share/nginx/html"}, {"{{dataDir}}", "/var/lib/nginx"}},
			StopSignal: syscall.SIGQUIT,
			Message:    `image "nginx:1.27" runs as Debian's nginx (/usr/sbin/nginx) with a per-pod configuration in /etc/nginx and pages in /usr/share/nginx/html`,
		},
	}, {
		name:      "nginx with its own command line",
		image:     "nginx",
		container: makeContainer(func(c *v1.Container) { c.Command = []string{"nginx", "-g", "daemon off; worker_processes 2;"} }),
		want: Plan{
			Image: "docker.io/library/nginx:latest", ImageID: "tranche://debian-program/docker.io/library/nginx:latest", Runner: RunnerDebianProgram,
			Argv: []string{"/usr/sbin/nginx", "-g", "daemon off; worker_processes 2;"},
			Files: map[string]string{"nginx.conf": nginxConf, "mime.types": nginxMimeTypes, "conf.d/default.conf": nginxDefaultServer,
				"html/index.html": nginxIndex, "html/50x.html": nginxErrorPage},
			Mounts:     []Mount{{"{{configDir}}", "/etc/nginx"}, {"{{configDir}}/html", "/usr/share/nginx/html"}, {"{{dataDir}}", "/var/lib/nginx"}},
			StopSignal: syscall.SIGQUIT,
			Message:    `image "nginx" runs as Debian's nginx (/usr/sbin/nginx) with a per-pod configuration in /etc/nginx and pages in /usr/share/nginx/html with the container's arguments -g "daemon off; worker_processes 2;"`,
		},
	}, {
		name:      "postgres passes options to the server",
		image:     "postgres:16",
		container: makeContainer(func(c *v1.Container) { c.Args = []string{"-c", "max_connections=50"} }),
		want: Plan{
			Image: "docker.io/library/postgres:16", ImageID: "tranche://debian-program/docker.io/library/postgres:16", Runner: RunnerDebianProgram,
			Argv:       []string{"/usr/lib/postgresql/15/bin/postgres", "-c", "listen_addresses=*", "-c", "max_connections=50"},
			Setup:      [][]string{{"/bin/sh", "-c", postgresInit}},
			Env:        []string{"PGDATA=/var/lib/postgresql/data", "PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Mounts:     []Mount{{"{{dataDir}}", "/var/lib/postgresql"}},
			OwnedDirs:  []string{"$PGDATA", "/run/postgresql"},
			User:       "postgres",
			StopSignal: syscall.SIGINT,
			Message:    `image "postgres:16" runs as Debian's postgres (/usr/lib/postgresql/15/bin/postgres) with a per-pod data directory at /var/lib/postgresql with the container's arguments -c max_connections=50`,
		},
	}, {
		name:      "postgres ignores a shell command",
		image:     "postgres:16",
		container: makeContainer(func(c *v1.Container) { c.Command = []string{"sh", "-c", "sleep 1"} }),
		want: Plan{
			Image: "docker.io/library/postgres:16", ImageID: "tranche://debian-program/docker.io/library/postgres:16", Runner: RunnerDebianProgram,
			Argv:       []string{"/usr/lib/postgresql/15/bin/postgres", "-c", "listen_addresses=*"},
			Setup:      [][]string{{"/bin/sh", "-c", postgresInit}},
			Env:        []string{"PGDATA=/var/lib/postgresql/data", "PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Mounts:     []Mount{{"{{dataDir}}", "/var/lib/postgresql"}},
			OwnedDirs:  []string{"$PGDATA", "/run/postgresql"},
			User:       "postgres",
			StopSignal: syscall.SIGINT,
			Message:    `image "postgres:16" runs as Debian's postgres (/usr/lib/postgresql/15/bin/postgres) with a per-pod data directory at /var/lib/postgresql (the container's command and args are ignored: only postgres and its options can run here)`,
		},
	}, {
		name:      "unknown image with a command",
		image:     "myregistry/api:2.1",
		container: makeContainer(func(c *v1.Container) { c.Command = []string{"/usr/bin/python3", "-m", "http.server", "8080"} }),
		want: Plan{
			Image: "docker.io/myregistry/api:2.1", ImageID: "tranche://host-command/docker.io/myregistry/api:2.1", Runner: RunnerHostCommand,
			Argv:    []string{"/usr/bin/python3", "-m", "http.server", "8080"},
			Message: `image "myregistry/api:2.1" is not in the image catalog: its command runs from the host file system: /usr/bin/python3 -m http.server 8080`,
		},
	}, {
		name:  "unknown image without a command echoes on its ports",
		image: "myregistry/api:2.1",
		container: makeContainer(func(c *v1.Container) {
			c.Ports = []v1.ContainerPort{{ContainerPort: 8080}, {ContainerPort: 53, Protocol: v1.ProtocolUDP}, {ContainerPort: 9, Protocol: v1.ProtocolSCTP}}
		}),
		want: Plan{
			Image: "docker.io/myregistry/api:2.1", ImageID: "tranche://echo/docker.io/myregistry/api:2.1", Runner: RunnerEcho,
			Builtin: "echo", BuiltinArgs: []string{"--port=8080", "--udp-port=53"},
			Message: `image "myregistry/api:2.1" is not in the image catalog and the container has no command: tranche's built-in echo server runs on its declared ports 8080/TCP, 53/UDP`,
		},
	}, {
		name:      "unknown image without command or ports",
		image:     "ghcr.io/acme/worker@sha256:abc",
		container: makeContainer(nil),
		want: Plan{
			Image: "ghcr.io/acme/worker@sha256:abc", ImageID: "tranche://echo/ghcr.io/acme/worker@sha256:abc", Runner: RunnerEcho,
			Builtin: "echo",
			Message: `image "ghcr.io/acme/worker@sha256:abc" is not in the image catalog and the container has no command: tranche's built-in echo server runs with no port to echo on (the container declares no TCP or UDP port)`,
		},
	}, {
		name:      "agnhost subcommand not built in",
		image:     "registry.k8s.io/e2e-test-images/agnhost:2.53",
		container: makeContainer(func(c *v1.Container) { c.Args = []string{"liveness"} }),
		wantErr:   `image cannot be run by tranche: image "registry.k8s.io/e2e-test-images/agnhost:2.53": agnhost subcommand "liveness" is not built into tranche (built in: echo, netexec, pause, serve-hostname, test-webserver); use one of those or map the image to another runner in the image catalog`,
	}, {
		name:      "agnhost with a shell command",
		image:     "registry.k8s.io/e2e-test-images/agnhost:2.53",
		container: makeContainer(func(c *v1.Container) { c.Command = []string{"/bin/sh", "-c", "true"} }),
		wantErr:   `image cannot be run by tranche: image "registry.k8s.io/e2e-test-images/agnhost:2.53": command "/bin/sh" is not available: tranche runs this image as its built-in agnhost, so the command must be agnhost or left out`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cat.Resolve(tt.image, tt.container)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !errors.Is(err, ErrUnmappable) {
					t.Fatalf("error = %v, want %q wrapping ErrUnmappable", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCatalogWithoutFallback(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(file, []byte("images:\n- pattern: \"corp.example/*\"\n  runner: echo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cat, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := cat.Resolve("corp.example/a/b:1", makeContainer(nil)); err != nil || p.Runner != RunnerEcho ||
		p.Message != `image "corp.example/a/b:1" is mapped to the echo server: tranche's built-in echo server runs with no port to echo on (the container declares no TCP or UDP port)` {
		t.Errorf("Resolve = %+v, %v", p, err)
	}
	_, err = cat.Resolve("myregistry/api:2.1", makeContainer(nil))
	want := `image cannot be run by tranche: image "myregistry/api:2.1" has no entry in the image catalog ` + file +
		`: add an entry mapping its name to a runner (busybox, builtin, debian-program, host-command, echo)`
	if err == nil || err.Error() != want || !errors.Is(err, ErrUnmappable) {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		data string
		want string
	}{
		{"unknown field", "images:\n- pattern: x\n  runner: echo\n  colour: red\n", `image catalog t: error unmarshaling JSON: while decoding JSON: json: unknown field "colour"`},
		{"unknown runner", "images:\n- pattern: x\n  runner: docker\n", `image catalog t: images[0] ("x"): unknown runner "docker" (one of [busybox builtin debian-program host-command echo])`},
		{"empty pattern", "images:\n- runner: echo\n", `image catalog t: images[0] (""): pattern is empty`},
		{"busybox path", "images:\n- pattern: b*\n  runner: busybox\n", `image catalog t: images[0] ("b*"): runner busybox needs the catalog's busybox path`},
		{"program", "images:\n- pattern: r*\n  runner: debian-program\n  program: redis\n  path: /usr/bin/redis-server\n", `image catalog t: images[0] ("r*"): program "redis" is not one tranche can configure (nginx, postgres)`},
		{"program path", "images:\n- pattern: n*\n  runner: debian-program\n  program: nginx\n", `image catalog t: images[0] ("n*"): program nginx needs a path`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.data), "t")
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.HasPrefix(err.Error(), "image catalog: open ") {
		t.Errorf("Load of a missing file = %v", err)
	}
}

func TestExpand(t *testing.T) {
	p := Plan{
		Argv:   []string{"/bin/prog", "--config={{configDir}}/p.conf"},
		Env:    []string{"DATA={{dataDir}}/db"},
		Setup:  [][]string{{"init", "{{dataDir}}"}},
		Files:  map[string]string{"p.conf": "root {{configDir}}/html;\npid {{dataDir}}/p.pid;\n"},
		Mounts: []Mount{{Source: "{{dataDir}}", Target: "/var/lib/prog"}},
	}
	e := p.Expand("/run/tranche/pods/u1/c/config", "/var/lib/tranche/pods/u1/c/data")
	want := Plan{
		Argv:   []string{"/bin/prog", "--config=/run/tranche/pods/u1/c/config/p.conf"},
		Env:    []string{"DATA=/var/lib/tranche/pods/u1/c/data/db"},
		Setup:  [][]string{{"init", "/var/lib/tranche/pods/u1/c/data"}},
		Files:  map[string]string{"p.conf": "root /run/tranche/pods/u1/c/config/html;\npid /var/lib/tranche/pods/u1/c/data/p.pid;\n"},
		Mounts: []Mount{{Source: "/var/lib/tranche/pods/u1/c/data", Target: "/var/lib/prog"}},
	}
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("expanded plan (-want +got):\n%s", diff)
	}
	if p.Files["p.conf"] != "root {{configDir}}/html;\npid {{dataDir}}/p.pid;\n" || p.Mounts[0].Source != "{{dataDir}}" {
		t.Error("Expand changed the original plan")
	}
}

func TestMatchAndNormalize(t *testing.T) {
	for _, tt := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "anything/at:all", true},
		{"nginx*", "nginx:1.27", true},
		{"nginx*", "my-nginx:1", false},
		{"registry.k8s.io/e2e-test-images/agnhost*", "registry.k8s.io/e2e-test-images/agnhost:2.53", true},
		{"a*b*c", "a-x-b-y-c", true},
		{"a*b*c", "a-x-c-y-b", false},
		{"exact", "exact", true},
		{"exact", "exact2", false},
	} {
		if got := match(tt.pattern, tt.s); got != tt.want {
			t.Errorf("match(%q, %q) = %v", tt.pattern, tt.s, got)
		}
	}
	for image, want := range map[string][2]string{
		"nginx":                         {"docker.io/library/nginx:latest", "nginx:latest"},
		"library/nginx:1":               {"docker.io/library/nginx:1", "nginx:1"},
		"bitnami/nginx":                 {"docker.io/bitnami/nginx:latest", "bitnami/nginx:latest"},
		"localhost/x":                   {"localhost/x:latest", "localhost/x:latest"},
		"localhost:5000/x:2":            {"localhost:5000/x:2", "localhost:5000/x:2"},
		"quay.io/a/b@sha256:00":         {"quay.io/a/b@sha256:00", "quay.io/a/b@sha256:00"},
		"docker.io/library/postgres:16": {"docker.io/library/postgres:16", "postgres:16"},
	} {
		full, short := normalize(image)
		if full != want[0] || short != want[1] {
			t.Errorf("normalize(%q) = %q, %q; want %q, %q", image, full, short, want[0], want[1])
		}
	}
}
