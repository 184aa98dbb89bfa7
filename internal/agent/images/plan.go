package images

import (
	"fmt"
	"path"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
)

// Tokens a Plan's Argv, Setup, Env and Files may contain; Expand replaces them with the
// pod's directories.
const (
	// ConfigDirToken stands for the container's configuration directory, which the
	// runtime creates per pod and fills with Files.
	ConfigDirToken = "{{configDir}}"
	// DataDirToken stands for the container's data directory, created per pod, kept
	// across container restarts, owned by User.
	DataDirToken = "{{dataDir}}"
)

// Plan is what the runtime runs for one container.
type Plan struct {
	// Image is the full image reference, as container statuses report it
	// ("docker.io/library/nginx:1.27").
	Image string
	// ImageID is the image ID for container statuses: "tranche://<runner>/<image>".
	ImageID string
	Runner  Runner
	// Argv is the program and its arguments (busybox, debian-program, host-command).
	// The container's env applies; $(VAR) references are the runtime's to expand.
	Argv []string
	// Applets, when set, is the busybox binary whose applets must come first in PATH
	// (a directory of links to it), so that sh, wget, nslookup... are busybox's.
	Applets string
	// Builtin and BuiltinArgs name the built-in server (builtin, echo) and its
	// arguments, for builtin.Run.
	Builtin     string
	BuiltinArgs []string
	// Self is true when Builtin is not a built-in server but a subcommand of the
	// tranche binary (tranche's own image: dns, ingress...): the runtime executes its
	// own binary with Builtin and BuiltinArgs.
	Self bool
	// Setup commands run to completion, in order, before Argv, each time the container
	// starts (they are idempotent: postgres's skips an initialised data directory).
	Setup [][]string
	// Files are written under the configuration directory (path relative to it →
	// content) before Setup.
	Files map[string]string
	// Env is added to the container's environment.
	Env []string
	// User is the host user the program runs as ("" for the agent's user); the data
	// directory is given to that user.
	User string
	// Mounts are bind-mounted into the container, in order, before its volumes: they
	// give the program the file system layout of its official image (nginx's
	// /etc/nginx, postgres's /var/lib/postgresql) from the pod's own directories.
	// Volume mount points below a Mount's target are created in its source.
	Mounts []Mount
	// OwnedDirs are directories, as the container sees them and expanded by its shell
	// (so "$PGDATA" works), that are created and given to User before Setup runs, as
	// an official image's entrypoint does as root before dropping privileges.
	OwnedDirs []string
	// StopSignal is the image's STOPSIGNAL, sent to stop the container; 0 means
	// SIGTERM.
	StopSignal syscall.Signal
	// Message is the event message stating the choice, for the pod's events.
	Message string
}

// Mount binds Source (a path on the node, usually below ConfigDirToken or
// DataDirToken) at Target, a directory that must exist on the node's file system.
type Mount struct {
	Source, Target string
}

// Expand returns the plan with ConfigDirToken and DataDirToken replaced by the pod's
// directories for this container.
func (p Plan) Expand(configDir, dataDir string) Plan {
	r := strings.NewReplacer(ConfigDirToken, configDir, DataDirToken, dataDir)
	each := func(in []string) []string {
		if in == nil {
			return nil
		}
		out := make([]string, len(in))
		for i, s := range in {
			out[i] = r.Replace(s)
		}
		return out
	}
	p.Argv = each(p.Argv)
	p.BuiltinArgs = each(p.BuiltinArgs)
	p.Env = each(p.Env)
	if p.Mounts != nil {
		mounts := make([]Mount, len(p.Mounts))
		for i, m := range p.Mounts {
			mounts[i] = Mount{Source: r.Replace(m.Source), Target: r.Replace(m.Target)}
		}
		p.Mounts = mounts
	}
	if p.Setup != nil {
		setup := make([][]string, len(p.Setup))
		for i, cmd := range p.Setup {
			setup[i] = each(cmd)
		}
		p.Setup = setup
	}
	if p.Files != nil {
		files := make(map[string]string, len(p.Files))
		for name, content := range p.Files {
			files[name] = r.Replace(content)
		}
		p.Files = files
	}
	return p
}

// debianPlan configures a Debian program for one pod as its official image would run
// it, the program seeing the image's file layout through the plan's Mounts: nginx
// serving a welcome page on port 80 from /etc/nginx and /usr/share/nginx/html, postgres
// initialised from the POSTGRES_* variables in PGDATA (/var/lib/postgresql/data, where
// a claim is usually mounted) and listening on 5432.
func debianPlan(p Plan, e Entry, image string, c *v1.Container) Plan {
	args, honoured := imageArgs(e.Program, c)
	note := ""
	switch {
	case honoured:
		note = " with the container's arguments " + quoteArgs(args)
	case len(c.Command) > 0 || len(c.Args) > 0:
		note = fmt.Sprintf(" (the container's command and args are ignored: only %s and its options can run here)", e.Program)
	}
	switch e.Program {
	case "nginx":
		p.Files = map[string]string{
			"nginx.conf":          nginxConf,
			"mime.types":          nginxMimeTypes,
			"conf.d/default.conf": nginxDefaultServer,
			"html/index.html":     nginxIndex,
			"html/50x.html":       nginxErrorPage,
		}
		p.Mounts = []Mount{
			{Source: ConfigDirToken, Target: "/etc/nginx"},
			{Source: ConfigDirToken + "/html", Target: "/usr/share/nginx/html"},
			{Source: DataDirToken, Target: "/var/lib/nginx"},
		}
		if !honoured {
			args = []string{"-g", "daemon off;"}
		}
		p.Argv = append([]string{e.Path}, args...)
		p.StopSignal = syscall.SIGQUIT
		p.Message = fmt.Sprintf("image %q runs as Debian's nginx (%s) with a per-pod configuration in /etc/nginx and pages in /usr/share/nginx/html%s",
			image, e.Path, note)
	case "postgres":
		bin := e.Path
		p.User = "postgres"
		p.Env = []string{"PGDATA=/var/lib/postgresql/data", "PATH=" + bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
		p.Mounts = []Mount{{Source: DataDirToken, Target: "/var/lib/postgresql"}}
		p.OwnedDirs = []string{"$PGDATA", "/run/postgresql"}
		p.Setup = [][]string{{"/bin/sh", "-c", postgresInit}}
		p.Argv = append([]string{path.Join(bin, "postgres"), "-c", "listen_addresses=*"}, args...)
		p.StopSignal = syscall.SIGINT
		p.Message = fmt.Sprintf("image %q runs as Debian's postgres (%s) with a per-pod data directory at /var/lib/postgresql%s",
			image, path.Join(bin, "postgres"), note)
	}
	return p
}

// imageArgs returns the program's arguments from the container's command and args
// the way the official image's entrypoint reads them, and whether there were any it
// can honour: a command or first argument naming the program (nginx -g '...';
// postgres -c ...), or, for postgres, arguments that are options (-c max_connections=50
// goes to postgres).
func imageArgs(program string, c *v1.Container) ([]string, bool) {
	argv := append(append([]string(nil), c.Command...), c.Args...)
	switch {
	case len(argv) == 0:
		return nil, false
	case path.Base(argv[0]) == program:
		return argv[1:], len(argv) > 1
	case len(c.Command) == 0 && program == "postgres" && strings.HasPrefix(argv[0], "-"):
		return argv, true
	}
	return nil, false
}

// nginxConf is the per-pod /etc/nginx/nginx.conf: the official image's shape (logs on
// the container's output, the servers in conf.d, where a ConfigMap can be mounted) with
// Debian's user, one worker (enough for a pod, and light when there are many replicas)
// and the pid file in the container's private /run. (Checked with Debian 12's nginx
// 1.22: `nginx -t` and serving the page.)
const nginxConf = `user www-data;
worker_processes 1;
error_log stderr notice;
pid /run/nginx.pid;

events {
    worker_connections 1024;
}

http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    log_format main '$remote_addr - $remote_user [$time_local] "$request" '
                    '$status $body_bytes_sent "$http_referer" '
                    '"$http_user_agent" "$http_x_forwarded_for"';
    access_log /dev/stdout main;
    sendfile on;
    keepalive_timeout 65;
    include /etc/nginx/conf.d/*.conf;
}
`

// nginxDefaultServer is conf.d/default.conf: port 80 (IPv4 only, the cluster's family,
// so that it starts in a namespace without IPv6), pages from /usr/share/nginx/html.
const nginxDefaultServer = `server {
    listen 80;
    server_name localhost;

    location / {
        root /usr/share/nginx/html;
        index index.html index.htm;
    }

    error_page 500 502 503 504 /50x.html;
    location = /50x.html {
        root /usr/share/nginx/html;
    }
}
`

// nginxMimeTypes is a short /etc/nginx/mime.types for the common static files.
const nginxMimeTypes = `types {
    text/html html htm shtml;
    text/css css;
    text/plain txt;
    text/xml xml;
    application/javascript js;
    application/json json;
    application/pdf pdf;
    application/wasm wasm;
    image/gif gif;
    image/jpeg jpeg jpg;
    image/png png;
    image/svg+xml svg svgz;
    image/webp webp;
    image/x-icon ico;
    font/woff woff;
    font/woff2 woff2;
}
`

// nginxIndex is the page nginx serves at /, titled like the official image's.
const nginxIndex = `<!DOCTYPE html>
<html>
<head>
<title>Welcome to nginx!</title>
</head>
<body>
<h1>Welcome to nginx!</h1>
<p>nginx is running in a tranche pod, with a configuration written for this pod.</p>
</body>
</html>
`

// nginxErrorPage is /50x.html.
const nginxErrorPage = `<!DOCTYPE html>
<html>
<head>
<title>Error</title>
</head>
<body>
<h1>An error occurred.</h1>
<p>The page you are looking for is currently unavailable.</p>
</body>
</html>
`

// postgresInit initialises PGDATA the first time, as the official image's entrypoint
// does: superuser POSTGRES_USER (default postgres) with POSTGRES_PASSWORD (required
// unless POSTGRES_HOST_AUTH_METHOD=trust), extra initdb options from
// POSTGRES_INITDB_ARGS, network access by password (or POSTGRES_HOST_AUTH_METHOD), and
// the database POSTGRES_DB (default: the user's name). It runs as postgres, which owns
// PGDATA (OwnedDirs).
const postgresInit = `set -e
chmod 700 "$PGDATA" 2>/dev/null || :
if [ -s "$PGDATA/PG_VERSION" ]; then
  echo "PostgreSQL Database directory appears to contain a database; Skipping initialization"
  exit 0
fi
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
auth="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"
if [ -z "$POSTGRES_PASSWORD" ] && [ "$auth" != trust ]; then
  echo "Error: Database is uninitialized and superuser password is not specified." >&2
  echo "       Set POSTGRES_PASSWORD in the container's env (from a Secret, say), or" >&2
  echo "       POSTGRES_HOST_AUTH_METHOD=trust to accept every connection without a password." >&2
  exit 1
fi
pwfile="$(mktemp -p /run/postgresql)"
printf '%s\n' "${POSTGRES_PASSWORD:-unused}" > "$pwfile"
initdb -D "$PGDATA" --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host="$auth" \
  --encoding=UTF8 --locale=C $POSTGRES_INITDB_ARGS
rm -f "$pwfile"
echo "host all all all $auth" >> "$PGDATA/pg_hba.conf"
if [ "$db" != postgres ]; then
  echo "CREATE DATABASE \"$db\";" | postgres --single -D "$PGDATA" -c listen_addresses= postgres >/dev/null
fi
echo "PostgreSQL init process complete; ready for start up."
`
