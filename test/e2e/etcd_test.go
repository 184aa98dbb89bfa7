package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/netns"
)

// etcdBin is Debian's etcd (package etcd-server).
const etcdBin = "/usr/bin/etcd"

// startEtcd runs a one-member etcd on free 127.0.0.1 ports with its data in a temporary
// directory, waits until it answers, and kills it and removes the data when t ends. It
// returns the client URL.
func startEtcd(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(etcdBin); err != nil {
		t.Fatalf("%s is required (Debian package etcd-server; `make deps` installs it): %v", etcdBin, err)
	}
	dir := t.TempDir()
	client, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	peer, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	clientURL, peerURL := "http://"+client, "http://"+peer
	var logs bytes.Buffer
	cmd := exec.Command(etcdBin, "--name", "e2e", "--data-dir", dir,
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "e2e="+peerURL, "--initial-cluster-state", "new")
	w := &lockedWriter{mu: &sync.Mutex{}, w: &logs}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := netns.StartHere(cmd); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("--- etcd log (last 2 KiB) ---\n%s", tail(w.String(), 2048))
		}
	})
	eventually(t, 30*time.Second, "etcd answering on "+client, func() (bool, string) {
		select {
		case <-done:
			t.Fatalf("etcd exited (%s): %s", cmd.ProcessState, w.String())
		default:
		}
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(clientURL + "/health")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(body), `"health":"true"`), string(body)
	})
	return clientURL
}

// String returns what was written so far.
func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
