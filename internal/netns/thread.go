package netns

// Every namespace switch of tranche is in this file. The pattern is always the same
// (runLocked): a new goroutine locks itself to an OS thread, joins the namespace, does the
// work and returns WITHOUT unlocking, so the Go runtime terminates that thread instead of
// handing it, still inside the namespace, to other goroutines. Threads the runtime creates
// later are cloned from its template thread, never from one of these.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// init keeps the main goroutine on the main thread for the life of every program that
// uses this package. runLocked discards the thread it entered a namespace on by
// returning with the thread still locked, but Go cannot end the main thread: if
// runLocked's goroutine happened to run there, the main thread would stay in the
// entered namespace, the whole process would show up in `ip netns pids` for it and be
// killed along with a pod's processes. Locked to main, it can never be picked.
func init() { runtime.LockOSThread() }

// runLocked runs fn on a fresh locked thread that has joined the namespace open in
// target (closed here), or, when target is nil, stays in the namespace new threads start
// in (only Create uses that, before it unshares). A panic in fn is re-raised in the
// caller. When linger is not nil it runs on the same thread after fn's result has been
// handed back, and the thread is discarded only when it returns.
func runLocked(target *os.File, fn func() error, linger func()) error {
	type result struct {
		err      error
		panicked bool
		value    any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: this thread may have left the root namespace.
		func() {
			defer func() {
				if r := recover(); r != nil {
					done <- result{panicked: true, value: r}
				}
			}()
			if target != nil {
				err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET)
				target.Close()
				if err != nil {
					done <- result{err: fmt.Errorf("entering network namespace %s: %w", target.Name(), err)}
					return
				}
			}
			done <- result{err: fn()}
		}()
		if linger != nil {
			linger()
		}
	}()
	r := <-done
	if r.panicked {
		panic(r.value)
	}
	return r.err
}

// unshareAndMount creates a network namespace on a throw-away thread and bind-mounts it
// at path, which keeps it alive after the thread is gone.
func unshareAndMount(path string) error {
	return runLocked(nil, func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		if err := unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting the namespace at %s: %w", path, err)
		}
		return nil
	}, nil)
}

// Do runs fn on a fresh OS thread inside the named namespace and returns its error; the
// thread is discarded afterwards. Only fn's own goroutine is inside the namespace:
// goroutines it starts run elsewhere. Sockets fn creates stay in the namespace and may be
// used from any goroutine afterwards.
func Do(name string, fn func() error) error {
	return inNamespace(name, fn, nil)
}

// inNamespace is runLocked on the named namespace.
func inNamespace(name string, fn func() error, linger func()) error {
	target, err := open(name)
	if err != nil {
		return err
	}
	return runLocked(target, fn, linger)
}

// Listen returns a listener whose socket lives in the named namespace (for instance the
// API server's cluster listener on 10.240.0.1:6443); it is usable from any goroutine. The
// network is tcp, tcp4 or tcp6, and the host part of addr must be an IP literal or empty:
// a name would be resolved by goroutines outside the namespace.
func Listen(name, network, addr string) (net.Listener, error) {
	if err := checkAddr(network, addr, true, "tcp", "tcp4", "tcp6"); err != nil {
		return nil, fmt.Errorf("listening in network namespace %q: %w", name, err)
	}
	var l net.Listener
	err := Do(name, func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s %s in network namespace %q: %w", network, addr, name, err)
	}
	return l, nil
}

// ListenPacket is Listen for udp, udp4 and udp6 (used by the DNS server).
func ListenPacket(name, network, addr string) (net.PacketConn, error) {
	if err := checkAddr(network, addr, true, "udp", "udp4", "udp6"); err != nil {
		return nil, fmt.Errorf("listening in network namespace %q: %w", name, err)
	}
	var c net.PacketConn
	err := Do(name, func() error {
		var err error
		c, err = net.ListenPacket(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s %s in network namespace %q: %w", network, addr, name, err)
	}
	return c, nil
}

// Dial connects from inside the named namespace (tcp* or udp*) to addr, whose host must be
// an IP literal, giving up after timeout (0 means the system's limit). Probes use it to
// reach a pod from its node's namespace.
func Dial(name, network, addr string, timeout time.Duration) (net.Conn, error) {
	if err := checkAddr(network, addr, false, "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6"); err != nil {
		return nil, fmt.Errorf("dialing from network namespace %q: %w", name, err)
	}
	var c net.Conn
	err := Do(name, func() error {
		var err error
		c, err = net.DialTimeout(network, addr, timeout)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dialing %s %s from network namespace %q: %w", network, addr, name, err)
	}
	return c, nil
}

// checkAddr accepts only the given networks and host:port with an IP literal host (or an
// empty host when emptyHost is set), so that nothing is resolved through DNS.
func checkAddr(network, addr string, emptyHost bool, networks ...string) error {
	ok := false
	for _, n := range networks {
		ok = ok || n == network
	}
	if !ok {
		return fmt.Errorf("unsupported network %q (want one of %s)", network, strings.Join(networks, ", "))
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" && emptyHost {
		return nil
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return fmt.Errorf("address %q: host must be an IP literal", addr)
	}
	return nil
}

// sysctlPath maps a network sysctl key ("net.ipv4.ip_forward", or the slash form
// "net/ipv4/conf/eth0.1/rp_filter" for names containing dots) to its /proc/sys file.
// Only net.* keys are accepted: other sysctls are not per-namespace, so writing them
// "inside" a namespace would change the host.
func sysctlPath(key string) (string, error) {
	rel := key
	if !strings.Contains(key, "/") {
		rel = strings.ReplaceAll(key, ".", "/")
	}
	parts := strings.Split(rel, "/")
	if parts[0] != "net" || len(parts) < 3 {
		return "", fmt.Errorf("sysctl %q: only network (net.*) sysctls can be set in a namespace", key)
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return "", fmt.Errorf("invalid sysctl key %q", key)
		}
	}
	return "/proc/sys/" + rel, nil
}

// SetSysctl writes a network sysctl inside the named namespace, like
// `ip netns exec NAME sysctl -w KEY=VALUE`. The empty name (the root namespace) and keys
// outside net.* are refused.
func SetSysctl(name, key, value string) error {
	return setSysctl(name, key, value, false)
}

// SetSysctlIfExists is SetSysctl, except that a key the kernel does not have in that
// namespace (`sysctl -e`: its module is not loaded, or it is not per-namespace in this
// kernel) is skipped without error.
func SetSysctlIfExists(name, key, value string) error {
	return setSysctl(name, key, value, true)
}

func setSysctl(name, key, value string, ifExists bool) error {
	p, err := sysctlPath(key)
	if err != nil {
		return err
	}
	err = Do(name, func() error {
		// /proc/sys/net shows the namespace of the thread that opens the file.
		err := os.WriteFile(p, []byte(value), 0)
		if ifExists && errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("setting sysctl %s=%s in network namespace %q: %w", key, value, name, err)
	}
	return nil
}

// Sysctl reads a network sysctl inside the named namespace, without the trailing newline.
func Sysctl(name, key string) (string, error) {
	p, err := sysctlPath(key)
	if err != nil {
		return "", err
	}
	var v []byte
	err = Do(name, func() error {
		var err error
		v, err = os.ReadFile(p)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("reading sysctl %s in network namespace %q: %w", key, name, err)
	}
	return strings.TrimRight(string(v), "\n"), nil
}

// StartProcess calls cmd.Start with the child in the named namespace's network: the fork
// happens on a locked thread that has joined the namespace, and a child inherits the
// namespaces of the thread that forked it. Other namespaces (mount, UTS, PID, ...) are
// whatever cmd.SysProcAttr asks for; the caller owns cmd afterwards (Wait, Process.Kill)
// from any goroutine.
//
// The kernel sends a parent-death signal when the forking *thread* exits, not the process.
// So when cmd.SysProcAttr.Pdeathsig is set, the forking thread stays parked (one OS thread
// per such child) until the child exits, and the child is signalled only when tranche
// itself dies.
func StartProcess(name string, cmd *exec.Cmd) error {
	if err := inNamespace(name, cmd.Start, parkUntilExit(cmd)); err != nil {
		return fmt.Errorf("starting %s in network namespace %q: %w", cmd.Path, name, err)
	}
	return nil
}

// StartHere calls cmd.Start in the caller's own network namespace, parking the forking
// thread as StartProcess does when cmd.SysProcAttr.Pdeathsig is set. A plain cmd.Start
// with Pdeathsig is not safe in a program that uses this package: the fork may happen on
// any thread, and a later goroutine that locks that same thread to enter a namespace
// discards it on return, which kills the child at once.
func StartHere(cmd *exec.Cmd) error {
	return runLocked(nil, cmd.Start, parkUntilExit(cmd))
}

// parkUntilExit is runLocked's linger for a process with a parent-death signal: it holds
// the forking thread until the process has exited. Nil when cmd has none.
func parkUntilExit(cmd *exec.Cmd) func() {
	if cmd.SysProcAttr == nil || cmd.SysProcAttr.Pdeathsig == 0 {
		return nil
	}
	return func() {
		if cmd.Process == nil {
			return
		}
		waitExit(cmd.Process.Pid)
	}
}

// waitExit blocks until process pid has exited, without reaping it (the owner of the
// exec.Cmd does that).
func waitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // already gone
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// OpenLinks returns a link handle whose netlink socket lives in the named namespace. The
// socket is created on a discarded thread inside the namespace; all later calls go through
// that socket from any goroutine without switching threads. Close it when done: an open
// handle keeps the namespace alive.
func OpenLinks(name string) (*Links, error) {
	var h *netlink.Handle
	err := Do(name, func() error {
		var err error
		// No namespace argument: the socket is made in this thread's namespace, so the
		// library does not switch (and switch back) any thread itself.
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening a netlink handle in network namespace %q: %w", name, err)
	}
	return &Links{ns: name, h: h}, nil
}

// UnsharePodNamespaces creates a new IPC namespace and a new UTS namespace on a
// throw-away thread, sets hostname in the new UTS namespace, and bind-mounts them at
// ipcPath and utsPath (existing files), which keeps them alive without a process, as
// unshareAndMount does for network namespaces. Containers of a pod join them by path.
//
// The hostname is set only after checking that the thread really is in a UTS namespace
// of its own (leftUTS): a failed unshare must never rename the host.
func UnsharePodNamespaces(ipcPath, utsPath, hostname string) error {
	return runLocked(nil, func() error {
		if err := unix.Unshare(unix.CLONE_NEWIPC | unix.CLONE_NEWUTS); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		if err := leftUTS(); err != nil {
			return err
		}
		if err := unix.Sethostname([]byte(hostname)); err != nil {
			return fmt.Errorf("setting hostname %q: %w", hostname, err)
		}
		for _, m := range []struct{ ns, path string }{{"ipc", ipcPath}, {"uts", utsPath}} {
			if err := unix.Mount("/proc/thread-self/ns/"+m.ns, m.path, "none", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("bind-mounting the %s namespace at %s: %w", m.ns, m.path, err)
			}
		}
		return nil
	}, nil)
}

// leftUTS fails unless the calling thread is in a UTS namespace other than the process's
// own (its main thread's, which never switches) and the host's (PID 1's, or kthreadd's
// when PID 1's cannot be read, as in notRoot).
func leftUTS() error {
	var self unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/uts", &self); err != nil {
		return err
	}
	for _, p := range []string{"/proc/self/ns/uts", "/proc/1/ns/uts", "/proc/2/ns/uts"} {
		if p == "/proc/2/ns/uts" {
			comm, err := os.ReadFile("/proc/2/comm")
			if err != nil || strings.TrimSpace(string(comm)) != "kthreadd" {
				continue
			}
		}
		var other unix.Stat_t
		if err := unix.Stat(p, &other); err != nil {
			if p == "/proc/self/ns/uts" {
				return fmt.Errorf("identifying the process's UTS namespace: %w", err)
			}
			continue
		}
		if self.Dev == other.Dev && self.Ino == other.Ino {
			return fmt.Errorf("still in the UTS namespace of %s after unshare; refusing to set the hostname", p)
		}
	}
	return nil
}
