// Package e2e drives bin/tranche with the real kubectl and client-go, as root.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tranche/tranche/internal/loopback"
	"github.com/tranche/tranche/internal/netns"
	"github.com/tranche/tranche/internal/testutil"
)

// server is one running `tranche server` process.
type server struct {
	dataDir    string
	listen     string
	kubeconfig string
	args       []string
	cmd        *exec.Cmd
	done       chan struct{}
	logs       *bytes.Buffer
	mu         sync.Mutex
}

var (
	shared     *server
	trancheBin string
	kubectlBin string
	// runID tells this run's namespace prefixes from those of another run on the host:
	// E2E_RUN_ID when set (0-999: hack/test-e2e.sh gives each shard its own, and
	// removes what a killed shard left with it), else the process id modulo 1000.
	runID int
)

func TestMain(m *testing.M) {
	runID = os.Getpid() % 1000
	if id, err := strconv.Atoi(os.Getenv("E2E_RUN_ID")); err == nil && id >= 0 && id < 1000 {
		runID = id
	}
	trancheBin = os.Getenv("TRANCHE_BIN")
	if trancheBin == "" {
		fmt.Fprintln(os.Stderr, "e2e: TRANCHE_BIN is not set; run the e2e tests with `make test` (it builds bin/tranche first)")
		os.Exit(1)
	}
	var err error
	if kubectlBin, err = exec.LookPath("kubectl"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: kubectl (v1.32) is required on PATH; see `make deps`")
		os.Exit(1)
	}
	shared, err = startServer(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting tranche server:", err)
		os.Exit(1)
	}
	// Stop the cluster also when the test binary is interrupted.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		// Killed from outside (hack/test-e2e.sh's timeout): what was running, then
		// the clusters stopped.
		fmt.Fprintln(os.Stderr, "e2e: terminated; the goroutines then:")
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		fmt.Fprintf(os.Stderr, "--- tranche down ---\n%s\n", stopLocalCluster())
		shared.stop()
		os.RemoveAll(shared.dataDir)
		os.Exit(1)
	}()
	code := m.Run()
	if out := stopLocalCluster(); code != 0 && out != "" {
		fmt.Fprintf(os.Stderr, "--- tranche down ---\n%s\n", out)
	}
	shared.stop()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- tranche server log (last 4 KiB) ---\n%s\n", tail(shared.logs.String(), 4096))
	}
	os.RemoveAll(shared.dataDir)
	os.Exit(code)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// freePort returns a loopback address nobody listens on now.
func freePort() (string, error) { return loopback.FreePort() }

// startServer runs tranche server on a fresh data dir (short: etcd's unix socket path
// must fit in 108 bytes) and waits until it is ready.
func startServer(extra []string) (*server, error) {
	dir, err := os.MkdirTemp("", "tre2e-")
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &server{dataDir: dir, listen: addr, kubeconfig: filepath.Join(dir, "kubeconfig"),
		args: append([]string{"server", "--data-dir", dir, "--listen", addr, "--log-level", "warn"}, extra...)}
	return s, s.start()
}

func (s *server) start() error {
	return s.run(exec.Command(trancheBin, s.args...), "tranche server", 60*time.Second)
}

// run starts cmd as s's process, its output in s's logs, and waits up to within until
// s answers /readyz; what names the process in errors. A process not ready in time is
// stopped.
func (s *server) run(cmd *exec.Cmd, what string, within time.Duration) error {
	s.mu.Lock()
	s.logs = &bytes.Buffer{}
	s.mu.Unlock()
	s.cmd = cmd
	w := &lockedWriter{mu: &s.mu, w: s.logs}
	s.cmd.Stdout, s.cmd.Stderr = w, w
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := netns.StartHere(s.cmd); err != nil {
		return err
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("%s exited (%s): %s", what, s.cmd.ProcessState, s.logText())
		default:
		}
		if _, err := os.Stat(s.kubeconfig); err == nil {
			out, err := exec.Command(kubectlBin, "--kubeconfig", s.kubeconfig, "get", "--raw", "/readyz").CombinedOutput()
			if err == nil && strings.TrimSpace(string(out)) == "ok" {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.stop()
	return fmt.Errorf("%s not ready within %s: %s", what, within, s.logText())
}

// logText is what the server wrote so far.
func (s *server) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// restConfig is the admin client configuration of s.
func (s *server) restConfig(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (s *server) client(t testing.TB) kubernetes.Interface {
	t.Helper()
	return kubernetes.NewForConfigOrDie(s.restConfig(t))
}

// kubectl runs kubectl against s and returns stdout, stderr and the error.
func (s *server) kubectl(t testing.TB, stdin string, args ...string) (string, string, error) {
	t.Helper()
	return runKubectl(60*time.Second, nil, s.kubeconfig, stdin, args...)
}

// runKubectl runs kubectl with kubeconfig and args, through the command wrap (such as
// nsenter into a machine's namespace) when it is not empty, with stdin when it is not
// empty, for at most timeout, and returns stdout, stderr and the error.
func runKubectl(timeout time.Duration, wrap []string, kubeconfig, stdin string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	argv := append(append(slices.Clone(wrap), kubectlBin, "--kubeconfig", kubeconfig), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "KUBECTL_KUBERC=false")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// must runs kubectl and fails the test when it fails.
func (s *server) must(t testing.TB, args ...string) string {
	t.Helper()
	out, errOut, err := s.kubectl(t, "", args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// namespace creates a namespace for one test and deletes it afterwards.
func (s *server) namespace(t testing.TB) string {
	t.Helper()
	name := "e2e-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-")
	s.must(t, "create", "namespace", name)
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "namespace", name, "--wait=false") })
	return name
}

// eventually polls cond every 100ms (each poll may run kubectl) until it
// holds or the deadline passes, failing with cond's last described state.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	testutil.EventuallyEvery(t, timeout, 100*time.Millisecond, what, cond)
}
