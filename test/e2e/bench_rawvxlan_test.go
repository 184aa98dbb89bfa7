package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/netns"
)

// rawVXLAN is the kernel path of BenchmarkMachinesPodToPod without tranche: the same
// shape built with `ip` alone, as the peer that says what the kernel's VXLAN path
// costs on this machine in the same run. Two machines on a LAN bridge (a namespace of
// its own, veths, MTU 1500), each with a pod bridge cbr0 and flannel.1 (VNI 1, port
// 8472, nolearning, MTU 1450, the permanent ARP and FDB entries and the onlink route
// the overlay writes); routed pods (noprefixroute /24, default via cbr0, MTU 1450) as
// clusternet makes them: a client on machine a, a server and a client on machine b.
// No netfilter anywhere (no table, no conntrack, bridges not calling netfilter's hooks),
// which is the difference with tranche's machines. The server is the same netexec (this binary as agnhost).
type rawVXLAN struct {
	across, within string // the clients' namespaces
	server         string // the server's namespace
	url            string // the server's /healthz
}

// startRawVXLAN builds rawVXLAN in namespaces named prefix+"lan", "a", "b", "ca", "sv",
// "cb" and starts the server; everything is removed when b ends, also on failure.
func startRawVXLAN(b *testing.B, prefix string) rawVXLAN {
	b.Helper()
	names := []string{"lan", "a", "b", "ca", "sv", "cb"}
	for _, n := range names {
		if err := netns.Create(prefix + n); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			killNetnsProcesses(b, prefix+n)
			if err := netns.Delete(prefix + n); err != nil {
				b.Error(err)
			}
		})
	}
	run := func(args ...string) string {
		b.Helper()
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			b.Fatalf("raw VXLAN peer: %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	ipn := func(n string, args ...string) string {
		return run(append([]string{"ip", "-n", prefix + n}, args...)...)
	}
	for _, n := range names {
		ipn(n, "link", "set", "lo", "up")
	}
	// As clusternet does for tranche's bridges: where br_netfilter is loaded its keys
	// are 1 in a new namespace, and the bridges would run netfilter's hooks.
	for _, n := range []string{"lan", "a", "b"} {
		run("ip", "netns", "exec", prefix+n, "sysctl", "-e", "-qw", "net.bridge.bridge-nf-call-iptables=0",
			"net.bridge.bridge-nf-call-ip6tables=0", "net.bridge.bridge-nf-call-arptables=0")
	}
	ipn("lan", "link", "add", "lan", "type", "bridge")
	ipn("lan", "link", "set", "lan", "up")
	macs := map[string]string{}
	for i, m := range []string{"a", "b"} {
		lan, pods := fmt.Sprintf("10.99.0.%d", i+1), fmt.Sprintf("10.98.%d", i+1)
		ipn("lan", "link", "add", "port"+m, "type", "veth", "peer", "name", "eth0", "netns", prefix+m)
		ipn("lan", "link", "set", "port"+m, "master", "lan", "up")
		ipn(m, "addr", "add", lan+"/24", "dev", "eth0")
		ipn(m, "link", "set", "eth0", "up")
		run("ip", "netns", "exec", prefix+m, "sysctl", "-qw", "net.ipv4.ip_forward=1",
			"net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.default.send_redirects=0",
			"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")
		ipn(m, "link", "add", "cbr0", "type", "bridge")
		ipn(m, "addr", "add", pods+".1/24", "dev", "cbr0")
		ipn(m, "link", "set", "cbr0", "up")
		ipn(m, "link", "add", "flannel.1", "mtu", "1450", "type", "vxlan", "id", "1", "local", lan, "dev", "eth0", "dstport", "8472", "nolearning")
		ipn(m, "addr", "add", pods+".0/32", "dev", "flannel.1")
		ipn(m, "link", "set", "flannel.1", "up")
		out := ipn(m, "-brief", "link", "show", "flannel.1")
		if f := strings.Fields(out); len(f) >= 3 {
			macs[m] = f[2]
		}
	}
	for _, p := range []struct{ this, other string }{{"a", "b"}, {"b", "a"}} {
		o := map[string]string{"a": "1", "b": "2"}[p.other]
		ipn(p.this, "neigh", "add", "10.98."+o+".0", "lladdr", macs[p.other], "dev", "flannel.1", "nud", "permanent")
		run("bridge", "-n", prefix+p.this, "fdb", "add", macs[p.other], "dev", "flannel.1", "dst", "10.99.0."+o, "self", "permanent")
		ipn(p.this, "route", "add", "10.98."+o+".0/24", "via", "10.98."+o+".0", "dev", "flannel.1", "onlink")
	}
	for _, p := range []struct{ pod, node, addr string }{{"ca", "a", "10.98.1.2"}, {"sv", "b", "10.98.2.2"}, {"cb", "b", "10.98.2.3"}} {
		gw := p.addr[:strings.LastIndex(p.addr, ".")] + ".1"
		ipn(p.node, "link", "add", "veth"+p.pod, "mtu", "1450", "type", "veth", "peer", "name", "eth0", "netns", prefix+p.pod)
		ipn(p.node, "link", "set", "veth"+p.pod, "master", "cbr0", "up")
		ipn(p.pod, "link", "set", "eth0", "mtu", "1450", "up")
		ipn(p.pod, "addr", "add", p.addr+"/24", "dev", "eth0", "noprefixroute")
		ipn(p.pod, "route", "add", gw, "dev", "eth0", "scope", "link")
		ipn(p.pod, "route", "add", "default", "via", gw)
	}
	log, err := os.Create(filepath.Join(b.TempDir(), "raw-netexec.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	cmd := &exec.Cmd{Path: trancheBin, Args: []string{"agnhost", "netexec", "--http-port=8080"}, Stdout: log, Stderr: log,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}}
	if err := netns.StartProcess(prefix+"sv", cmd); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	b.Cleanup(func() { stopProcess(cmd, done) })
	r := rawVXLAN{across: prefix + "ca", within: prefix + "cb", server: prefix + "sv", url: "http://10.98.2.2:8080/healthz"}
	for _, from := range []string{r.across, r.within} {
		eventually(b, 30*time.Second, "raw VXLAN peer: the server answering "+from, func() (bool, string) {
			conn, err := netns.Dial(from, "tcp", net.JoinHostPort("10.98.2.2", "8080"), 2*time.Second)
			if err != nil {
				return false, err.Error()
			}
			conn.Close()
			return true, ""
		})
	}
	return r
}

// cpuMeter reads the CPU time the two ends of a wrk run used: wrk's from the test
// process's reaped children (wrk runs as a child and is reaped by Run) and the
// server's from every process in its network namespace. Softirq work runs mostly in
// the context of the task that raised it (a send wakes the veth's backlog on its own
// CPU), so the kernel path's cost lands in these two figures, whatever else the
// machine runs; perf agrees with them within a few per cent.
type cpuMeter struct{ serverNS string }

// read returns wrk's and the server's CPU seconds so far.
func (m cpuMeter) read() (children, server float64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
		children = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	var want syscall.Stat_t
	if syscall.Stat(netns.Path(m.serverNS), &want) != nil {
		return children, 0
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st) != nil || st.Ino != want.Ino || st.Dev != want.Dev {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces) start at state (3rd);
		// utime and stime are the 14th and 15th, in clock ticks (100 per second).
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(f) > 12 {
			u, _ := strconv.ParseFloat(f[11], 64)
			s, _ := strconv.ParseFloat(f[12], 64)
			server += (u + s) / 100
		}
	}
	return children, server
}
