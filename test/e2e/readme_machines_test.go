package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/agent"
	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/netns"
)

// readmeBlock is one fenced block of the README's walkthrough: ```sh MACHINE [background].
type readmeBlock struct {
	machine    string
	background bool
	script     string
}

// walkthrough extracts the README's "Walkthrough: a cluster on five machines": its
// machines with their addresses (“`cp1` (192.168.56.11)”) and its blocks in order.
func walkthrough(t *testing.T) (map[string]netip.Addr, []readmeBlock) {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "### Walkthrough: a cluster on five machines")
	if start < 0 {
		t.Fatal("README.md has no walkthrough section")
	}
	text = text[start:]
	// The walkthrough ends at the next heading ("### How it works" follows it).
	if end := regexp.MustCompile(`\n##+ `).FindStringIndex(text[4:]); end != nil {
		text = text[:end[0]+4]
	}
	addrs := map[string]netip.Addr{}
	for _, m := range regexp.MustCompile("`([a-z0-9]+)`\\s*\\((\\d+\\.\\d+\\.\\d+\\.\\d+)\\)").FindAllStringSubmatch(text, -1) {
		addrs[m[1]] = netip.MustParseAddr(m[2])
	}
	var blocks []readmeBlock
	sc := bufio.NewScanner(strings.NewReader(text))
	var cur *readmeBlock
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```sh "):
			f := strings.Fields(strings.TrimPrefix(line, "```sh "))
			cur = &readmeBlock{machine: f[0], background: len(f) > 1 && f[1] == "background"}
			if _, ok := addrs[cur.machine]; !ok {
				t.Fatalf("README block for unknown machine %q", cur.machine)
			}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.script += line + "\n"
		}
	}
	if len(addrs) != 5 || len(blocks) < 8 {
		t.Fatalf("README walkthrough: machines %v, %d blocks", addrs, len(blocks))
	}
	return addrs, blocks
}

// readmeMachine is a simulated machine of the walkthrough: a network namespace on the
// LAN, and, for what runs on it, a mount and UTS namespace of its own in which
// /var/lib/tranche and /var/lib/etcd are directories of its own, /run/netns (where its
// agent names its own and its pods' network namespaces) is empty and its own, and the
// host name is its name.
type readmeMachine struct {
	*machine
	dirs map[string]string // path on the machine -> directory on the host
}

var readmeMounts = []string{"/var/lib/tranche", "/var/lib/etcd"}

func (m *readmeMachine) command(ctx context.Context, script string) *exec.Cmd {
	args := []string{"--mount", "--uts", "--propagation", "slave", "--", "sh", "-c",
		`hostname "$1" && mount --bind "$2" "$3" && mount --bind "$4" "$5" && mount -t tmpfs tmpfs /run/netns && exec sh -ec "$6"`, "sh", m.name,
		m.dirs[readmeMounts[0]], readmeMounts[0], m.dirs[readmeMounts[1]], readmeMounts[1], script}
	cmd := exec.CommandContext(ctx, "unshare", args...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(trancheBin)+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// run runs script on the machine and returns its output.
func (m *readmeMachine) run(t *testing.T, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := m.command(ctx, script)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := netns.StartProcess(m.ns, cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("on %s:\n%s\nfailed: %v\n%s", m.name, script, err, tail(out.String(), 4000))
	}
	return out.String()
}

// addReadmeMachine adds machine name (network namespace ns, address addr) to l, its
// directories below home, which must outlive it: made before l, as t's cleanups run in
// reverse order. Its agent's node (named after the machine, the agent's default) is
// cleaned up after the machine: first what the agent leaves running on purpose, its
// shim, in the machine's network namespace (addMachine's cleanup), then its pods'
// processes, in the node's cgroup, once no shim can start one any more. The test must
// hold the mount points (useMachineMounts).
func addReadmeMachine(t *testing.T, l *lan, name, ns string, addr netip.Addr, home string) *readmeMachine {
	t.Helper()
	t.Cleanup(func() { killNodeCgroup(t, runc.NodeCgroup(agent.MachinePrefix+name)) })
	m := &readmeMachine{machine: l.addMachine(t, name, ns, addr), dirs: map[string]string{}}
	for _, mnt := range readmeMounts {
		m.dirs[mnt] = filepath.Join(home, name, filepath.Base(mnt))
		if err := os.MkdirAll(m.dirs[mnt], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// machineMounts counts the tests holding readmeMounts' mount points and lists those
// they had to make.
var machineMounts struct {
	sync.Mutex
	users int
	made  []string
}

// useMachineMounts makes sure readmeMounts exist, as mount points for the machines' own
// directories, until t and every other test using them have ended: the last one removes
// those that were made (removing a mount point would detach the machines' mounts of a
// test still running).
func useMachineMounts(t *testing.T) {
	t.Helper()
	machineMounts.Lock()
	defer machineMounts.Unlock()
	if machineMounts.users == 0 {
		for _, mnt := range readmeMounts {
			if _, err := os.Stat(mnt); errors.Is(err, os.ErrNotExist) {
				if err := os.MkdirAll(mnt, 0o755); err != nil {
					t.Fatal(err)
				}
				machineMounts.made = append(machineMounts.made, mnt)
			}
		}
	}
	machineMounts.users++
	t.Cleanup(func() {
		machineMounts.Lock()
		defer machineMounts.Unlock()
		if machineMounts.users--; machineMounts.users == 0 {
			for _, mnt := range machineMounts.made {
				os.Remove(mnt)
			}
			machineMounts.made = nil
		}
	})
}

// hostPath is where path of the machine is on the host.
func (m *readmeMachine) hostPath(t *testing.T, path string) string {
	for _, mnt := range readmeMounts {
		if rest, ok := strings.CutPrefix(path, mnt+"/"); ok {
			return filepath.Join(m.dirs[mnt], rest)
		}
	}
	t.Fatalf("machine %s: %s is not below %v", m.name, path, readmeMounts)
	return ""
}

// TestReadmeMachines runs README.md's walkthrough exactly as written on five simulated
// machines (network namespaces on a LAN of their own, each with its own host name and
// its own /var/lib/tranche and /var/lib/etcd): three etcd members of Debian's
// etcd-server, two `tranche server`, a token, two agents joined with the printed
// command, and kubectl. Substituted, as the README says: the token and CA hash the token
// command printed, and scp by a copy between the machines' directories.
func TestReadmeMachines(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(etcdBin); err != nil {
		t.Fatalf("%s is required (Debian package etcd-server; `make deps` installs it): %v", etcdBin, err)
	}
	addrs, blocks := walkthrough(t)
	// The machines' directories are made first: cleanups run in reverse order, so they
	// are removed after every machine's processes are gone (a shim left running would
	// write into its agent's directory as it is removed).
	home := t.TempDir()
	useMachineMounts(t)
	prefix := fmt.Sprintf("rm%d-", runID)
	var cidr netip.Prefix
	for _, a := range addrs {
		cidr = netip.PrefixFrom(a, 24).Masked()
	}
	l := newLAN(t, prefix+"lan", cidr, netip.Addr{})
	ms := map[string]*readmeMachine{}
	for name, addr := range addrs {
		ms[name] = addReadmeMachine(t, l, name, prefix+name, addr, home)
	}
	var token, hash, last string
	scp := regexp.MustCompile(`^scp root@(\S+):(\S+) (\S+)$`)
	for i, b := range blocks {
		m := ms[b.machine]
		script := strings.NewReplacer("<token>", token, "<hash>", hash).Replace(b.script)
		if strings.Contains(b.script, "<token>") && token == "" {
			t.Fatalf("block %d uses <token> before a token was printed", i)
		}
		if b.background {
			m.start(t, m.command(context.Background(), script), filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d.log", b.machine, i)))
			continue
		}
		// Lines are run in order; an scp line is a copy between the machines' directories.
		var pending []string
		flush := func() {
			if len(pending) > 0 {
				out := m.run(t, strings.Join(pending, "\n"))
				if c := regexp.MustCompile(`tranche agent --server \S+ --token (\S+) --ca-cert-hash (\S+)`).FindStringSubmatch(out); c != nil {
					token, hash = c[1], c[2]
				}
				t.Logf("on %s:\n%s\n%s", m.name, strings.Join(pending, "\n"), tail(out, 3000))
				last = out
				pending = nil
			}
		}
		for _, line := range strings.Split(strings.TrimSpace(script), "\n") {
			c := scp.FindStringSubmatch(line)
			if c == nil {
				pending = append(pending, line)
				continue
			}
			flush()
			from := machineAt(t, ms, c[1])
			data, err := os.ReadFile(from.hostPath(t, c[2]))
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			if err := os.WriteFile(m.hostPath(t, c[3]), data, 0o600); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
		}
		flush()
	}
	if token == "" {
		t.Fatal("the walkthrough printed no join command")
	}
	// The last command called the Service by name from a pod: one of web's pods answered
	// with its host name.
	// (wget -qO- prints it without a newline, right before kubectl's deletion message.)
	if !regexp.MustCompile(`web-[0-9a-z]+-[0-9a-z]{5}\s*pod "client" deleted`).MatchString(last) {
		t.Errorf("the client pod got no answer from web:\n%s", tail(last, 2000))
	}
}

func machineAt(t *testing.T, ms map[string]*readmeMachine, addr string) *readmeMachine {
	for _, m := range ms {
		if m.addr.String() == addr {
			return m
		}
	}
	t.Fatalf("no machine at %s", addr)
	return nil
}

// killNodeCgroup kills every process in the node cgroup path (every hierarchy) and
// removes it.
func killNodeCgroup(t *testing.T, path string) {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", path))
	if d := filepath.Join("/sys/fs/cgroup", path); dirExists(d) {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil
			}
			procs, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			for _, f := range strings.Fields(string(procs)) {
				if pid, err := strconv.Atoi(f); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
	if len(dirs) == 0 {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := runc.RemoveNode(path)
		if err == nil || time.Now().After(deadline) {
			if err != nil {
				t.Errorf("removing cgroup %s: %v", path, err)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
