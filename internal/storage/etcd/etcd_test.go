package etcd_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/storage"
	"github.com/tranche/tranche/internal/storage/embedded"
	"github.com/tranche/tranche/internal/storage/etcd"
	"github.com/tranche/tranche/internal/storage/storagetest"
)

// etcdBinary is the etcd server Debian's etcd-server package installs (v3.4), used to
// check the client code against a server version other than the embedded one.
const etcdBinary = "/usr/bin/etcd"

// startEmbedded starts an embedded etcd in a fresh temporary directory, stopped at cleanup.
func startEmbedded(tb testing.TB) *embedded.Server {
	tb.Helper()
	srv, err := embedded.Start(context.Background(), embedded.Config{DataDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	return srv
}

// TestEmbeddedConformance runs the suite against one embedded server shared by all cases
// (the suite keeps them apart), each case with its own client on the server's endpoints.
func TestEmbeddedConformance(t *testing.T) {
	storagetest.Run(t, dialer(startEmbedded(t).Endpoints()))
}

// TestExternalConformance runs the suite against one etcd-server process shared by all
// cases, each case with its own client.
func TestExternalConformance(t *testing.T) {
	storagetest.Run(t, dialer([]string{startExternal(t, "1s")}))
}

// dialer returns a store constructor connecting a new client to endpoints, closed at the
// end of the calling test.
func dialer(endpoints []string) func(t *testing.T) storage.Interface {
	return func(t *testing.T) storage.Interface {
		client, err := etcd.Dial(context.Background(), endpoints, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := etcd.New(client)
		t.Cleanup(func() { s.Close() })
		return s
	}
}

func TestExternalProgress(t *testing.T) {
	endpoint := startExternal(t, "100ms")
	client, err := etcd.Dial(context.Background(), []string{endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := etcd.New(client)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rev, err := s.Create(ctx, "/progress/a", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, "/progress/", 0)
	if err != nil {
		t.Fatal(err)
	}
	for ev := range w {
		if ev.Type == storage.Progress {
			if ev.Revision < rev {
				t.Fatalf("progress at revision %d, want >= %d", ev.Revision, rev)
			}
			return
		}
		t.Fatalf("unexpected event %+v", ev)
	}
	t.Fatal("watch closed without a progress event")
}

// startExternal runs Debian's etcd on free loopback ports with a temporary data dir,
// killed at cleanup, and returns its client URL.
func startExternal(t *testing.T, progressInterval string) string {
	t.Helper()
	if _, err := os.Stat(etcdBinary); err != nil {
		t.Fatalf("%s is missing (%v): run `make deps` to install Debian's etcd-server", etcdBinary, err)
	}
	clientAddr := freeAddr(t)
	clientURL := "http://" + clientAddr
	peerURL := "http://" + freeAddr(t)
	dir := t.TempDir()
	var logs bytes.Buffer
	cmd := exec.Command(etcdBinary,
		"--name", "test",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", clientURL,
		"--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL,
		"--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "test="+peerURL,
		"--experimental-watch-progress-notify-interval", progressInterval,
		// A single member elects itself after one election timeout; keep it short.
		"--heartbeat-interval", "10",
		"--election-timeout", "100",
		"--log-level", "warn",
		"--logger", "zap")
	cmd.Stdout = &logs
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", etcdBinary, err)
	}
	waited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(waited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-waited
		if t.Failed() {
			t.Logf("etcd output:\n%s", logs.String())
		}
	})
	// Dialing before etcd listens would cost the client a second of reconnect backoff.
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("tcp", clientAddr)
		if err == nil {
			conn.Close()
			return clientURL
		}
		select {
		case <-waited:
			t.Fatalf("%s exited during start-up:\n%s", etcdBinary, logs.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening on %s after 10s", etcdBinary, clientAddr)
		}
	}
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
