package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tranche/tranche/internal/clusternet"
	"github.com/tranche/tranche/internal/netns"
)

// cleanupReport says what cleanup removed.
type cleanupReport struct {
	agents     []string
	processes  int
	namespaces []string
	mounts     []string
}

// String lists the counts, e.g. "2 agents, 1 process, 4 network namespaces, 0 mounts".
func (r cleanupReport) String() string {
	return strings.Join([]string{count(len(r.agents), "agent", "agents"), count(r.processes, "process", "processes"),
		count(len(r.namespaces), "network namespace", "network namespaces"), count(len(r.mounts), "mount", "mounts")}, ", ")
}

func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// leftovers reports whether a cluster on p with prefix left anything behind: namespaces,
// agent pid files or mounts below the data directory.
func leftovers(p paths, prefix string) bool {
	names, _ := netns.List(prefix)
	agents, _ := p.recordedAgents()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return true
	}
	defer f.Close()
	mounts, _ := mountsUnder(f, absPath(p.dir))
	return len(names)+len(agents)+len(mounts) > 0
}

// cleanup removes everything a cluster on p with prefix may have left on the machine:
// recorded agents (with their process groups), every process inside its namespaces,
// the namespaces (their veths go with them), mounts below the data directory and the
// pods' cgroups.
func cleanup(p paths, prefix string, grace time.Duration) (cleanupReport, error) {
	var rep cleanupReport
	var errs []error
	var err error
	rep.agents, err = stopRecordedAgents(p, grace)
	errs = append(errs, err)
	rep.namespaces, err = netns.List(prefix)
	errs = append(errs, err)
	rep.processes, err = killNamespaceProcesses(rep.namespaces, 2*time.Second)
	errs = append(errs, err)
	errs = append(errs, clusternet.Teardown(prefix))
	rep.mounts, err = unmountUnder(p.dir)
	errs = append(errs, err)
	_, err = removeCgroups(prefix)
	errs = append(errs, err)
	return rep, errors.Join(errs...)
}

// Down stops the cluster on cfg.DataDir and removes everything it has on the machine:
// the `tranche up` process (SIGTERM, SIGKILL after a minute), then whatever is still
// there (see Up's leftovers): agents, processes in its namespaces, the namespaces and
// mounts below the data directory. With purge it then deletes the data directory.
// Running it with no cluster running is not an error.
func Down(ctx context.Context, cfg Config, purge bool) error {
	out := cfg.out()
	p := cfg.paths()
	var recorded string
	if s, err := LoadState(p.state()); err == nil {
		recorded = s.Topology.Prefix
	}
	prefix := cfg.prefixOf(recorded)
	if running, holder := held(p.pidFile()); running {
		pid, err := strconv.Atoi(firstField(holder))
		if err != nil || pid <= 1 {
			return fmt.Errorf("%s is locked by a process that recorded no pid (%q); stop it by hand", p.pidFile(), holder)
		}
		if pid == os.Getpid() {
			return fmt.Errorf("the cluster on %s runs in this process", cfg.DataDir)
		}
		if err := stopUp(ctx, pid); err != nil {
			return err
		}
		fmt.Fprintf(out, "stopped tranche up (pid %d)\n", pid)
	} else {
		fmt.Fprintf(out, "no cluster running on %s\n", cfg.DataDir)
	}
	rep, err := cleanup(p, prefix, cfg.stopGrace())
	if err != nil {
		return fmt.Errorf("removing cluster %s: %w", cfg.DataDir, err)
	}
	if len(rep.agents)+rep.processes+len(rep.namespaces)+len(rep.mounts) > 0 {
		fmt.Fprintf(out, "removed %s\n", rep)
	}
	if rest, err := netns.List(prefix); err != nil || len(rest) > 0 {
		return fmt.Errorf("network namespaces %s remain after tranche down (%v)", strings.Join(rest, ", "), err)
	}
	if purge {
		if err := os.RemoveAll(cfg.DataDir); err != nil {
			return fmt.Errorf("deleting %s: %w", cfg.DataDir, err)
		}
		fmt.Fprintf(out, "deleted %s\n", cfg.DataDir)
	}
	return nil
}

// stopUp sends SIGTERM to the `tranche up` process and waits for it to finish its own
// shutdown, killing it after a minute.
func stopUp(ctx context.Context, pid int) error {
	if err := unix.Kill(pid, unix.SIGTERM); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("stopping tranche up (pid %d): %w", pid, err)
	}
	deadline := time.Now().Add(time.Minute)
	for running(pid) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = unix.Kill(pid, unix.SIGKILL)
			waitGone([]int{pid}, 5*time.Second)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Running returns the pid of the `tranche up` process running the cluster on dataDir,
// if one runs.
func Running(dataDir string) (int, bool) {
	ok, holder := held(paths{dir: dataDir}.pidFile())
	if !ok {
		return 0, false
	}
	pid, _ := strconv.Atoi(firstField(holder))
	return pid, true
}
