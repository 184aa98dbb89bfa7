package runtime

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/tranche/tranche/internal/agent/status"
	"github.com/tranche/tranche/internal/testutil"
)

func waitContains(t *testing.T, what string, buf *testutil.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(buf.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q does not contain %q", what, buf.String(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func terminated(name string) func(status.PodView) bool {
	return func(v status.PodView) bool {
		c, ok := v.Containers[name]
		return ok && c.State.Terminated != nil
	}
}

// TestAttachAndExecStream: attach to a container's stdin (stdinOnce) and to its
// terminal, exec with a terminal, and a cancelled exec killing its command.
func TestAttachAndExecStream(t *testing.T) {
	e := newTestEnv(t)
	defer e.killAll()

	piped := makePod("piped", func(p *v1.Pod) {
		p.Spec.RestartPolicy = v1.RestartPolicyNever
		p.Spec.Containers[0].Command = []string{"sh", "-c", "read line; echo got-$line"}
		p.Spec.Containers[0].Stdin, p.Spec.Containers[0].StdinOnce = true, true
	})
	e.syncUntil(piped, "running", 10*time.Second, running("c"))
	var out testutil.Buffer
	if err := e.m.Attach(context.Background(), piped.UID, "c", Streams{Stdin: strings.NewReader("hello\n"), Stdout: &out, Stderr: &out}); err != nil {
		t.Fatal(err)
	}
	waitContains(t, "attached output", &out, "got-hello\n")
	e.syncUntil(piped, "terminated", 10*time.Second, terminated("c"))

	tty := makePod("tty", func(p *v1.Pod) {
		p.Spec.Containers[0].Command = []string{"sh"}
		p.Spec.Containers[0].Stdin, p.Spec.Containers[0].TTY = true, true
	})
	e.syncUntil(tty, "running", 10*time.Second, running("c"))
	inR, inW := io.Pipe()
	var term testutil.Buffer
	attached := make(chan error, 1)
	go func() {
		attached <- e.m.Attach(context.Background(), tty.UID, "c", Streams{Stdin: inR, Stdout: &term, TTY: true})
	}()
	// Attaching takes a moment; the shell answers once input reaches it.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(term.String(), "tty-5") {
		if time.Now().After(deadline) {
			t.Fatalf("terminal output %q has no tty-5", term.String())
		}
		_, _ = io.WriteString(inW, "echo tty-$((2+3))\n")
		time.Sleep(200 * time.Millisecond)
	}
	_, _ = io.WriteString(inW, "exit\n")
	select {
	case err := <-attached:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("attach did not end when the shell exited")
	}
	inW.Close()
	logPath, err := e.m.LogPath(tty.UID, "c", false)
	if err != nil {
		t.Fatal(err)
	}
	e.syncUntil(tty, "restarted or terminated", 10*time.Second, func(v status.PodView) bool { return v.Containers["c"].RestartCount > 0 || terminated("c")(v) })
	if data, _ := os.ReadFile(logPath); !strings.Contains(string(data), "tty-5") {
		t.Fatalf("the terminal's output is not in the log:\n%s", data)
	}

	box := makePod("box", nil)
	e.syncUntil(box, "running", 10*time.Second, running("c"))
	var ttyOut testutil.Buffer
	code, err := e.m.ExecStream(context.Background(), box.UID, "c", []string{"sh", "-c", "tty && exit 4"}, Streams{Stdout: &ttyOut, TTY: true})
	if err != nil || code != 4 || !strings.Contains(ttyOut.String(), "/dev/pts/") {
		t.Fatalf("exec with a terminal: code %d, %v, output %q", code, err, ttyOut.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.m.ExecStream(ctx, box.UID, "c", []string{"sleep", "4321"}, Streams{Stdout: io.Discard})
		done <- err
	}()
	deadline = time.Now().Add(10 * time.Second)
	for len(sleepers("4321")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("sleep 4321 never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled exec: %v", err)
	}
	if left := sleepers("4321"); len(left) != 0 {
		t.Fatalf("processes left by a cancelled exec: %v", left)
	}
	if _, err := e.m.ExecStream(context.Background(), piped.UID, "c", []string{"true"}, Streams{}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("exec in a terminated container: %v, want ErrNotRunning", err)
	}
}

// sleepers lists the processes whose command line is "sleep ARG".
func sleepers(arg string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, en := range entries {
		data, err := os.ReadFile("/proc/" + en.Name() + "/cmdline")
		if err == nil && string(data) == "sleep\x00"+arg+"\x00" {
			out = append(out, en.Name())
		}
	}
	return out
}
