package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/netns"
)

// A pid file holds "PID STARTTIME", STARTTIME being field 22 of /proc/PID/stat (clock
// ticks since boot). Signals go to a recorded pid only while that pair still matches,
// so a stale file never kills an unrelated process that reused the pid.

// startTime returns the start time of process pid, or false when it is gone.
func startTime(pid int) (uint64, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseStartTime(string(data))
}

// statFields returns the fields of a /proc/PID/stat line from field 3 (state) on: the
// command name (field 2) is in parentheses and may itself contain spaces and
// parentheses.
func statFields(stat string) []string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(stat[i+1:])
}

// parseStartTime reads field 22 of a /proc/PID/stat line.
func parseStartTime(stat string) (uint64, bool) {
	fields := statFields(stat)
	// fields[0] is field 3 (state), so field 22 is fields[19].
	if len(fields) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(fields[19], 10, 64)
	return v, err == nil
}

// writePIDFile records process pid in path.
func writePIDFile(path string, pid int) error {
	st, ok := startTime(pid)
	if !ok {
		return fmt.Errorf("recording pid %d in %s: the process is gone", pid, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("recording pid %d: %w", pid, err)
	}
	if err := os.WriteFile(path, []byte(fmt.Sprintf("%d %d\n", pid, st)), 0o600); err != nil {
		return fmt.Errorf("recording pid %d: %w", pid, err)
	}
	return nil
}

// parsePIDFile parses "PID STARTTIME" (a bare "PID", as older files hold, has start
// time 0, which matches any process).
func parsePIDFile(text string) (pid int, start uint64, err error) {
	f := strings.Fields(text)
	if len(f) == 0 || len(f) > 2 {
		return 0, 0, fmt.Errorf("pid file %q: want \"PID STARTTIME\"", text)
	}
	pid, err = strconv.Atoi(f[0])
	if err != nil || pid <= 1 {
		return 0, 0, fmt.Errorf("pid file %q: bad pid", text)
	}
	if len(f) == 2 {
		if start, err = strconv.ParseUint(f[1], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("pid file %q: bad start time", text)
		}
	}
	return pid, start, nil
}

// livePID returns the process recorded in path when it is still the same process.
func livePID(path string) (int, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	pid, want, err := parsePIDFile(string(data))
	if err != nil {
		return 0, false
	}
	got, ok := startTime(pid)
	if !ok || (want != 0 && got != want) {
		return 0, false
	}
	return pid, true
}

// StopGroup stops process group pid (a process started with Setsid leads its own):
// SIGTERM to every process in it, SIGKILL to those left after grace, and it returns
// once none runs any more (or 5 s after the SIGKILL). Every member counts, not only the
// leader: a shell script's shell dies at SIGTERM at once while the program it runs is
// still stopping, and that program, left running, goes on writing to its files.
func StopGroup(pid int, grace time.Duration) {
	_ = unix.Kill(-pid, unix.SIGTERM)
	_ = unix.Kill(pid, unix.SIGTERM)
	if waitGroupGone(pid, grace) {
		return
	}
	_ = unix.Kill(-pid, unix.SIGKILL)
	_ = unix.Kill(pid, unix.SIGKILL)
	waitGroupGone(pid, 5*time.Second)
}

// waitGroupGone waits up to d until neither process pid nor any process of group pid
// runs any more (a zombie counts as gone) and reports whether they all went.
func waitGroupGone(pid int, d time.Duration) bool {
	return waitUntil(d, func() bool { return !running(pid) && !groupRunning(pid) })
}

// groupRunning reports whether a process of group pgid runs (is not a zombie).
func groupRunning(pgid int) bool {
	if err := unix.Kill(-pgid, 0); errors.Is(err, unix.ESRCH) {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if g, state, ok := parseGroup(string(data)); ok && g == pgid && state != "Z" {
			return true
		}
	}
	return false
}

// parseGroup reads the state (field 3) and process group (field 5) of a /proc/PID/stat
// line.
func parseGroup(stat string) (pgid int, state string, ok bool) {
	fields := statFields(stat)
	if len(fields) < 3 {
		return 0, "", false
	}
	g, err := strconv.Atoi(fields[2])
	return g, fields[0], err == nil
}

// waitGone waits up to d until none of pids runs any more (a zombie counts as gone) and
// reports whether they all went.
func waitGone(pids []int, d time.Duration) bool {
	return waitUntil(d, func() bool { return !slices.ContainsFunc(pids, running) })
}

// waitUntil polls done every 20 ms for up to d and reports whether it came true.
func waitUntil(d time.Duration, done func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if done() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := statFields(string(data))
	return len(f) > 0 && f[0] != "Z"
}

// stopRecordedAgents stops every agent with a pid file below DATA/nodes and removes the
// files. It returns the nodes whose agent was running.
func stopRecordedAgents(p paths, grace time.Duration) ([]string, error) {
	nodes, err := p.recordedAgents()
	if err != nil {
		return nil, err
	}
	var stopped []string
	for _, node := range nodes {
		if pid, ok := livePID(p.agentPID(node)); ok {
			StopGroup(pid, grace)
			stopped = append(stopped, node)
		}
		if err := os.Remove(p.agentPID(node)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return stopped, fmt.Errorf("agent of node %q: %w", node, err)
		}
	}
	return stopped, nil
}

// nsID identifies a network namespace (the device and inode of its nsfs file).
type nsID struct{ dev, ino uint64 }

// processesInNamespaces returns the processes (other than this one) whose network
// namespace is one of the named namespaces: pods' and agents' processes that outlived
// their parents.
func processesInNamespaces(names []string) ([]int, error) {
	ids := map[nsID]bool{}
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Stat(netns.Path(n), &st); err == nil {
			ids[nsID{st.Dev, st.Ino}] = true
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+e.Name()+"/ns/net", &st) != nil {
			continue
		}
		if ids[nsID{st.Dev, st.Ino}] && running(pid) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// killNamespaceProcesses ends every process inside the named namespaces: SIGTERM, up
// to grace to exit, then SIGKILL, repeated while new ones appear (a dying process may
// have forked). It returns how many it signalled.
func killNamespaceProcesses(names []string, grace time.Duration) (int, error) {
	seen := map[int]bool{}
	for round := 0; round < 5; round++ {
		pids, err := processesInNamespaces(names)
		if err != nil || len(pids) == 0 {
			return len(seen), err
		}
		for _, pid := range pids {
			seen[pid] = true
			_ = unix.Kill(pid, unix.SIGTERM)
		}
		if !waitGone(pids, grace) {
			for _, pid := range pids {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
			waitGone(pids, 5*time.Second)
		}
	}
	pids, err := processesInNamespaces(names)
	if err == nil && len(pids) > 0 {
		err = fmt.Errorf("processes %v in network namespaces %s do not exit", pids, strings.Join(names, ", "))
	}
	return len(seen), err
}

// mountsUnder returns the mount points strictly below dir listed in a mountinfo table,
// deepest first, so that each can be unmounted before the one it sits on.
func mountsUnder(mountinfo io.Reader, dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(mountinfo)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		mp := unescapeMountPath(f[4])
		if strings.HasPrefix(mp, dir+"/") && !slices.Contains(out, mp) {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	slices.SortStableFunc(out, func(a, b string) int {
		return strings.Count(b, "/") - strings.Count(a, "/")
	})
	return out, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space, \011, \012,
// \134).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder unmounts (lazily, so a busy mount goes as soon as it is unused)
// everything mounted below dir: pods' volumes and anything else tranche mounted there.
// It returns the mount points it unmounted.
func unmountUnder(dir string) ([]string, error) {
	abs := absPath(dir)
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("unmounting below %s: %w", dir, err)
	}
	mps, err := mountsUnder(f, abs)
	f.Close()
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, mp := range mps {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", mp, err))
		}
	}
	return mps, errors.Join(errs...)
}

// lock is an exclusive flock on a file, released when the process exits however it
// exits, so a crashed cluster never blocks the next one.
type lock struct{ f *os.File }

// tryLock takes the lock on path, writing content into the file; when another process
// holds it, it returns false and what that process wrote.
func tryLock(path, content string) (*lock, string, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, "", fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := io.ReadAll(f)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, strings.TrimSpace(string(holder)), nil
		}
		return nil, "", fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, "", fmt.Errorf("lock %s: %w", path, err)
	}
	if _, err := f.WriteAt([]byte(content), 0); err != nil {
		f.Close()
		return nil, "", fmt.Errorf("lock %s: %w", path, err)
	}
	return &lock{f: f}, "", nil
}

// waitLock takes the lock on path, waiting for its holder (short critical sections
// such as updating cluster.json).
func waitLock(path string) (*lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &lock{f: f}, nil
}

// held reports whether some process holds the lock on path, and what it wrote there.
func held(path string) (bool, string) {
	f, err := os.Open(path)
	if err != nil {
		return false, ""
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		holder, _ := io.ReadAll(f)
		return true, strings.TrimSpace(string(holder))
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false, ""
}

// release drops the lock.
func (l *lock) release() {
	if l != nil && l.f != nil {
		l.f.Close()
	}
}

// absPath is path made absolute with symlinks resolved where possible, as mount points
// appear in the mount table.
func absPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		return resolved
	}
	return abs
}

// removeCgroups removes the cgroups of a cluster's nodes, their pods and containers
// (runc.NodeCgroups with the cluster's prefix), and /tranche when no other cluster's
// node is left in it. Their processes must be gone already.
func removeCgroups(prefix string) ([]string, error) {
	nodes, err := runc.NodeCgroups(prefix)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, n := range nodes {
		errs = append(errs, runc.RemoveNode(n))
	}
	return nodes, errors.Join(errs...)
}
