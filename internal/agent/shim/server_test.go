package shim

import (
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/tranche/tranche/internal/agent/runc"
)

// TestStartTTY starts a container with a terminal and stdin through the shim's API, as
// the agent does for a pod's tty container: runc makes the container's terminal, of the
// spec's size, and hands its master over the console socket; the container's stdin and
// stdout are that terminal, an attached client's input reaches it and is echoed once (by
// the container's terminal alone), its output reaches the client and the log, and the
// shim reports the container's exit code. It needs root, runc and busybox-static.
func TestStartTTY(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (runc, cgroups, namespaces); make test runs as root")
	}
	bin, err := runc.Find()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b := make([]byte, 4)
	rand.Read(b)
	prefix := "trs" + hex.EncodeToString(b)
	id := prefix + "-tty"
	rt := &runc.Runtime{Binary: bin, Root: filepath.Join(dir, "runc")}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	l, err := Listen(filepath.Join(dir, "shim"))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- (&Server{Runc: rt}).Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serving: %v", err)
		}
		if err := rt.Delete(context.Background(), id); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := runc.RemovePod("/" + prefix); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	bundle := filepath.Join(dir, "bundle")
	spec := ttySpec(busyboxRootfs(t, filepath.Join(dir, "rootfs"), "sh", "stty"),
		[]string{"sh", "-c", "read line; test -t 0 && test -t 1 && echo on-a-tty $line; stty size; exit 3"})
	spec.Process.ConsoleSize = &specs.Box{Height: 40, Width: 100}
	spec.Linux.CgroupsPath = "/" + prefix + "/" + id
	if err := runc.WriteBundle(bundle, spec); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "0.log")
	c := NewClient(filepath.Join(dir, "shim"))
	if _, err := c.Start(ctx, StartRequest{ID: id, Bundle: bundle, LogPath: logPath,
		Logs: LogPolicy{MaxSize: DefaultLogMaxSize, MaxFiles: DefaultLogMaxFiles}, TTY: true, Stdin: true}); err != nil {
		t.Fatal(err)
	}
	// The container waits for its input, so the client, attached before sending it,
	// sees everything the terminal writes: the echo, with \r made \n by the terminal's
	// input and every \n written as \r\n.
	var term bytes.Buffer
	if err := c.Attach(ctx, id, strings.NewReader("typed\r"), &term, nil, nil); err != nil {
		t.Fatal(err)
	}
	if want := "typed\r\non-a-tty typed\r\n40 100\r\n"; term.String() != want {
		t.Errorf("terminal got %q, want %q", term.String(), want)
	}
	got, err := c.Wait(ctx, id)
	if err != nil || !got.Exited || got.ExitCode != 3 {
		t.Errorf("Wait = %+v, %v; want exited with code 3", got, err)
	}
	if log, err := os.ReadFile(logPath); err != nil || !strings.Contains(string(log), " stdout F on-a-tty typed") {
		t.Errorf("log %q (%v): want the terminal's output as stdout", log, err)
	}
}

// busyboxRootfs makes a root file system of the static busybox with the applets named.
func busyboxRootfs(t *testing.T, dir string, applets ...string) string {
	t.Helper()
	const busybox = "/bin/busybox"
	f, err := elf.Open(busybox)
	if err != nil {
		t.Fatalf("%s: %v (install Debian's busybox-static)", busybox, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("%s is dynamically linked: install Debian's busybox-static", busybox)
		}
	}
	for _, d := range []string{"bin", "proc", "dev", "sys"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range applets {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ttySpec is a container with a terminal running args, in namespaces of its own
// (network included: empty), on a read-only root, without capabilities.
func ttySpec(rootfs string, args []string) *specs.Spec {
	return &specs.Spec{
		Version: "1.0.2",
		Root:    &specs.Root{Path: rootfs, Readonly: true},
		Process: &specs.Process{Terminal: true, Args: args, Env: []string{"PATH=/bin"}, Cwd: "/", NoNewPrivileges: true},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace},
			},
		},
	}
}
