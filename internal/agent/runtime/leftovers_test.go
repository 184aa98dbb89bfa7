package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/clusternet"
)

// A test binary that times out panics without running its cleanups, and would leave
// its namespaces and cgroups on the machine. Each test environment therefore records
// its prefix with the test process's pid, and TestMain removes what a dead process
// recorded before the tests run.

// ownersDir holds one file per live test environment, named by its prefix: the pid of
// its process, then its directory (where its root file systems are mounted).
var ownersDir = filepath.Join(os.TempDir(), "tranche-runtime-tests")

func TestMain(m *testing.M) {
	if os.Getuid() == 0 {
		if err := sweepLeftovers(); err != nil {
			fmt.Fprintln(os.Stderr, "removing what earlier runtime tests left:", err)
		}
	}
	os.Exit(m.Run())
}

// recordOwner notes that this process owns prefix and dir until release is called.
func recordOwner(prefix, dir string) (release func(), err error) {
	if err := os.MkdirAll(ownersDir, 0o700); err != nil {
		return nil, err
	}
	p := filepath.Join(ownersDir, prefix)
	if err := os.WriteFile(p, []byte(strconv.Itoa(os.Getpid())+"\n"+dir+"\n"), 0o600); err != nil {
		return nil, err
	}
	return func() { os.Remove(p) }, nil
}

// sweepLeftovers removes the namespaces and cgroups of every recorded prefix whose
// process is gone.
func sweepLeftovers() error {
	entries, err := os.ReadDir(ownersDir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(ownersDir, e.Name()))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(data))
		if len(fields) == 0 {
			continue
		}
		pid, err := strconv.Atoi(fields[0])
		if err == nil && pid > 0 && syscall.Kill(pid, 0) == nil {
			continue // still running
		}
		prefix := e.Name()
		if len(fields) > 1 && strings.HasPrefix(fields[1], os.TempDir()) {
			unmountBelow(fields[1])
			os.RemoveAll(fields[1])
			os.Remove(filepath.Dir(fields[1])) // t.TempDir's parent, once empty
		}
		if err := clusternet.Teardown(prefix); err != nil {
			return fmt.Errorf("%s: %w", prefix, err)
		}
		cgroups, err := runc.NodeCgroups(prefix)
		if err != nil {
			return fmt.Errorf("%s: %w", prefix, err)
		}
		for _, cg := range cgroups {
			if err := runc.RemoveNode(cg); err != nil {
				return fmt.Errorf("%s: %w", prefix, err)
			}
		}
		os.Remove(filepath.Join(ownersDir, prefix))
	}
	return nil
}

// unmountBelow detaches every mount below dir, deepest first.
func unmountBelow(dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}
