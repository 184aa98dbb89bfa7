package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// idleFor is how long the server sits idle after readiness before RSS is read, so
	// that start-up garbage has had a chance to be collected and returned.
	idleFor = 5 * time.Second
	// readyTimeout bounds the server's start-up.
	readyTimeout = time.Minute
	// stopTimeout bounds a graceful stop before the process is killed.
	stopTimeout = 15 * time.Second
)

// benchIdleRSS starts `tranche server` on a fresh data directory, waits until /readyz
// answers, lets it idle for idleFor and reads its resident set from /proc.
func benchIdleRSS(b *testing.B, rp *report) {
	bin := trancheBinary()
	if _, err := os.Stat(bin); err != nil {
		b.Skipf("no tranche binary at %s (run make build or set TRANCHE_BIN): %v", bin, err)
	}
	var m memory
	b.ResetTimer()
	for range b.N {
		var err error
		if m, err = idleRSS(bin); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(m.rss), "rss-bytes")
	b.ReportMetric(float64(m.anon), "anon-bytes")
	b.ReportMetric(float64(m.file), "file-bytes")
	b.ReportMetric(float64(m.hwm), "peak-rss-bytes")
	rp.Set(row{Metric: "idle RSS of tranche server (ready + 5 s idle)", Ours: mb(m.rss),
		Reference: fmt.Sprintf("goal %s", mb(goalIdleRSS)), Ratio: ratio(float64(m.rss), goalIdleRSS), Goal: "<= 1"})
	rp.Note("idle RSS %s = private %s (Go heap, stacks, etcd buffers) + file-backed %s (pages of the binary and mapped files); peak %s",
		mb(m.rss), mb(m.anon), mb(m.file), mb(m.hwm))
}

// trancheBinary is $TRANCHE_BIN, else the repository's bin/tranche (go test runs in the
// package directory).
func trancheBinary() string {
	if p := os.Getenv("TRANCHE_BIN"); p != "" {
		return p
	}
	p, _ := filepath.Abs(filepath.Join("..", "..", "bin", "tranche"))
	return p
}

// idleRSS runs one server and returns its memory after it has idled.
func idleRSS(bin string) (memory, error) {
	srv, err := startServerProcess(bin)
	if err != nil {
		return memory{}, err
	}
	defer srv.stop()
	select {
	case <-srv.exited:
		return memory{}, fmt.Errorf("tranche server exited while idle: %v\n%s", srv.waitErr, srv.logs())
	case <-time.After(idleFor):
	}
	return procMemory(srv.cmd.Process.Pid)
}

// serverProcess is a `tranche server` on a fresh data directory.
type serverProcess struct {
	cmd *exec.Cmd
	dir string
	// kubeconfig is the admin kubeconfig it wrote.
	kubeconfig string
	// exited is closed once the process has been waited for; waitErr is then its status.
	exited  chan struct{}
	waitErr error
}

// startServerProcess starts bin's server on a fresh data directory and waits until it
// is ready; stop ends it and removes the directory.
func startServerProcess(bin string) (*serverProcess, error) {
	dir, err := os.MkdirTemp("", "trs-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close()
	srv := &serverProcess{dir: dir, kubeconfig: filepath.Join(dir, "kubeconfig"), exited: make(chan struct{})}
	srv.cmd = exec.Command(bin, "server", "--data-dir", dir, "--listen", net.JoinHostPort("127.0.0.1", port), "--log-level", "warn")
	srv.cmd.Stdout, srv.cmd.Stderr = logFile, logFile
	if err := srv.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		srv.waitErr = srv.cmd.Wait()
		close(srv.exited)
	}()
	if err := waitReady(srv.kubeconfig, srv.exited); err != nil {
		if errors.Is(err, errExited) {
			err = fmt.Errorf("%w: %v", err, srv.waitErr)
		}
		logs := srv.logs()
		srv.stop()
		return nil, fmt.Errorf("tranche server: %w\n%s", err, logs)
	}
	return srv, nil
}

// logs is the end of the server's log.
func (srv *serverProcess) logs() string {
	data, _ := os.ReadFile(filepath.Join(srv.dir, "server.log"))
	return tail(string(data), 20)
}

// stop ends the server and removes its data directory.
func (srv *serverProcess) stop() {
	stopServer(srv.cmd, srv.exited)
	os.RemoveAll(srv.dir)
}

// errExited says the server exited before it was ready.
var errExited = errors.New("exited before ready")

// waitReady polls until the kubeconfig exists and GET /readyz with its admin credentials
// succeeds, the server exits (errExited), or readyTimeout passes.
func waitReady(kubeconfig string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		select {
		case <-exited:
			return errExited
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %v", readyTimeout, last)
		case <-tick.C:
		}
		if _, err := os.Stat(kubeconfig); err != nil {
			last = err
			continue
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			last = err
			continue
		}
		cfg.Timeout = 2 * time.Second
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("client from %s: %w", kubeconfig, err)
		}
		if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
			last = err
			continue
		}
		return nil
	}
}

// stopServer sends SIGTERM to the server it started, and SIGKILL if it has not exited
// after stopTimeout.
func stopServer(cmd *exec.Cmd, exited <-chan struct{}) {
	select {
	case <-exited:
		return
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		_ = cmd.Process.Kill()
	}
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// memory is a process's resident set as /proc/PID/status reports it, in bytes.
type memory struct {
	rss  int64 // VmRSS: all resident pages
	hwm  int64 // VmHWM: the highest VmRSS so far
	anon int64 // RssAnon: heap, stacks and other private memory
	file int64 // RssFile: resident pages of mapped files (mostly the binary itself)
}

// procMemory reads pid's memory figures from /proc (given there in kB).
func procMemory(pid int) (memory, error) {
	var m memory
	fields := map[string]*int64{"VmRSS": &m.rss, "VmHWM": &m.hwm, "RssAnon": &m.anon, "RssFile": &m.file}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		dst := fields[k]
		if !ok || dst == nil {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return m, fmt.Errorf("/proc/%d/status %s %q: %w", pid, k, v, err)
		}
		*dst = kb << 10
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	if m.rss == 0 {
		return m, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	return m, nil
}

// freePort asks the kernel for an unused loopback port. Another process could take it
// before the server binds it; the server then fails to start and says so.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// mb formats bytes in decimal megabytes, the unit the RSS goal is stated in.
func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
