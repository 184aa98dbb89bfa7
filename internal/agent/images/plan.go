package images

import (
	"fmt"
	"path"
	"strings"

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
	// Message is the event message stating the choice, for the pod's events.
	Message string
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

// debianPlan configures a Debian program for one pod, as its official image would run:
// nginx serving a welcome page on port 80, postgres initialised from the POSTGRES_*
// variables and listening on 5432.
func debianPlan(p Plan, e Entry, image string, c *v1.Container) Plan {
	ignored := ""
	if len(c.Command) > 0 || len(c.Args) > 0 {
		ignored = " (the container's command and args are ignored)"
	}
	switch e.Program {
	case "nginx":
		p.Files = map[string]string{
			"nginx.conf":      nginxConf,
			"html/index.html": nginxIndex,
		}
		p.Argv = []string{e.Path, "-e", "stderr", "-p", DataDirToken + "/", "-c", ConfigDirToken + "/nginx.conf"}
		p.Message = fmt.Sprintf("image %q runs as Debian's nginx (%s) with a per-pod configuration%s", image, e.Path, ignored)
	case "postgres":
		bin := e.Path
		p.User = "postgres"
		p.Env = []string{"PGDATA=" + DataDirToken + "/pgdata", "PATH=" + bin + ":/usr/bin:/bin"}
		p.Setup = [][]string{{"/bin/sh", "-c", postgresInit}}
		p.Argv = []string{path.Join(bin, "postgres"), "-D", DataDirToken + "/pgdata",
			"-c", "listen_addresses=*", "-c", "unix_socket_directories=" + DataDirToken}
		p.Message = fmt.Sprintf("image %q runs as Debian's postgres (%s) with a per-pod configuration and data directory%s",
			image, path.Join(bin, "postgres"), ignored)
	}
	return p
}

// nginxConf is the per-pod nginx configuration: the official image's behaviour (port 80,
// a static welcome page, logs on the container's output) with every path in the pod's
// directories. It listens on IPv4 only, the cluster's family, so that it also starts in
// a pod namespace without IPv6. (Checked with Debian 12's nginx 1.22: `nginx -t` and
// serving the page.)
const nginxConf = `daemon off;
worker_processes 1;
pid ` + DataDirToken + `/nginx.pid;
error_log stderr notice;

events {
    worker_connections 1024;
}

http {
    access_log /dev/stdout;
    client_body_temp_path ` + DataDirToken + `/client_body;
    proxy_temp_path ` + DataDirToken + `/proxy;
    fastcgi_temp_path ` + DataDirToken + `/fastcgi;
    uwsgi_temp_path ` + DataDirToken + `/uwsgi;
    scgi_temp_path ` + DataDirToken + `/scgi;
    types {
        text/html html htm;
        text/css css;
        application/javascript js;
        application/json json;
        image/png png;
        image/svg+xml svg;
    }
    default_type application/octet-stream;
    sendfile on;
    keepalive_timeout 65;

    server {
        listen 80 default_server;
        server_name localhost;
        root ` + ConfigDirToken + `/html;
        index index.html;
        location / {
            try_files $uri $uri/ =404;
        }
    }
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

// postgresInit initialises the data directory the first time, as the official image's
// entrypoint does: superuser POSTGRES_USER (default postgres) with POSTGRES_PASSWORD
// (required unless POSTGRES_HOST_AUTH_METHOD=trust), network access by password, and the
// database POSTGRES_DB (default: the user's name).
const postgresInit = `set -e
if [ -s "$PGDATA/PG_VERSION" ]; then exit 0; fi
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
auth="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"
if [ -z "$POSTGRES_PASSWORD" ] && [ "$auth" != trust ]; then
  echo "Error: Database is uninitialized and superuser password is not specified." >&2
  echo "       Set POSTGRES_PASSWORD, or POSTGRES_HOST_AUTH_METHOD=trust to allow all connections without a password." >&2
  exit 1
fi
pwfile="$(mktemp)"
printf '%s\n' "${POSTGRES_PASSWORD:-unused}" > "$pwfile"
initdb -D "$PGDATA" --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host="$auth"
rm -f "$pwfile"
echo "host all all all $auth" >> "$PGDATA/pg_hba.conf"
if [ "$db" != postgres ]; then
  echo "CREATE DATABASE \"$db\";" | postgres --single -D "$PGDATA" -c listen_addresses= postgres >/dev/null
fi
`
