package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain makes the test binary the program Main runs when it is started as
// .../agnhost, .../pause or .../nc (the tests below start it so, through a link), as
// cmd/tranche's main does: upstream's agnhost subcommands are programs that exit the
// process and handle signals, so they are tested as processes.
func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case "agnhost", "agnhost-2", "nnp", "pause", "nc":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code, _ := Main(ctx, os.Args, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// program returns a command that starts this test binary as name (agnhost or pause)
// with args, writing the upstream pause's termination message into the test's
// directory rather than /dev/termination-log.
func program(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	link := filepath.Join(dir, name)
	if err := os.Symlink(self, link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link, args...)
	cmd.Env = append(os.Environ(), "TERMINATION_MESSAGE_PATH="+filepath.Join(dir, "termination-log"))
	return cmd
}

func TestMainOtherNames(t *testing.T) {
	for _, argv := range [][]string{{"/tranche", "dns"}, {"tranche"}, nil} {
		if code, handled := Main(context.Background(), argv, io.Discard, io.Discard); handled || code != 0 {
			t.Errorf("Main(%q) = %d, %v; want 0, false", argv, code, handled)
		}
	}
}

// TestAgnhostRunsUpstream runs subcommands that exit by themselves: upstream's, the
// one left out, tranche's own, and errors.
func TestAgnhostRunsUpstream(t *testing.T) {
	hosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	firstHostsLine, _, _ := strings.Cut(strings.TrimSpace(string(hosts)), "\n")
	tests := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{args: []string{"etc-hosts"}, stdout: firstHostsLine},
		{args: []string{"entrypoint-tester", "a", "b"}, stdout: "agnhost entrypoint-tester a b]"},
		{args: []string{"--version"}, stdout: "agnhost version k8s.io/kubernetes "},
		{args: []string{"--help"}, stdout: "porter "},
		{args: []string{"nope"}, code: 1, stderr: `agnhost: unknown command "nope" for "agnhost"`},
		{args: []string{"external-metrics", "--help"}, stdout: "external-metrics"},
		{args: []string{"echo", "--port=x"}, code: 1, stderr: `agnhost: echo: invalid value "x" for flag -port`},
		{args: []string{"netexec", "--no-such-flag"}, code: 1, stderr: "unknown flag: --no-such-flag"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := program(t, "agnhost", tc.args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := cmd.ProcessState.ExitCode()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d and them to contain %q, %q",
					code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

// started starts cmd and returns once its output has a line containing want; the
// test's cleanup kills it if it still runs.
func startedWith(t *testing.T, cmd *exec.Cmd, want string) *bytes.Buffer {
	t.Helper()
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = w.Close()
	})
	seen := make(chan struct{})
	var out bytes.Buffer
	go func() {
		sc := bufio.NewScanner(r)
		found := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if !found && strings.Contains(sc.Text(), want) {
				found = true
				close(seen)
			}
		}
	}()
	select {
	case <-seen:
	case <-time.After(10 * time.Second):
		t.Fatalf("%v printed no line with %q", cmd.Args, want)
	}
	return &out
}

// signalled sends SIGTERM to cmd and returns how it ended.
func signalled(t *testing.T, cmd *exec.Cmd) *os.ProcessState {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%v did not end after SIGTERM", cmd.Args)
	}
	return cmd.ProcessState
}

func TestAgnhostSignals(t *testing.T) {
	t.Run("upstream pause exits 2 on SIGTERM", func(t *testing.T) {
		cmd := program(t, "agnhost", "pause")
		startedWith(t, cmd, "Signals registered")
		if st := signalled(t, cmd); st.ExitCode() != 2 {
			t.Errorf("agnhost pause ended %v, want exit status 2 as upstream's", st)
		}
		msg, err := os.ReadFile(filepath.Join(filepath.Dir(cmd.Path), "termination-log"))
		if err != nil || !strings.Contains(string(msg), `exiting because of signal "terminated"`) {
			t.Errorf("termination message %q, %v", msg, err)
		}
	})
	t.Run("a subcommand without handlers dies of SIGTERM", func(t *testing.T) {
		cmd := program(t, "agnhost", "logs-generator", "--log-lines-total=1000", "--run-duration=1000s")
		startedWith(t, cmd, " /api/v1/namespaces/")
		st := signalled(t, cmd)
		if ws, ok := st.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Errorf("logs-generator ended %v, want killed by SIGTERM (tranche's handler reset)", st)
		}
	})
	t.Run("echo stops on SIGTERM", func(t *testing.T) {
		cmd := program(t, "agnhost", "echo")
		startedWith(t, cmd, "No ports to echo on")
		if st := signalled(t, cmd); st.ExitCode() != 0 {
			t.Errorf("agnhost echo ended %v, want exit status 0", st)
		}
	})
	t.Run("pause is tranche's", func(t *testing.T) {
		cmd := program(t, "pause", "ignored")
		startedWith(t, cmd, "Paused")
		if st := signalled(t, cmd); st.ExitCode() != 0 {
			t.Errorf("pause ended %v, want exit status 0", st)
		}
	})
}

// TestAgnhostNames: every name the CLI offers runs something.
func TestAgnhostNames(t *testing.T) {
	names := agnhostNames()
	for _, want := range []string{"netexec", "porter", "liveness", "etc-hosts", "webhook", "crd-conversion-webhook", "external-metrics", "echo"} {
		if !strings.Contains(fmt.Sprint(names), want) {
			t.Errorf("agnhostNames() = %v, lacks %s", names, want)
		}
	}
}

// TestAgnhostSecondName: upstream's image also runs as /agnhost-2, and the
// entrypoint-tester prints the name it was started as.
func TestAgnhostSecondName(t *testing.T) {
	var stdout bytes.Buffer
	cmd := program(t, "agnhost-2", "entrypoint-tester", "override")
	cmd.Stdout = &stdout
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if got := stdout.String(); !strings.Contains(got, "agnhost-2 entrypoint-tester override]") {
		t.Errorf("output %q", got)
	}
}

// TestNonewprivsProgram: started as nnp (the nonewprivs image's program) the binary
// prints its effective uid, as upstream's does.
func TestNonewprivsProgram(t *testing.T) {
	var stdout bytes.Buffer
	cmd := program(t, "nnp")
	cmd.Stdout = &stdout
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if got, want := stdout.String(), fmt.Sprintf("Effective uid: %d\n", os.Geteuid()); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}
