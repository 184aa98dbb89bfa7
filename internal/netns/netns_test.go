package netns

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// testPrefix is unique per test binary so parallel packages never share namespaces;
// short, so that prefix+name stays readable.
var testPrefix = fmt.Sprintf("tn%03d-", os.Getpid()%1000)

// needRoot skips the test without root and otherwise registers, before anything is
// created, a cleanup that removes every namespace of the test and then checks the root
// namespace is exactly as it was.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	before := rootState(t)
	t.Cleanup(func() {
		names, err := List(testPrefix)
		if err != nil {
			t.Error(err)
		}
		for _, n := range names {
			if err := Delete(n); err != nil {
				t.Error(err)
			}
		}
		if diff := cmp.Diff(before, rootState(t)); diff != "" {
			t.Errorf("root namespace or namespace list changed (-before +after):\n%s", diff)
		}
	})
}

// rootState is what must never change: the root namespace's links, addresses and routes,
// and the namespaces and mounts carrying this test's prefix.
func rootState(t *testing.T) map[string]string {
	t.Helper()
	s := map[string]string{}
	for _, args := range [][]string{
		{"-br", "link"}, {"-br", "addr"}, {"-4", "route"}, {"-6", "route"},
	} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
		s["ip "+strings.Join(args, " ")] = string(out)
	}
	s["netns"] = strings.Join(grepLines(t, "ip", []string{"netns", "list"}, testPrefix), "\n")
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, l := range strings.Split(string(mounts), "\n") {
		if strings.Contains(l, RunDir+"/"+testPrefix) {
			ours = append(ours, l)
		}
	}
	s["mounts"] = strings.Join(ours, "\n")
	return s
}

func grepLines(t *testing.T, cmd string, args []string, substr string) []string {
	t.Helper()
	out, err := exec.Command(cmd, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", cmd, args, err, out)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, substr) {
			lines = append(lines, l)
		}
	}
	return lines
}

func mustCreate(t *testing.T, name string) string {
	t.Helper()
	name = testPrefix + name
	if err := Create(name); err != nil {
		t.Fatal(err)
	}
	return name
}

func mustLinks(t *testing.T, ns string) *Links {
	t.Helper()
	l, err := OpenLinks(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func TestCreateDeleteList(t *testing.T) {
	needRoot(t)
	a := mustCreate(t, "a")
	b := mustCreate(t, "b")

	got, err := List(testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{a, b}, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if !Exists(a) || Exists(testPrefix+"missing") {
		t.Errorf("Exists(%q) = %v, Exists(missing) = %v", a, Exists(a), Exists(testPrefix+"missing"))
	}
	if lines := grepLines(t, "ip", []string{"netns", "list"}, a); len(lines) != 1 {
		t.Errorf("ip netns list shows %q %d times", a, len(lines))
	}
	if err := Create(a); err == nil {
		t.Errorf("Create(%q) twice succeeded", a)
	}
	for _, bad := range []string{"", ".", "..", "x/y"} {
		if err := Create(bad); err == nil {
			t.Errorf("Create(%q) succeeded", bad)
		}
	}

	if err := Delete(a); err != nil {
		t.Fatal(err)
	}
	if err := Delete(a); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	got, _ = List(testPrefix)
	if diff := cmp.Diff([]string{b}, got); diff != "" {
		t.Errorf("List after Delete (-want +got):\n%s", diff)
	}
}

func TestDoRunsInside(t *testing.T) {
	needRoot(t)
	ns := mustCreate(t, "do")
	want := inode(t, Path(ns))
	root := inode(t, "/proc/2/ns/net")

	var got uint64
	if err := Do(ns, func() error {
		got = inode(t, "/proc/thread-self/ns/net")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got != want || got == root {
		t.Errorf("inside Do: netns inode %d, want %d (root %d)", got, want, root)
	}

	runtime.LockOSThread()
	here := inode(t, "/proc/thread-self/ns/net")
	runtime.UnlockOSThread()
	if here != root {
		t.Errorf("caller's thread is in netns %d after Do, want root %d", here, root)
	}

	if err := Do(ns, func() error { return io.EOF }); err != io.EOF {
		t.Errorf("Do returned %v, want fn's error", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the panic of fn", r)
			}
		}()
		Do(ns, func() error { panic("boom") })
	}()
}

func TestRefusesRootNamespace(t *testing.T) {
	needRoot(t)
	other := mustCreate(t, "o")
	// A name for the root namespace, as `ip netns attach NAME 2` would make
	// (kthreadd, PID 2, is always in it).
	alias := testPrefix + "root"
	if err := os.WriteFile(Path(alias), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("/proc/2/ns/net", Path(alias), "none", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}

	for name, err := range map[string]error{
		"Do":                Do(alias, func() error { return nil }),
		"SetSysctl":         SetSysctl(alias, "net.ipv4.ip_forward", "1"),
		"SetSysctl \"\"":    SetSysctl("", "net.ipv4.ip_forward", "1"),
		"SetSysctlIfExists": SetSysctlIfExists(alias, "net.ipv4.ip_forward", "1"),
		"Do \"\"":           Do("", func() error { return nil }),
	} {
		if err == nil {
			t.Errorf("%s on the root namespace succeeded", name)
		}
	}
	if l, err := OpenLinks(alias); err == nil {
		l.Close()
		t.Errorf("OpenLinks on the root namespace succeeded")
	}
	l := mustLinks(t, other)
	if err := l.AddVeth("x0", "x1", alias); err == nil {
		t.Errorf("AddVeth with its peer in the root namespace succeeded")
	}
}

func TestListenDial(t *testing.T) {
	needRoot(t)
	ns := mustCreate(t, "ld")
	if err := mustLinks(t, ns).LoUp(); err != nil {
		t.Fatal(err)
	}

	ln, err := Listen(ns, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Write([]byte("echo " + line))
	}()

	c, err := Dial(ns, "tcp", ln.Addr().String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hi\n"))
	reply, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || reply != "echo hi\n" {
		t.Errorf("reply %q, %v", reply, err)
	}

	// The same address from the root namespace reaches nothing: the socket is not there.
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Errorf("root namespace reached the listener made inside %s", ns)
	}

	pc, err := ListenPacket(ns, "udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	uc, err := Dial(ns, "udp", pc.LocalAddr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	uc.Write([]byte("ping"))
	buf := make([]byte, 16)
	pc.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, _, err := pc.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "ping" {
		t.Errorf("udp got %q, %v", buf[:n], err)
	}

	for _, bad := range []struct{ network, addr string }{
		{"tcp", "localhost:80"}, {"unix", "/tmp/x"}, {"tcp", "10.0.0.1"},
	} {
		if c, err := Dial(ns, bad.network, bad.addr, time.Second); err == nil {
			c.Close()
			t.Errorf("Dial(%s, %s) succeeded", bad.network, bad.addr)
		}
	}
}

func TestSysctl(t *testing.T) {
	needRoot(t)
	ns := mustCreate(t, "sc")
	read := func() string {
		b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	rootBefore := read()
	want := "1"
	if rootBefore == "1" {
		want = "0"
	}

	if err := SetSysctl(ns, "net.ipv4.ip_forward", want); err != nil {
		t.Fatal(err)
	}
	got, err := Sysctl(ns, "net.ipv4.ip_forward")
	if err != nil || got != want {
		t.Errorf("Sysctl in %s = %q, %v; want %q", ns, got, err, want)
	}
	if after := read(); after != rootBefore {
		t.Errorf("root ip_forward changed from %s to %s", rootBefore, after)
	}

	for _, key := range []string{"kernel.hostname", "net", "net.ipv4..x", "net/../kernel/x"} {
		if err := SetSysctl(ns, key, "1"); err == nil {
			t.Errorf("SetSysctl(%q) succeeded", key)
		}
		if err := SetSysctlIfExists(ns, key, "1"); err == nil {
			t.Errorf("SetSysctlIfExists(%q) succeeded", key)
		}
	}

	// A key the kernel does not have: skipped only when asked to; a key it has is set.
	const missing = "net.ipv4.conf.tr-nosuchlink.rp_filter"
	if err := SetSysctl(ns, missing, "0"); err == nil {
		t.Errorf("SetSysctl(%q) succeeded", missing)
	}
	if err := SetSysctlIfExists(ns, missing, "0"); err != nil {
		t.Errorf("SetSysctlIfExists(%q): %v", missing, err)
	}
	if err := SetSysctlIfExists(ns, "net.ipv4.ip_forward", rootBefore); err != nil {
		t.Fatal(err)
	}
	if got, err := Sysctl(ns, "net.ipv4.ip_forward"); err != nil || got != rootBefore {
		t.Errorf("after SetSysctlIfExists, ip_forward in %s = %q, %v; want %q", ns, got, err, rootBefore)
	}
	if err := SetSysctlIfExists("tr-no-such-namespace", "net.ipv4.ip_forward", "1"); err == nil {
		t.Errorf("SetSysctlIfExists in a missing namespace succeeded")
	}
}

func TestStartProcess(t *testing.T) {
	needRoot(t)
	ns := mustCreate(t, "sp")
	want := fmt.Sprintf("net:[%d]", inode(t, Path(ns)))

	cmd := exec.Command("readlink", "/proc/self/ns/net")
	var out strings.Builder
	cmd.Stdout = &out
	if err := StartProcess(ns, cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != want {
		t.Errorf("child's netns %s, want %s", got, want)
	}

	// With a parent-death signal the child must survive the forking thread's return.
	cmd = exec.Command("sleep", "0.3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := StartProcess(ns, cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("child with Pdeathsig: %v (killed when the forking thread returned?)", err)
	}
}

// TestStartHere starts a child with a parent-death signal from a goroutine that then
// returns with its thread still locked, so that Go ends the thread (what runLocked does
// with every thread that entered a namespace). A plain cmd.Start would have forked on
// that thread and the kernel would kill the child with it; StartHere forks on a thread
// of its own, parked until the child exits.
func TestStartHere(t *testing.T) {
	cmd := exec.Command("sleep", "0.3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread ends with the goroutine
		started <- StartHere(cmd)
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("child with Pdeathsig started by StartHere: %v (killed when a discarded thread ended?)", err)
	}
}

func TestLinks(t *testing.T) {
	needRoot(t)
	a := mustCreate(t, "la")
	b := mustCreate(t, "lb")
	la, lb := mustLinks(t, a), mustLinks(t, b)

	// a: bridge br0 10.9.0.1/24 (MAC pinned) with port va; b: eth0 10.9.0.2/24 without its prefix route, the peer of va, reaching br0 through a
	// link route to 10.9.0.1 only.
	brMAC := net.HardwareAddr{0x0a, 0x58, 10, 9, 0, 1}
	steps := []error{
		la.LoUp(),
		lb.LoUp(),
		la.AddBridge("br0", netip.MustParsePrefix("10.9.0.1/24"), brMAC),
		la.AddVeth("va", "eth0", b),
		la.SetMTU("va", 1400),
		la.AttachToBridge("va", "br0"),
		lb.SetMTU("eth0", 1400),
		lb.AddAddrNoPrefixRoute("eth0", netip.MustParsePrefix("10.9.0.2/24")),
		lb.AddAddrNoPrefixRoute("eth0", netip.MustParsePrefix("10.9.0.2/24")),
		lb.SetUp("eth0"),
		lb.AddRoute(netip.MustParsePrefix("10.9.0.1/32"), netip.Addr{}, "eth0"),
		lb.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("10.9.0.1"), "eth0"),
		lb.AddRoute(netip.MustParsePrefix("10.8.0.0/16"), netip.MustParseAddr("10.9.0.1"), "eth0"),
	}
	for i, err := range steps {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if lines := grepLines(t, "ip", []string{"-n", a, "-d", "link", "show", "va"}, "hairpin on"); len(lines) != 1 {
		t.Errorf("va has no hairpin on")
	}
	// A port joined: a bridge without a pinned MAC would have taken the lowest port's.
	if lines := grepLines(t, "ip", []string{"-n", a, "link", "show", "br0"}, "link/ether "+brMAC.String()+" "); len(lines) != 1 {
		t.Errorf("br0 lost its MAC %s once ports joined", brMAC)
	}
	if lines := grepLines(t, "ip", []string{"-n", b, "addr", "show", "eth0"}, "inet 10.9.0.2/24 "); len(lines) != 1 || !strings.Contains(lines[0], "noprefixroute") {
		t.Errorf("eth0 in b: address lines %q, want 10.9.0.2/24 noprefixroute", lines)
	}
	routes := grepLines(t, "ip", []string{"-n", b, "route"}, "10.")
	want := []string{"default via 10.9.0.1 dev eth0 ", "10.8.0.0/16 via 10.9.0.1 dev eth0 ", "10.9.0.1 dev eth0 scope link "}
	if diff := cmp.Diff(want, routes); diff != "" {
		t.Errorf("routes in b (-want +got):\n%s", diff)
	}

	ln, err := Listen(a, "tcp", "10.9.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("ok"))
			c.Close()
		}
	}()
	c, err := Dial(b, "tcp", ln.Addr().String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "ok" {
		t.Errorf("across the veth got %q", got)
	}

	if err := lb.DelRoute(netip.MustParsePrefix("10.8.0.0/16")); err != nil {
		t.Fatal(err)
	}
	if err := lb.DelRoute(netip.MustParsePrefix("10.8.0.0/16")); err != nil {
		t.Errorf("second DelRoute: %v", err)
	}
	if err := la.DelLink("va"); err != nil {
		t.Fatal(err)
	}
	if ok, err := lb.LinkExists("eth0"); err != nil || ok {
		t.Errorf("peer eth0 still exists (%v, %v) after deleting va", ok, err)
	}
	if err := la.DelLink("va"); err != nil {
		t.Errorf("second DelLink: %v", err)
	}
	if err := la.AddVeth("a-name-that-is-too-long", "x", b); err == nil {
		t.Errorf("AddVeth with a 23-character name succeeded")
	}
}

// TestAdopt: the namespace a process runs in gets a name only on request; the host's
// root namespace is refused unless allowed, and a name held by another namespace is
// never taken over.
func TestAdopt(t *testing.T) {
	needRoot(t)
	if !IsRootNamespace() {
		t.Skip("the test does not run in the host's root network namespace")
	}
	own := testPrefix + "own"
	if err := Adopt(own, false); !errors.Is(err, ErrRootNamespace) {
		t.Fatalf("Adopt in the root namespace without allowRoot: %v, want ErrRootNamespace", err)
	}
	if Exists(own) {
		t.Fatal("a refused Adopt left a name")
	}
	other := testPrefix + "other"
	if err := Create(other); err != nil {
		t.Fatal(err)
	}
	if err := Adopt(other, true); err == nil || !strings.Contains(err.Error(), "is not the one this process runs in") {
		t.Fatalf("Adopt of another namespace's name: %v", err)
	}
	if err := Adopt(own, true); err != nil {
		t.Fatal(err)
	}
	if err := Adopt(own, true); err != nil {
		t.Fatalf("Adopt again: %v", err)
	}
	var a, b unix.Stat_t
	if err := unix.Stat(Path(own), &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat("/proc/self/ns/net", &b); err != nil {
		t.Fatal(err)
	}
	if a.Ino != b.Ino || a.Dev != b.Dev {
		t.Fatal("the adopted name is not this process's namespace")
	}
}
