package embedded_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tranche/tranche/internal/storage/embedded"
)

func TestRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	srv, err := embedded.Start(ctx, embedded.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := "unix://" + filepath.Join(dir, "etcd.sock")
	if got := srv.Endpoints(); len(got) != 1 || got[0] != want {
		t.Fatalf("Endpoints() = %v, want [%s]", got, want)
	}
	put, err := srv.Client().Put(ctx, "/kept", "value")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "etcd.sock")); !os.IsNotExist(err) {
		t.Fatalf("client socket left behind after Close: %v", err)
	}

	start := time.Now()
	srv, err = embedded.Start(ctx, embedded.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Logf("restart took %s", time.Since(start))
	resp, err := srv.Client().Get(ctx, "/kept")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "value" || resp.Kvs[0].ModRevision != put.Header.Revision {
		t.Fatalf("after restart /kept = %v, want value at revision %d", resp.Kvs, put.Header.Revision)
	}
	// Auto-compaction is off: the revision before the write is still readable.
	if _, err := srv.Client().Get(ctx, "/kept", clientv3.WithRev(put.Header.Revision-1)); err != nil {
		t.Fatalf("read at an old revision after restart: %v", err)
	}
}

func TestSecondServerOnOneDataDir(t *testing.T) {
	dir := t.TempDir()
	srv, err := embedded.Start(context.Background(), embedded.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, err := embedded.Start(context.Background(), embedded.Config{DataDir: dir}); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second Start: %v, want an already-running error", err)
	}
	if _, err := srv.Client().Put(context.Background(), "/still", "served"); err != nil {
		t.Fatalf("first server after a refused second Start: %v", err)
	}
}

func TestDataDirTooLongForSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	_, err := embedded.Start(context.Background(), embedded.Config{DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), "too long for a unix socket") {
		t.Fatalf("Start: %v, want a path-too-long error", err)
	}
}
