package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/testutil"
)

// TestUpDetachInterrupted: `tranche up --detach` interrupted (SIGTERM, as Ctrl-C or a
// test runner's timeout) before its cluster is ready stops the background cluster it
// started and says so: no process, network namespace or API listener is left. Its
// background process runs in a session of its own, which a signal to the foreground
// command's process group does not reach; before, the half-started cluster went on
// running.
func TestUpDetachInterrupted(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "trup-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	addr, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := fakeUpstreamDNS()
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("ud%d-", runID)
	t.Cleanup(func() {
		if out, err := exec.Command(trancheBin, "down", "--data-dir", dir, "--purge").CombinedOutput(); err != nil {
			t.Logf("tranche down: %v\n%s", err, out)
		}
	})
	var out testutil.Buffer
	up := exec.Command(trancheBin, "up", "--nodes", "1", "--detach", "--data-dir", dir, "--listen", addr,
		"--netns-prefix", prefix, "--upstream-dns", upstream)
	up.Stdout, up.Stderr = &out, &out
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupted once the background cluster has begun building its network.
	testutil.EventuallyEvery(t, 60*time.Second, 20*time.Millisecond, "the starting cluster's namespaces", func() (bool, string) {
		return len(netnsWithPrefix(prefix)) > 0, out.String()
	})
	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = up.Wait()
	if err == nil {
		t.Fatalf("tranche up --detach exited 0 after SIGTERM:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "interrupted before the cluster was ready; it was stopped") {
		t.Errorf("tranche up --detach after SIGTERM said:\n%s\nwant that the starting cluster was stopped", out.String())
	}
	if left := netnsWithPrefix(prefix); len(left) > 0 {
		t.Errorf("network namespaces left after the interrupted start: %v", left)
	}
	procs, _ := exec.Command("pgrep", "-f", "--", "--data-dir "+dir).Output()
	if s := strings.TrimSpace(string(procs)); s != "" {
		t.Errorf("processes of %s still running after the interrupted start: %s", dir, s)
	}
	if log, err := os.ReadFile(filepath.Join(dir, "tranche.log")); err == nil && !strings.Contains(string(log), "cluster stopped") {
		t.Errorf("the background cluster's log does not end with its stop:\n%s", tail(string(log), 2000))
	}
}
