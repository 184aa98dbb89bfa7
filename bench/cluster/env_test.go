package cluster

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tranche/tranche/bench/benchcluster"
)

// descendants returns the processes below pid (children, grandchildren...), from the
// parent links in /proc.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name, in parentheses, may hold spaces: the fields after it count
		// from its closing parenthesis (state, then ppid).
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// cmdline returns a process's arguments.
func cmdline(pid int) []string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
}

// memory is a process's resident memory in bytes: VmRSS from /proc/PID/status and Pss
// from /proc/PID/smaps_rollup (shared pages divided among the processes mapping them).
type memory struct {
	rss, pss int64
}

// procMemory reads pid's memory (given in kB by the kernel).
func procMemory(pid int) (memory, error) {
	var m memory
	read := func(file, key string, dst *int64) error {
		f, err := os.Open(fmt.Sprintf("/proc/%d/%s", pid, file))
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok || k != key {
				continue
			}
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return fmt.Errorf("/proc/%d/%s %s %q: %w", pid, file, k, v, err)
			}
			*dst = kb << 10
			return nil
		}
		if err := sc.Err(); err != nil {
			return err
		}
		return fmt.Errorf("/proc/%d/%s: no %s", pid, file, key)
	}
	if err := read("status", "VmRSS", &m.rss); err != nil {
		return m, err
	}
	if err := read("smaps_rollup", "Pss", &m.pss); err != nil {
		return m, err
	}
	return m, nil
}

// cpuTimes is the CPU time (user + system) used by a cluster's processes.
type cpuTimes struct {
	up, agents, containers time.Duration
}

func (a cpuTimes) sub(b cpuTimes) cpuTimes {
	return cpuTimes{up: a.up - b.up, agents: a.agents - b.agents, containers: a.containers - b.containers}
}

// procCPU returns a process's own CPU time and that of its reaped children (zero for a
// process that has gone).
func procCPU(pid int) (own, children time.Duration) {
	own, children, _ = benchcluster.ProcessCPU(pid)
	return own, children
}

// clusterCPU adds up the CPU time of the up process, of its agents, and of the
// container processes (everything below the agents, with what they reaped: the
// start-up scripts' commands). Container processes that have exited are not counted.
func clusterCPU(c *benchcluster.Cluster) cpuTimes {
	var t cpuTimes
	t.up, _ = procCPU(c.PID)
	for _, p := range descendants(c.PID) {
		own, reaped := procCPU(p)
		if args := cmdline(p); len(args) > 1 && args[1] == "agent" {
			t.agents += own
			continue
		}
		t.containers += own + reaped
	}
	return t
}
