package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// namedLine is the line `tranche up --name NAME` prints with what it chose.
var namedLine = regexp.MustCompile(`(?m)^cluster (\S+): data dir (\S+), network namespaces (\S+)\*, API server https://(\S+), load balancers (\S+)$`)

// TestUpNamedBesideShared is a newcomer's first minutes: `tranche up --name NAME` on a
// fresh data dir beside the shared cluster prints only progress lines (no client-go
// "Warning:" line, no line with "error"), picks a data dir, namespace prefix, API port
// and load-balancer pool of its own, and both clusters answer kubectl; `tranche ls`
// shows it running, then stopped after `tranche down`, and a restart keeps its
// addresses.
func TestUpNamedBesideShared(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	shared := up(t)
	name := fmt.Sprintf("e2e-newcomer-%d", os.Getpid()%100000)
	dataDir := "/var/lib/tranche-" + name
	if _, err := os.Stat(dataDir); err == nil {
		t.Fatalf("%s exists: not a fresh data dir", dataDir)
	}
	// The signal handler and TestMain take it down like an upOwn cluster.
	own := &localCluster{dataDir: dataDir, prefix: "tn-unknown-"}
	ownMu.Lock()
	liveClusters[own] = true
	ownMu.Unlock()
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dataDir, "tranche.log"))
			t.Logf("tranche.log (end):\n%s", tail(string(log), 4000))
		}
		out, err := exec.Command(trancheBin, "down", "--name", name, "--purge").CombinedOutput()
		if err != nil {
			t.Errorf("tranche down --name %s --purge: %v\n%s", name, err, out)
		}
		ownMu.Lock()
		delete(liveClusters, own)
		ownMu.Unlock()
		if left := netnsWithPrefix(own.prefix); len(left) > 0 {
			t.Errorf("tranche down left network namespaces: %v", left)
		}
		if _, err := os.Stat(dataDir); err == nil {
			t.Errorf("tranche down --purge left %s", dataDir)
		}
	})

	for _, bad := range [][]string{{"up", "--name", "Not_A_Label"}, {"up", "--name", name, "--log-level", "chatty"}} {
		out, err := exec.Command(trancheBin, bad...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), `"`+bad[len(bad)-1]+`"`) {
			t.Errorf("tranche %s: %v\n%s", strings.Join(bad, " "), err, out)
		}
	}
	if _, err := os.Stat(dataDir); err == nil {
		t.Fatalf("a refused tranche up made %s", dataDir)
	}

	upstream, err := fakeUpstreamDNS()
	if err != nil {
		t.Fatal(err)
	}
	run := startAttached(t, "up", "--name", name, "--upstream-dns", upstream)
	out := run.waitFor(t, "export KUBECONFIG="+filepath.Join(dataDir, "kubeconfig"), 3*time.Minute)
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "Warning:") || strings.Contains(strings.ToLower(line), "error") {
			t.Errorf("tranche up printed %q; its output:\n%s", line, out)
		}
	}
	m := namedLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("tranche up --name printed no line with its choices:\n%s", out)
	}
	prefix, listen, pool := m[3], m[4], m[5]
	own.prefix = prefix
	if m[1] != name || m[2] != dataDir {
		t.Errorf("name %s, data dir %s; want %s, %s", m[1], m[2], name, dataDir)
	}
	if prefix == "tr-" || strings.HasPrefix(prefix, shared.prefix) || strings.HasPrefix(shared.prefix, prefix) ||
		listen == shared.listen || listen == "127.0.0.1:6443" || pool == "127.0.10.0/24" {
		t.Errorf("the named cluster shares addresses with the default or the shared cluster: prefix %s, API %s, pool %s (shared: %s, %s)",
			prefix, listen, pool, shared.prefix, shared.listen)
	}
	for _, log := range []string{filepath.Join(dataDir, "tranche.log"), filepath.Join(dataDir, "nodes", "tranche-1", "agent.log")} {
		data, _ := os.ReadFile(log)
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "Warning:") {
				t.Errorf("%s has a client-go warning line: %s", log, line)
			}
		}
	}

	named := &server{dataDir: dataDir, listen: listen, kubeconfig: filepath.Join(dataDir, "kubeconfig")}
	// At least n nodes Ready: other tests may take a node of the shared cluster down
	// for a while.
	nodesReady := func(s *server, n int) {
		t.Helper()
		eventually(t, 60*time.Second, fmt.Sprintf("%d nodes Ready on %s", n, s.dataDir), func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "get", "nodes", "--no-headers")
			return len(regexp.MustCompile(`(?m)^tranche-\d+\s+Ready\s`).FindAllString(out, -1)) >= n, out
		})
	}
	nodesReady(named, 1)
	nodesReady(shared.srv, 1)

	lsRow(t, name, "running", listen, named.kubeconfig)
	if sharedRow := lsRow(t, filepath.Base(shared.dataDir), "running", shared.listen, shared.srv.kubeconfig); sharedRow == "" {
		t.Error("tranche ls does not list the shared cluster")
	}

	if out, err := exec.Command(trancheBin, "down", "--name", name).CombinedOutput(); err != nil {
		t.Fatalf("tranche down --name %s: %v\n%s", name, err, out)
	}
	run.wait(t, time.Minute)
	lsRow(t, name, "stopped", listen, named.kubeconfig)
	if left := netnsWithPrefix(prefix); len(left) > 0 {
		t.Errorf("tranche down left network namespaces: %v", left)
	}
	nodesReady(shared.srv, 1)

	// A restart without flags keeps the recorded addresses.
	if out, err := exec.Command(trancheBin, "up", "--name", name, "--detach", "--upstream-dns", upstream).CombinedOutput(); err != nil {
		t.Fatalf("tranche up --name %s --detach again: %v\n%s", name, err, out)
	}
	log, _ := os.ReadFile(filepath.Join(dataDir, "tranche.log"))
	if got := namedLine.FindAllStringSubmatch(string(log), -1); len(got) == 0 || got[len(got)-1][0] != m[0] {
		t.Errorf("the restart chose other addresses: %q, first start: %q", got, m[0])
	}
	lsRow(t, name, "running", listen, named.kubeconfig)
	nodesReady(named, 1)
}

// lsRow finds the row of cluster name in `tranche ls` and checks its state, API URL
// and kubeconfig; it returns the row.
func lsRow(t *testing.T, name, state, listen, kubeconfig string) string {
	t.Helper()
	out, err := exec.Command(trancheBin, "ls").CombinedOutput()
	if err != nil {
		t.Fatalf("tranche ls: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if h := strings.Fields(lines[0]); strings.Join(h, " ") != "NAME STATE NODES API URL KUBECONFIG" {
		t.Fatalf("tranche ls header %q", lines[0])
	}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) == 5 && f[0] == name && f[4] == kubeconfig {
			if f[1] != state || f[3] != "https://"+listen {
				t.Errorf("tranche ls: %q, want %s with API https://%s", line, state, listen)
			}
			return line
		}
	}
	t.Errorf("tranche ls lists no cluster %s with kubeconfig %s:\n%s", name, kubeconfig, out)
	return ""
}

// attached is a tranche command running in the foreground, its standard output and
// error collected together.
type attached struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	done chan error
}

func startAttached(t *testing.T, args ...string) *attached {
	t.Helper()
	a := &attached{cmd: exec.Command(trancheBin, args...), done: make(chan error, 1)}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	a.cmd.Stdout, a.cmd.Stderr = w, w
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			a.mu.Lock()
			a.out.WriteString(sc.Text() + "\n")
			a.mu.Unlock()
		}
		r.Close()
		a.done <- a.cmd.Wait()
	}()
	t.Cleanup(func() {
		if a.cmd.ProcessState == nil {
			_ = a.cmd.Process.Kill()
		}
	})
	return a
}

func (a *attached) output() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.out.String()
}

// waitFor waits until the output holds want and returns the output up to there.
func (a *attached) waitFor(t *testing.T, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if out := a.output(); strings.Contains(out, want) {
			return out[:strings.Index(out, want)+len(want)]
		}
		select {
		case err := <-a.done:
			a.done <- err
			t.Fatalf("%v ended (%v) before printing %q:\n%s", a.cmd.Args, err, want, a.output())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("%v did not print %q within %s:\n%s", a.cmd.Args, want, timeout, a.output())
	return ""
}

// wait waits until the command has exited and fails unless it exited cleanly.
func (a *attached) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case err := <-a.done:
		a.done <- err
		if err != nil {
			t.Errorf("%v: %v\n%s", a.cmd.Args, err, a.output())
		}
	case <-time.After(timeout):
		t.Fatalf("%v still runs %s after tranche down", a.cmd.Args, timeout)
	}
}
