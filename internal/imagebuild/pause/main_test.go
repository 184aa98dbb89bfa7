package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain runs the program itself when the test binary is started as it (see run).
func TestMain(m *testing.M) {
	if os.Getenv("PAUSE_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// syncBuffer is a buffer exec's copying goroutine writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// run starts this test binary as the pause program.
func run(t *testing.T, args ...string) (*exec.Cmd, *syncBuffer, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "PAUSE_TEST_MAIN=1")
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &stdout, &stderr
}

func TestVersion(t *testing.T) {
	cmd, stdout, _ := run(t, "-v")
	if err := cmd.Wait(); err != nil || stdout.String() != "pause.go version: 3.10\n" {
		t.Errorf("pause -v: %q (%v), want the version line", stdout, err)
	}
}

// TestSignals: SIGINT and SIGTERM end it with status 0 and a line on stderr, as
// upstream's pause; other signals it handles (SIGCHLD) do not.
func TestSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, _, stderr := run(t)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// Until its handlers are installed a signal would kill it the default
			// way: wait for the warning it prints first (it is not PID 1 here).
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(stderr.String(), "Warning: pause should be the first process") {
				if time.Now().After(deadline) {
					t.Fatalf("no start-up warning: %q", stderr)
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
			if err := cmd.Process.Signal(syscall.SIGCHLD); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				t.Fatalf("pause ended on SIGCHLD: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("pause ended with %v on %s, want status 0", err, sig)
				}
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("pause still running 10 s after %s", sig)
			}
			if want := "Shutting down, got signal: " + sig.String(); !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr %q, want %q", stderr, want)
			}
		})
	}
}
