package datapath

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// upTimeout bounds one `tranche up --detach`; downTimeout one `tranche down`.
	upTimeout   = 2 * time.Minute
	downTimeout = time.Minute
)

// trancheBinary is $TRANCHE_BIN, else the repository's bin/tranche (go test runs in the
// package directory).
func trancheBinary() string {
	if p := os.Getenv("TRANCHE_BIN"); p != "" {
		return p
	}
	p, _ := filepath.Abs(filepath.Join("..", "..", "bin", "tranche"))
	return p
}

// needRoot stops the benchmark with a clear message when it cannot make namespaces or
// find the binary.
func needRoot(b *testing.B) string {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Fatal("bench/datapath starts a real cluster (network namespaces): run it as root")
	}
	bin := trancheBinary()
	if _, err := os.Stat(bin); err != nil {
		b.Fatalf("no tranche binary at %s (run make build or set TRANCHE_BIN): %v", bin, err)
	}
	return bin
}

// localCluster is one `tranche up --detach` on a fresh data directory, with a network
// namespace prefix of this process's own so that it runs beside other clusters.
type localCluster struct {
	bin, dir, prefix string
}

// startCluster runs `tranche up --nodes N --detach`; the cluster is taken down
// (down --purge) when the benchmark ends, also when it fails.
func startCluster(b *testing.B, bin, tag string, nodes int) *localCluster {
	b.Helper()
	dir, err := os.MkdirTemp("", "trbench-")
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	c := &localCluster{bin: bin, dir: dir, prefix: fmt.Sprintf("%s%d-", tag, os.Getpid()%1000)}
	b.Cleanup(c.stop)
	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "up", "--nodes", strconv.Itoa(nodes), "--detach", "--data-dir", dir,
		"--listen", listen, "--netns-prefix", c.prefix).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "tranche.log"))
		b.Fatalf("tranche up --nodes %d: %v\n%s\n%s", nodes, err, out, tail(string(log), 30))
	}
	return c
}

// stop runs `tranche down --purge`; it is idempotent.
func (c *localCluster) stop() {
	if c.dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), downTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, c.bin, "down", "--data-dir", c.dir, "--purge").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "tranche down --data-dir %s --purge: %v\n%s\n", c.dir, err, out)
	}
	os.RemoveAll(c.dir)
	c.dir = ""
}

func (c *localCluster) kubeconfig() string { return filepath.Join(c.dir, "kubeconfig") }

// nodeNS is the network namespace of a node of the cluster.
func (c *localCluster) nodeNS(node string) string { return c.prefix + node }

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
