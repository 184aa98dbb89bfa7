package imagebuild

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// The smoke tests run the images' programs as a container would: in the image's own
// root file system (chroot into an extracted copy), in fresh mount, PID and network
// namespaces. They need root.

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (chroot and namespaces)")
	}
}

// extract writes img's flattened file system under a new directory, with owners and
// modes, and returns it; the test's cleanup removes it.
func extract(t *testing.T, img v1.Image) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "rootfs")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	type dirMode struct {
		path string
		mode os.FileMode
	}
	var dirs []dirMode
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("extracting: %v", err)
		}
		p := filepath.Join(root, filepath.Clean("/"+h.Name))
		mode := h.FileInfo().Mode()
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
			dirs = append(dirs, dirMode{p, mode})
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
				_, err = io.Copy(f, tr)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeLink:
			err = os.Link(filepath.Join(root, filepath.Clean("/"+h.Linkname)), p)
		default:
			t.Fatalf("%s: unexpected entry type %c", h.Name, h.Typeflag)
		}
		if err == nil && h.Typeflag != tar.TypeLink {
			err = os.Lchown(p, h.Uid, h.Gid)
		}
		if err == nil && h.Typeflag == tar.TypeReg {
			// After chown, which clears set-id bits.
			err = os.Chmod(p, mode)
		}
		if err != nil {
			t.Fatalf("extracting %s: %v", h.Name, err)
		}
	}
	for _, d := range dirs {
		if err := os.Chmod(d.path, d.mode); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// devSetup gives the container what a runtime would: /proc, a /dev with the usual
// devices and links, /dev/shm, and a loopback interface. The mounts are made in the
// command's own mount namespace, so they vanish with it.
const devSetup = `set -e
mount -t proc proc /proc
mount -t tmpfs -o mode=755 tmpfs /dev
for d in null:3 zero:5 full:7 random:8 urandom:9; do mknod -m 666 "/dev/${d%:*}" c 1 "${d#*:}"; done
ln -s /proc/self/fd /dev/fd
ln -s /proc/self/fd/0 /dev/stdin
ln -s /proc/self/fd/1 /dev/stdout
ln -s /proc/self/fd/2 /dev/stderr
mkdir /dev/shm
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
ip link set lo up
set +e
`

// run runs script with the image's sh in root, as root, in new mount, PID, network
// and UTS namespaces, with env, and returns its combined output. When the script
// ends, the kernel ends every process of its PID namespace with it, which also
// unmounts what devSetup mounted.
func run(t *testing.T, root string, env []string, withDev bool, script string) (string, error) {
	t.Helper()
	if withDev {
		script = devSetup + script
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = "/"
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:       root,
		Cloneflags:   syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS,
		Unshareflags: syscall.CLONE_NEWNS,
		Pdeathsig:    syscall.SIGKILL,
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// checkUnmounted fails the test when anything is still mounted below root: the
// namespaces should have taken every mount with them.
func checkUnmounted(t *testing.T, root string) {
	t.Cleanup(func() {
		f, err := os.Open("/proc/self/mountinfo")
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 4 && strings.HasPrefix(fields[4], root) {
				t.Errorf("%s is still mounted after the test", fields[4])
				_ = syscall.Unmount(fields[4], syscall.MNT_DETACH)
			}
		}
	})
}

func imageEnv(t *testing.T, img v1.Image, extra ...string) []string {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]string{"HOME=/root"}, cf.Config.Env...), extra...)
}

func TestSmokeBusybox(t *testing.T) {
	needRoot(t)
	img := build(t, busyboxName, testSource(t))
	root := extract(t, img)
	checkUnmounted(t, root)
	out, err := run(t, root, imageEnv(t, img), false, `wget --help 2>&1; nc --help 2>&1
for a in `+strings.Join(busyboxApplets, " ")+`; do command -v "$a" || echo "missing $a"; done
id; echo hello | tr a-z A-Z | grep HELLO`)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"Usage: wget", "Usage: nc", "-w SEC", "uid=0(root) gid=0(root)", "HELLO"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "missing") {
		t.Errorf("applets missing:\n%s", out)
	}
}

func TestSmokeNginx(t *testing.T) {
	needRoot(t)
	img := build(t, nginxName, testSource(t))
	root := extract(t, img)
	checkUnmounted(t, root)
	out, err := run(t, root, imageEnv(t, img), true, `nginx -t 2>&1 && nginx -g 'daemon on;' && wget -q -O - http://127.0.0.1/ && nginx -s quit`)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"syntax is ok", "test is successful", "<title>Welcome to nginx!</title>"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSmokePostgres(t *testing.T) {
	needRoot(t)
	img := build(t, postgresName, testSource(t))
	root := extract(t, img)
	checkUnmounted(t, root)

	t.Run("no password", func(t *testing.T) {
		out, err := run(t, root, imageEnv(t, img), true, `docker-entrypoint.sh postgres`)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, "POSTGRES_PASSWORD") || !strings.Contains(out, "POSTGRES_HOST_AUTH_METHOD=trust") {
			t.Errorf("entrypoint without a password: %v, want exit status 1 and an error naming POSTGRES_PASSWORD:\n%s", err, out)
		}
	})

	t.Run("initdb", func(t *testing.T) {
		// --no-sync: the test does not need the data on disk, and fsync costs
		// seconds on a shared machine.
		// The password comes from a file, as from a mounted Secret.
		env := imageEnv(t, img, "POSTGRES_PASSWORD_FILE=/tmp/password", "POSTGRES_DB=app", "POSTGRES_INITDB_ARGS=--no-sync")
		out, err := run(t, root, env, true, `echo s3cret > /tmp/password && docker-entrypoint.sh postgres --version`)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if strings.Contains(out, "WARNING") {
			t.Errorf("initdb warned:\n%s", out)
		}
		for _, want := range []string{"Success. You can now start the database server", "init process complete", "postgres (PostgreSQL) 15"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		data := filepath.Join(root, "var/lib/postgresql/data")
		hba, err := os.ReadFile(filepath.Join(data, "pg_hba.conf"))
		if err != nil || !strings.Contains(string(hba), "\nhost all all all scram-sha-256\n") {
			t.Errorf("pg_hba.conf (%v) lacks the password rule for every host:\n%s", err, hba)
		}
		fi, err := os.Stat(data)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 999 || fi.Mode().Perm() != 0o700 {
			t.Errorf("PGDATA is owned by %d with mode %v, want 999 and 0700", st.Uid, fi.Mode().Perm())
		}
	})

	t.Run("serve", func(t *testing.T) {
		// The data directory initialised above is kept: the entrypoint must start
		// the server on it without initialising again, take password connections
		// over TCP to POSTGRES_DB, and refuse a wrong password.
		env := imageEnv(t, img, "POSTGRES_PASSWORD=s3cret", "POSTGRES_DB=app")
		out, err := run(t, root, env, true, `echo
docker-entrypoint.sh postgres >/tmp/postgres.log 2>&1 &
i=0; until pg_isready -q -h 127.0.0.1; do i=$((i+1)); [ $i -lt 600 ] || break; sleep 0.1; done
PGPASSWORD=s3cret psql -h 127.0.0.1 -U postgres -d app -XAtc 'SELECT current_database()'
PGPASSWORD=wrong psql -h 127.0.0.1 -U postgres -d app -XAtc 'SELECT 1' 2>&1
ok=$?
su postgres -s /bin/sh -c 'pg_ctl stop -m fast -w' >/dev/null
cat /tmp/postgres.log
exit $ok`)
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("the script ended with %v, want the exit status of psql's failed login:\n%s", err, out)
		}
		for _, want := range []string{"\napp\n", "\npsql: error: connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  password authentication failed", "Skipping initialization", "listening on IPv4 address \"0.0.0.0\", port 5432"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
}

// TestSmokeAgnhost runs the host tools the agnhost image carries with their
// libraries, and, when TRANCHE_BIN names a tranche binary (make test-e2e sets it),
// /agnhost itself: upstream's subcommands (entrypoint-tester, netexec) and its errors.
func TestSmokeAgnhost(t *testing.T) {
	needRoot(t)
	src := testSource(t)
	self := os.Getenv("TRANCHE_BIN")
	if self != "" {
		src.SelfExe = self
	}
	img := build(t, agnhostName, src)
	root := extract(t, img)
	checkUnmounted(t, root)
	script := `bash -c 'echo "bash $BASH_VERSION"' && curl --version`
	if self != "" {
		script += ` && { /agnhost no-such-server; echo "exit status $?"; }
/agnhost entrypoint-tester one two
hostname agnhost-pod
/agnhost netexec --http-port=8080 >/dev/null 2>&1 &
i=0; until curl -sf http://127.0.0.1:8080/hostname; do i=$((i+1)); [ $i -lt 300 ] || break; sleep 0.1; done; echo`
	}
	out, err := run(t, root, imageEnv(t, img), true, script)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := []string{"bash 5.", "curl 7."}
	if self != "" {
		want = append(want, `agnhost: unknown command "no-such-server"`, "exit status 1", "[/agnhost entrypoint-tester one two]", "\nagnhost-pod\n")
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}
