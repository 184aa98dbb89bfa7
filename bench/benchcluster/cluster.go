// Package benchcluster starts the local cluster a benchmark measures: one
// `tranche up --detach` on a fresh data directory, with a network-namespace prefix and
// an API listener of its own so that it runs beside other clusters, taken down when the
// benchmark ends, also when it fails.
package benchcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/loopback"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// upTimeout bounds one `tranche up --detach`; downTimeout one `tranche down`.
	upTimeout   = 2 * time.Minute
	downTimeout = time.Minute
)

// Binary is $TRANCHE_BIN, else the repository's bin/tranche (go test runs benchmarks in
// their package directory, two levels below the repository).
func Binary() string {
	if p := os.Getenv("TRANCHE_BIN"); p != "" {
		return p
	}
	p, _ := filepath.Abs(filepath.Join("..", "..", "bin", "tranche"))
	return p
}

// NeedRoot stops b with a clear message when it cannot make network namespaces or find
// the binary; what names the benchmark in that message. It returns the binary.
func NeedRoot(b testing.TB, what string) string {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Fatalf("%s starts a real cluster (network namespaces): run it as root", what)
	}
	bin := Binary()
	if _, err := os.Stat(bin); err != nil {
		b.Fatalf("no tranche binary at %s (run make build or set TRANCHE_BIN): %v", bin, err)
	}
	return bin
}

// Cluster is a running `tranche up --detach`.
type Cluster struct {
	// Bin is the tranche binary, Dir the data directory, Prefix the network namespace
	// prefix, Listen the API server's host address.
	Bin, Dir, Prefix, Listen string
	// PID is the `tranche up` process that keeps running in the background.
	PID int
	// UpTime is how long `tranche up --detach` took to return (all nodes Ready and DNS
	// answering).
	UpTime time.Duration
}

var readyPID = regexp.MustCompile(`cluster ready \(pid (\d+),`)

// Start runs `tranche up --nodes N --detach` with tag (a few letters naming the
// benchmark) in its namespace prefix, and extra flags after the standard ones.
func Start(b testing.TB, bin, tag string, nodes int, extra ...string) *Cluster {
	b.Helper()
	dir, err := os.MkdirTemp("", "trbench-")
	if err != nil {
		b.Fatal(err)
	}
	listen, err := loopback.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	c := &Cluster{Bin: bin, Dir: dir, Prefix: fmt.Sprintf("%s%d-", tag, os.Getpid()%1000), Listen: listen}
	b.Cleanup(c.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	args := append([]string{"up", "--nodes", strconv.Itoa(nodes), "--detach", "--data-dir", dir,
		"--listen", c.Listen, "--netns-prefix", c.Prefix}, extra...)
	start := time.Now()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	c.UpTime = time.Since(start)
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "tranche.log"))
		b.Fatalf("tranche up --nodes %d: %v\n%s\n%s", nodes, err, out, Tail(string(log), 30))
	}
	m := readyPID.FindSubmatch(out)
	if m == nil {
		b.Fatalf("tranche up did not say which process runs the cluster:\n%s", out)
	}
	c.PID, _ = strconv.Atoi(string(m[1]))
	return c
}

// Stop runs `tranche down --purge`; it is idempotent.
func (c *Cluster) Stop() {
	if c.Dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), downTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, c.Bin, "down", "--data-dir", c.Dir, "--purge").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "tranche down --data-dir %s --purge: %v\n%s\n", c.Dir, err, out)
	}
	os.RemoveAll(c.Dir)
	c.Dir = ""
}

// Kubeconfig is the admin kubeconfig `tranche up` wrote.
func (c *Cluster) Kubeconfig() string { return filepath.Join(c.Dir, "kubeconfig") }

// NodeNS is the network namespace of a node of the cluster.
func (c *Cluster) NodeNS(node string) string { return c.Prefix + node }

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Client is a clientset for c's API as its admin, allowed 1,000 requests per second (a
// benchmark's own client must not be what it measures).
func (c *Cluster) Client(b testing.TB) kubernetes.Interface {
	b.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return client
}
