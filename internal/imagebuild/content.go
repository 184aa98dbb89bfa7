package imagebuild

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"

	"github.com/tranche/tranche/internal/auth/pki"
)

// basePasswd and baseGroup are the busybox image's accounts: root, the usual system
// users and nobody (65534), which manifests name in runAsUser or chown.
const basePasswd = `root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/bin/false
bin:x:2:2:bin:/bin:/bin/false
sys:x:3:3:sys:/dev:/bin/false
sync:x:4:100:sync:/bin:/bin/sync
mail:x:8:8:mail:/var/spool/mail:/bin/false
www-data:x:33:33:www-data:/var/www:/bin/false
operator:x:37:37:Operator:/var:/bin/false
nobody:x:65534:65534:nobody:/home:/bin/false
`

const baseGroup = `root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
disk:x:6:
lp:x:7:
mail:x:8:
kmem:x:9:
wheel:x:10:root
cdrom:x:11:
dialout:x:18:
floppy:x:19:
video:x:28:
audio:x:29:
tape:x:32:
www-data:x:33:
operator:x:37:
utmp:x:43:
plugdev:x:46:
staff:x:50:
lock:x:54:
netdev:x:82:
users:x:100:
nogroup:x:65534:
`

// accounts returns /etc/passwd and /etc/group with extra lines added to the base
// ones: an image that adds a user replaces both files in its own layer, leaving the
// shared base layer as it is.
func accounts(passwd, group []string) (string, string) {
	return basePasswd + strings.Join(passwd, "\n") + "\n", baseGroup + strings.Join(group, "\n") + "\n"
}

// nsswitch makes glibc programs (curl, nginx, postgres) read accounts and hosts from
// files first, as Debian's images do.
const nsswitch = `passwd: files
group: files
shadow: files
hosts: files dns
networks: files
protocols: files
services: files
`

// defaultPath is the PATH every image's environment starts from (Docker's default).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// localhostCert returns agnhost's /localhost.crt and /localhost.key: a self-signed
// Ed25519 certificate for localhost, 127.0.0.1 and ::1. Ed25519 signatures and the
// key derived from a fixed seed make it the same bytes at every build, so the layer
// holding it keeps its digest; like upstream's, whose key is in its repository, it
// is a test certificate and nothing secret.
func localhostCert() (certPEM, keyPEM string, err error) {
	seed := sha256.Sum256([]byte("tranche imagebuild agnhost localhost certificate"))
	c, k, err := pki.SelfSignedPEM(pki.SelfSignedRequest{
		CommonName:    "localhost",
		Organizations: []string{"tranche e2e"},
		DNSNames:      []string{"localhost"},
		IPs:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:     time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:      time.Date(2099, 12, 31, 0, 0, 0, 0, time.UTC),
		Client:        true,
		CA:            true,
		Key:           ed25519.NewKeyFromSeed(seed[:]),
		Serial:        big.NewInt(1),
	})
	if err != nil {
		return "", "", fmt.Errorf("agnhost certificate: %w", err)
	}
	return string(c), string(k), nil
}

// nginxConf is /etc/nginx/nginx.conf in the official image's container style: logs on
// the container's output, the servers in conf.d (where a ConfigMap is usually
// mounted), workers as user nginx.
const nginxConf = `user nginx;
worker_processes auto;

error_log /dev/stderr notice;
pid /var/run/nginx.pid;

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

// nginxDefaultServer is /etc/nginx/conf.d/default.conf: port 80 on IPv4 only, the
// cluster's family, so that nginx also starts in a pod without IPv6.
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

// nginxMimeTypes maps the common static files' extensions to their types.
const nginxMimeTypes = `types {
    text/html html htm shtml;
    text/css css;
    text/xml xml;
    text/plain txt;
    text/csv csv;
    text/markdown md;
    application/javascript js mjs;
    application/json json;
    application/pdf pdf;
    application/wasm wasm;
    application/zip zip;
    application/gzip gz;
    application/x-tar tar;
    application/octet-stream bin exe dll iso img;
    image/gif gif;
    image/jpeg jpeg jpg;
    image/png png;
    image/svg+xml svg svgz;
    image/webp webp;
    image/avif avif;
    image/x-icon ico;
    font/woff woff;
    font/woff2 woff2;
    audio/mpeg mp3;
    video/mp4 mp4;
    video/webm webm;
}
`

// nginxIndex is the page served at /, titled like the official image's so that
// checks looking for "Welcome to nginx!" pass.
const nginxIndex = `<!DOCTYPE html>
<html>
<head>
<title>Welcome to nginx!</title>
</head>
<body>
<h1>Welcome to nginx!</h1>
<p>This nginx runs in an image tranche built from the machine's own nginx package.
Put your pages in /usr/share/nginx/html and your servers in /etc/nginx/conf.d.</p>
</body>
</html>
`

const nginx50x = `<!DOCTYPE html>
<html>
<head>
<title>Error</title>
</head>
<body>
<h1>An error occurred.</h1>
<p>The page you are looking for is currently unavailable. Please try again later.</p>
</body>
</html>
`

// postgresEntrypoint is /usr/local/bin/docker-entrypoint.sh, in POSIX sh for busybox.
// It does what the official image's entrypoint does in the common cases: options as
// first argument go to postgres; POSTGRES_*_FILE variables name files holding the
// settings; as root it makes PGDATA postgres's and starts itself
// again as postgres; an empty PGDATA is initialised from POSTGRES_USER,
// POSTGRES_PASSWORD (required unless POSTGRES_HOST_AUTH_METHOD=trust), POSTGRES_DB
// and POSTGRES_INITDB_ARGS, with network connections by password and listening on
// every address; any other command runs as it is.
const postgresEntrypoint = `#!/bin/sh
set -e

case "${1-}" in
-*) set -- postgres "$@" ;;
esac
if [ "${1-}" != postgres ]; then
	exec "$@"
fi

: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA

# Each POSTGRES_* setting may come from a file named by the variable with _FILE
# appended (a mounted Secret), not both.
for var in POSTGRES_PASSWORD POSTGRES_USER POSTGRES_DB POSTGRES_INITDB_ARGS; do
	eval "file=\${${var}_FILE-}" "value=\${${var}-}"
	if [ -n "$file" ]; then
		if [ -n "$value" ]; then
			echo "error: both $var and ${var}_FILE are set; set only one" >&2
			exit 1
		fi
		value="$(cat "$file")"
		export "$var=$value"
		unset "${var}_FILE"
	fi
done

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA" || :
	chmod 3777 /var/run/postgresql || :
	chown -R postgres:postgres "$PGDATA" /var/run/postgresql
	# Options before "--" and none after: busybox su would take postgres's own
	# options (--version, -c) for its.
	exec su -s /bin/sh -c 'exec "$0" "$@"' -- postgres "$0" "$@"
fi

if [ -s "$PGDATA/PG_VERSION" ]; then
	echo "PostgreSQL Database directory appears to contain a database; Skipping initialization"
else
	auth="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"
	if [ -z "${POSTGRES_PASSWORD-}" ] && [ "$auth" != trust ]; then
		# The first line states the error as the official image does: what people
		# search their logs for.
		cat >&2 <<-'EOM'
		Error: Database is uninitialized and superuser password is not specified.
		       Set POSTGRES_PASSWORD to a non-empty value (from a Secret, say) so that
		       the superuser can log in over the network, or, only if you accept that
		       anyone who can reach the server logs in without a password, set
		       POSTGRES_HOST_AUTH_METHOD=trust.
		EOM
		exit 1
	fi
	user="${POSTGRES_USER:-postgres}"
	mkdir -p "$PGDATA"
	chmod 700 "$PGDATA" || :
	pwfile="$(mktemp)"
	trap 'rm -f "$pwfile"' EXIT
	printf '%s\n' "${POSTGRES_PASSWORD-}" > "$pwfile"
	# POSTGRES_INITDB_ARGS is split into words on purpose, as the official image does.
	# shellcheck disable=SC2086
	initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host="$auth" \
		$POSTGRES_INITDB_ARGS
	rm -f "$pwfile"
	trap - EXIT
	printf '\nhost all all all %s\n' "$auth" >> "$PGDATA/pg_hba.conf"
	printf "\nlisten_addresses = '*'\n" >> "$PGDATA/postgresql.conf"
	db="${POSTGRES_DB:-$user}"
	if [ "$db" != postgres ]; then
		echo "CREATE DATABASE \"$db\";" | postgres --single -D "$PGDATA" -c listen_addresses= -j postgres >/dev/null
	fi
	if [ "$auth" = trust ]; then
		echo "WARNING: POSTGRES_HOST_AUTH_METHOD=trust: every connection is accepted without a password." >&2
	fi
	echo
	echo "PostgreSQL init process complete; ready for start up."
	echo
fi

exec "$@"
`

// localeScript is the postgres image's /usr/bin/locale, for its only user: initdb
// runs `locale -a` to create a collation for each locale of the system, and the image
// has C, POSIX and the C.utf8 locale copied from the host (listed when present). Other
// uses get the settings from the environment, as locale(1) prints them.
func localeScript(cUTF8 bool) string {
	list := `C\nPOSIX\n`
	if cUTF8 {
		list = `C\nC.utf8\nPOSIX\n`
	}
	return `#!/bin/sh
case "${1-}" in
-a) printf '` + list + `' ;;
*) echo "LANG=${LANG-}"; echo "LC_ALL=${LC_ALL-}" ;;
esac
`
}
