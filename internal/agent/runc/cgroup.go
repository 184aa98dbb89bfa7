package runc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// cgroupRoot is where the cgroup file systems are mounted (the cgroupfs layout runc's
// default driver uses).
const cgroupRoot = "/sys/fs/cgroup"

// hierarchy is one mounted cgroup file system.
type hierarchy struct {
	mount       string
	controllers []string // v1 controllers bound to it, "name=systemd" included
	v2          bool
}

func (h hierarchy) has(ctl string) bool { return slices.Contains(h.controllers, ctl) }

// v1Controllers are the names a v1 mount's super options may list.
var v1Controllers = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "freezer", "blkio", "devices",
	"net_cls", "net_prio", "perf_event", "hugetlb", "rdma", "misc"}

// hierarchies returns the cgroup file systems mounted below cgroupRoot, one entry per
// hierarchy, and whether the host runs the unified (v2 only) layout.
func hierarchies() ([]hierarchy, bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(cgroupRoot, &st); err != nil {
		return nil, false, fmt.Errorf("cgroups: %w", err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return []hierarchy{{mount: cgroupRoot, v2: true}}, true, nil
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, false, fmt.Errorf("cgroups: %w", err)
	}
	defer f.Close()
	hs, err := parseMountinfo(f)
	if err != nil {
		return nil, false, fmt.Errorf("cgroups: reading mountinfo: %w", err)
	}
	return hs, false, nil
}

// parseMountinfo returns the cgroup hierarchies mounted below cgroupRoot, one entry per
// hierarchy (a hierarchy mounted twice is listed once).
func parseMountinfo(r io.Reader) ([]hierarchy, error) {
	var hs []hierarchy
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 || !strings.HasPrefix(a[4], cgroupRoot+"/") {
			continue
		}
		var h hierarchy
		switch b[0] {
		case "cgroup2":
			h = hierarchy{mount: a[4], v2: true}
		case "cgroup":
			h = hierarchy{mount: a[4]}
			for _, o := range strings.Split(b[2], ",") {
				if slices.Contains(v1Controllers, o) || strings.HasPrefix(o, "name=") {
					h.controllers = append(h.controllers, o)
				}
			}
			if len(h.controllers) == 0 {
				continue
			}
		default:
			continue
		}
		key := b[0] + " " + strings.Join(h.controllers, ",")
		if !seen[key] {
			seen[key] = true
			hs = append(hs, h)
		}
	}
	return hs, sc.Err()
}

// controllerDir returns the directory of path in the v1 hierarchy of ctl, or in the
// unified one.
func controllerDir(hs []hierarchy, unified bool, ctl, path string) (string, error) {
	if unified {
		return filepath.Join(cgroupRoot, path), nil
	}
	for _, h := range hs {
		if !h.v2 && h.has(ctl) {
			return filepath.Join(h.mount, path), nil
		}
	}
	return "", fmt.Errorf("cgroup controller %s is not mounted", ctl)
}

// checkPath refuses anything but a clean absolute path below the root cgroup.
func checkPath(path string) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || path == "/" {
		return fmt.Errorf("invalid cgroup path %q: want a clean absolute path below the root, like /tranche/<node>/pod<uid>", path)
	}
	return nil
}

// EnsurePod creates the pod-level cgroup at path (for instance /tranche/<node>/pod<uid>,
// in every v1 hierarchy, or in the unified one with the cpu, memory, pids, cpuset and io
// controllers enabled on the way down) and applies res to it: CPU shares and quota,
// memory limit (swap disabled, as kubelet does), pids limit. It is idempotent, and
// applies res again to an existing cgroup. Containers go below it (their
// spec.Linux.CgroupsPath is path/<container id>), so its limits bound them all.
func EnsurePod(path string, res *specs.LinuxResources) error {
	if err := checkPath(path); err != nil {
		return err
	}
	hs, unified, err := hierarchies()
	if err != nil {
		return err
	}
	if unified {
		err = ensureV2(path, res)
	} else {
		err = ensureV1(hs, path, res)
	}
	if err != nil {
		return fmt.Errorf("pod cgroup %s: %w", path, err)
	}
	return nil
}

func ensureV1(hs []hierarchy, path string, res *specs.LinuxResources) error {
	for _, h := range hs {
		if h.v2 {
			continue // hybrid: the unified hierarchy has no controllers here
		}
		if h.has("cpuset") {
			// A new cpuset cgroup starts with no CPUs and no memory nodes, and no task
			// can join it: fill each level from its parent, top down.
			dir := h.mount
			for _, part := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
				parent := dir
				dir = filepath.Join(dir, part)
				if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
					return err
				}
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					cur, err := readString(filepath.Join(dir, f))
					if err != nil {
						return err
					}
					if cur != "" {
						continue
					}
					v, err := readString(filepath.Join(parent, f))
					if err != nil {
						return err
					}
					if err := writeFile(filepath.Join(dir, f), v); err != nil {
						return err
					}
				}
			}
			continue
		}
		if err := os.MkdirAll(filepath.Join(h.mount, path), 0o755); err != nil {
			return err
		}
	}
	if res == nil {
		return nil
	}
	if c := res.CPU; c != nil {
		dir, err := controllerDir(hs, false, "cpu", path)
		if err != nil {
			return err
		}
		if c.Shares != nil {
			if err := writeFile(filepath.Join(dir, "cpu.shares"), strconv.FormatUint(*c.Shares, 10)); err != nil {
				return err
			}
		}
		if c.Period != nil {
			if err := writeFile(filepath.Join(dir, "cpu.cfs_period_us"), strconv.FormatUint(*c.Period, 10)); err != nil {
				return err
			}
		}
		if c.Quota != nil {
			if err := writeFile(filepath.Join(dir, "cpu.cfs_quota_us"), strconv.FormatInt(*c.Quota, 10)); err != nil {
				return err
			}
		}
	}
	if m := res.Memory; m != nil && m.Limit != nil {
		dir, err := controllerDir(hs, false, "memory", path)
		if err != nil {
			return err
		}
		limit := strconv.FormatInt(*m.Limit, 10)
		swap := limit // memory+swap = memory: no swap
		if m.Swap != nil {
			swap = strconv.FormatInt(*m.Swap, 10)
		}
		mem, memsw := filepath.Join(dir, "memory.limit_in_bytes"), filepath.Join(dir, "memory.memsw.limit_in_bytes")
		if _, err := os.Stat(memsw); err != nil {
			// No swap accounting in this kernel: nothing to keep in step.
			if err := writeFile(mem, limit); err != nil {
				return err
			}
		} else if err := writeFile(mem, limit); err == nil {
			// The limit went down (or stayed): memsw may follow.
			if err := writeFile(memsw, swap); err != nil {
				return err
			}
		} else {
			// The limit went up above memsw, which must be raised first.
			if err := writeFile(memsw, swap); err != nil {
				return err
			}
			if err := writeFile(mem, limit); err != nil {
				return err
			}
		}
	}
	if p := res.Pids; p != nil && p.Limit != nil {
		dir, err := controllerDir(hs, false, "pids", path)
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, "pids.max"), maxOr(*p.Limit)); err != nil {
			return err
		}
	}
	return nil
}

func ensureV2(path string, res *specs.LinuxResources) error {
	dir := cgroupRoot
	for _, part := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		// Enable in the parent what the children below need (those it has).
		avail, err := readString(filepath.Join(dir, "cgroup.controllers"))
		if err != nil {
			return err
		}
		var enable []string
		for _, c := range strings.Fields(avail) {
			if slices.Contains([]string{"cpu", "cpuset", "memory", "pids", "io"}, c) {
				enable = append(enable, "+"+c)
			}
		}
		if len(enable) > 0 {
			if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), strings.Join(enable, " ")); err != nil {
				return err
			}
		}
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	if res == nil {
		return nil
	}
	if c := res.CPU; c != nil {
		if c.Shares != nil && *c.Shares > 0 {
			if err := writeFile(filepath.Join(dir, "cpu.weight"), strconv.FormatUint(cpuWeight(*c.Shares), 10)); err != nil {
				return err
			}
		}
		if c.Quota != nil || c.Period != nil {
			quota, period := "max", uint64(100000)
			if c.Period != nil && *c.Period > 0 {
				period = *c.Period
			}
			if c.Quota != nil && *c.Quota > 0 {
				quota = strconv.FormatInt(*c.Quota, 10)
			}
			if err := writeFile(filepath.Join(dir, "cpu.max"), quota+" "+strconv.FormatUint(period, 10)); err != nil {
				return err
			}
		}
	}
	if m := res.Memory; m != nil && m.Limit != nil {
		if err := writeFile(filepath.Join(dir, "memory.max"), maxOr(*m.Limit)); err != nil {
			return err
		}
		swap := "0"
		if m.Swap != nil && *m.Swap != *m.Limit {
			// v1's memsw is memory+swap; v2's swap.max is swap alone.
			switch {
			case *m.Swap < 0:
				swap = "max"
			default:
				swap = strconv.FormatInt(max(*m.Swap-*m.Limit, 0), 10)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
			if err := writeFile(filepath.Join(dir, "memory.swap.max"), swap); err != nil {
				return err
			}
		}
	}
	if p := res.Pids; p != nil && p.Limit != nil {
		if err := writeFile(filepath.Join(dir, "pids.max"), maxOr(*p.Limit)); err != nil {
			return err
		}
	}
	return nil
}

// cpuWeight maps v1 CPU shares (2..262144) onto a v2 weight (1..10000), the linear
// conversion runc and kubelet use, so that both versions divide CPU alike.
func cpuWeight(shares uint64) uint64 {
	shares = min(max(shares, 2), 262144)
	return 1 + ((shares-2)*9999)/262142
}

// RemovePod removes the cgroup at path and every cgroup below it in every hierarchy.
// Processes still in them are killed first (SIGKILL, with the tree frozen while the
// signals are sent so that nothing forks away), and RemovePod waits until they are gone.
// A cgroup that does not exist is not an error. The caller's own process must not be in
// the tree: RemovePod refuses it.
func RemovePod(path string) error {
	if err := checkPath(path); err != nil {
		return err
	}
	hs, unified, err := hierarchies()
	if err != nil {
		return err
	}
	if err := killAll(hs, unified, path); err != nil {
		return fmt.Errorf("removing pod cgroup %s: %w", path, err)
	}
	for _, h := range hs {
		dirs, err := tree(filepath.Join(h.mount, path))
		if err != nil {
			return fmt.Errorf("removing pod cgroup %s: %w", path, err)
		}
		for _, d := range slices.Backward(dirs) {
			if err := rmdir(d); err != nil {
				return fmt.Errorf("removing pod cgroup %s: %w", path, err)
			}
		}
	}
	return nil
}

// cgroupBase is the cgroup below which every node of every tranche cluster on the host
// has its own.
const cgroupBase = "/tranche"

// NodeCgroup is the cgroup path of the node whose network namespace is nodeNS: unique to
// the cluster (its namespace prefix) and the node. Its pods' cgroups are below it.
func NodeCgroup(nodeNS string) string { return cgroupBase + "/" + nodeNS }

// NodeCgroups lists the node cgroups (NodeCgroup paths) whose namespace starts with
// prefix, in any hierarchy.
func NodeCgroups(prefix string) ([]string, error) {
	hs, _, err := hierarchies()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, h := range hs {
		entries, err := os.ReadDir(filepath.Join(h.mount, cgroupBase))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) && !seen[e.Name()] {
				seen[e.Name()] = true
				out = append(out, NodeCgroup(e.Name()))
			}
		}
	}
	return out, nil
}

// RemoveNode removes a node's cgroup tree at path (for instance /tranche/<node>) as
// RemovePod does, then each ancestor left empty (the /tranche directory once its last
// node is gone), so that nothing tranche made stays on the host. Call it only when no
// pod of the node can be created meanwhile: pod cgroups are made below it.
func RemoveNode(path string) error {
	if err := RemovePod(path); err != nil {
		return err
	}
	hs, _, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		for p := filepath.Dir(path); p != "/"; p = filepath.Dir(p) {
			err := unix.Rmdir(filepath.Join(h.mount, p))
			if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EBUSY) {
				break // another node's, or in use: not ours to remove
			}
			if err != nil && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("removing cgroup %s: %w", p, err)
			}
		}
	}
	return nil
}

// tree returns root and the directories below it, parents before children; none when
// root does not exist.
func tree(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	return dirs, err
}

// pidsIn returns the processes in the cgroups at and below path in every hierarchy.
func pidsIn(hs []hierarchy, path string) ([]int, error) {
	var pids []int
	for _, h := range hs {
		dirs, err := tree(filepath.Join(h.mount, path))
		if err != nil {
			return nil, err
		}
		for _, d := range dirs {
			s, err := readString(filepath.Join(d, "cgroup.procs"))
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed meanwhile
			}
			if err != nil {
				return nil, err
			}
			for _, f := range strings.Fields(s) {
				if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
					pids = append(pids, pid)
				}
			}
		}
	}
	return pids, nil
}

// killAll kills every process in the tree at path and waits until none is left.
func killAll(hs []hierarchy, unified bool, path string) error {
	freeze := func(bool) {}
	if dir, err := controllerDir(hs, unified, "freezer", path); err == nil {
		if unified {
			freeze = func(on bool) {
				writeFile(filepath.Join(dir, "cgroup.freeze"), map[bool]string{true: "1", false: "0"}[on])
			}
		} else {
			freeze = func(on bool) {
				writeFile(filepath.Join(dir, "freezer.state"), map[bool]string{true: "FROZEN", false: "THAWED"}[on])
			}
		}
	}
	// Bounded: a process that does not die from SIGKILL within this is stuck in the
	// kernel, and the error says so instead of hanging the agent.
	deadline := time.Now().Add(30 * time.Second)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		pids, err := pidsIn(hs, path)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if slices.Contains(pids, os.Getpid()) {
			return fmt.Errorf("the agent itself (pid %d) is in the cgroup; refusing to kill it", os.Getpid())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v survive SIGKILL", pids)
		}
		freeze(true)
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		freeze(false)
		time.Sleep(delay)
	}
}

// rmdir removes an empty cgroup directory, retrying while the kernel still counts the
// processes that just left it.
func rmdir(dir string) error {
	for i := 0; ; i++ {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || i == 100 {
			return fmt.Errorf("rmdir %s: %w", dir, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// CgroupStats is a snapshot of a container's (or a pod's) cgroup, what kubelet reports and
// what decides OOMKilled. Read it after the container exited and before Delete, which
// removes the container's cgroup.
type CgroupStats struct {
	// OOMKills is how many processes the kernel's OOM killer killed in the cgroup
	// (v1 memory.oom_control oom_kill, v2 memory.events oom_kill). In v1 it counts the
	// victims of this very cgroup, not of its children.
	OOMKills uint64
	// OOMKillsKnown is false when the kernel does not count OOM kills (v1 before 4.13).
	OOMKillsKnown bool
	// MemoryFailcnt is how often the memory limit was hit (v1 memory.failcnt, v2
	// memory.events max).
	MemoryFailcnt uint64
	// MemoryUsage is the memory in use now, in bytes.
	MemoryUsage uint64
	// MemoryLimit is the memory limit in bytes, 0 when there is none.
	MemoryLimit uint64
	// CPUUsage is the CPU time used by the cgroup's processes.
	CPUUsage time.Duration
	// CPUPeriods is how many CFS periods had a quota to enforce, CPUThrottledPeriods
	// how many of them ran out of it, and CPUThrottledTime how long the cgroup's
	// processes waited for the next period in total.
	CPUPeriods, CPUThrottledPeriods uint64
	CPUThrottledTime                time.Duration
}

// OOMKilled tells whether a container that exited with exitCode and whose cgroup had
// these statistics was killed by the OOM killer: the kernel's counter when it has one, else
// SIGKILL (137) after the memory limit was hit.
func (s CgroupStats) OOMKilled(exitCode int) bool {
	if s.OOMKillsKnown {
		return s.OOMKills > 0
	}
	return exitCode == 128+int(syscall.SIGKILL) && s.MemoryFailcnt > 0
}

// Stats reads the statistics of the cgroup at path (v1: from the memory, cpu and
// cpuacct hierarchies; v2: from the unified one). Its type is CgroupStats because a Go
// type cannot share the function's name. The error wraps fs.ErrNotExist when
// the cgroup is gone.
func Stats(path string) (CgroupStats, error) {
	if err := checkPath(path); err != nil {
		return CgroupStats{}, err
	}
	hs, unified, err := hierarchies()
	if err != nil {
		return CgroupStats{}, err
	}
	var s CgroupStats
	if unified {
		err = statsV2(&s, filepath.Join(cgroupRoot, path))
	} else {
		err = statsV1(&s, hs, path)
	}
	if err != nil {
		return CgroupStats{}, fmt.Errorf("stats of cgroup %s: %w", path, err)
	}
	return s, nil
}

func statsV1(s *CgroupStats, hs []hierarchy, path string) error {
	mem, err := controllerDir(hs, false, "memory", path)
	if err != nil {
		return err
	}
	kv, err := readKeyValues(filepath.Join(mem, "memory.oom_control"))
	if err != nil {
		return err
	}
	s.OOMKills, s.OOMKillsKnown = kv["oom_kill"]
	if s.MemoryFailcnt, err = readUint(filepath.Join(mem, "memory.failcnt")); err != nil {
		return err
	}
	if s.MemoryUsage, err = readUint(filepath.Join(mem, "memory.usage_in_bytes")); err != nil {
		return err
	}
	if s.MemoryLimit, err = readUint(filepath.Join(mem, "memory.limit_in_bytes")); err != nil {
		return err
	}
	if s.MemoryLimit >= math.MaxInt64/4096*4096 {
		s.MemoryLimit = 0 // the kernel's "unlimited"
	}
	if dir, err := controllerDir(hs, false, "cpuacct", path); err == nil {
		ns, err := readUint(filepath.Join(dir, "cpuacct.usage"))
		if err != nil {
			return err
		}
		s.CPUUsage = time.Duration(ns)
	}
	if dir, err := controllerDir(hs, false, "cpu", path); err == nil {
		kv, err := readKeyValues(filepath.Join(dir, "cpu.stat"))
		if err != nil {
			return err
		}
		s.CPUPeriods, s.CPUThrottledPeriods = kv["nr_periods"], kv["nr_throttled"]
		s.CPUThrottledTime = time.Duration(kv["throttled_time"])
	}
	return nil
}

func statsV2(s *CgroupStats, dir string) error {
	events, err := readKeyValues(filepath.Join(dir, "memory.events"))
	if err != nil {
		return err
	}
	s.OOMKills, s.OOMKillsKnown = events["oom_kill"]
	s.MemoryFailcnt = events["max"]
	if s.MemoryUsage, err = readUint(filepath.Join(dir, "memory.current")); err != nil {
		return err
	}
	if v, err := readString(filepath.Join(dir, "memory.max")); err != nil {
		return err
	} else if v != "max" {
		s.MemoryLimit, _ = strconv.ParseUint(v, 10, 64)
	}
	cpu, err := readKeyValues(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return err
	}
	s.CPUUsage = time.Duration(cpu["usage_usec"]) * time.Microsecond
	s.CPUPeriods, s.CPUThrottledPeriods = cpu["nr_periods"], cpu["nr_throttled"]
	s.CPUThrottledTime = time.Duration(cpu["throttled_usec"]) * time.Microsecond
	return nil
}

func readString(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

func readUint(path string) (uint64, error) {
	s, err := readString(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// readKeyValues reads a flat keyed file ("key value" lines) of unsigned numbers.
func readKeyValues(path string) (map[string]uint64, error) {
	s, err := readString(path)
	if err != nil {
		return nil, err
	}
	kv := map[string]uint64{}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			kv[k] = n
		}
	}
	return kv, nil
}

// writeFile writes a cgroup control file, naming it in the error.
func writeFile(path, value string) error {
	if err := os.WriteFile(path, []byte(value), 0); err != nil {
		return fmt.Errorf("writing %q to %s: %w", value, path, err)
	}
	return nil
}

// Cgroup2 reports whether the host runs the unified (cgroup v2 only) layout.
func Cgroup2() bool {
	var st unix.Statfs_t
	return unix.Statfs(cgroupRoot, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}

// maxOr is a cgroup v2 limit file's value: n, or "max" (no limit) when n is not positive.
func maxOr(n int64) string {
	if n > 0 {
		return strconv.FormatInt(n, 10)
	}
	return "max"
}
