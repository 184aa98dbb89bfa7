package e2e

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tranche/tranche/internal/auth/bootstrap"
	"github.com/tranche/tranche/internal/auth/pki"
	"github.com/tranche/tranche/internal/cluster"
	"github.com/tranche/tranche/internal/clusternet"
	"github.com/tranche/tranche/internal/netns"
)

// Simulated machines (the safety rule holds: only namespaces the test made change).
//
// A lan is a bridge in a network namespace of its own; a machine is a network namespace
// whose eth0 is a veth to that bridge, with its own address on the LAN's subnet. A
// process started with machine.start runs inside the machine's namespace and sees it as
// the whole host, as `tranche agent` or `tranche server` would on a real machine.
type lan struct {
	ns, bridge string
	cidr       netip.Prefix
}

// newLAN makes the namespace ns with a bridge "lan" (holding gw when gw is valid, so that
// something there can answer) and removes it when t ends.
func newLAN(t testing.TB, ns string, cidr netip.Prefix, gw netip.Addr) *lan {
	t.Helper()
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(ns); err != nil {
			t.Error(err)
		}
	})
	l := &lan{ns: ns, bridge: "lan", cidr: cidr}
	links := openLinks(t, ns)
	defer links.Close()
	var addr netip.Prefix
	if gw.IsValid() {
		addr = netip.PrefixFrom(gw, cidr.Bits())
	}
	if err := links.LoUp(); err != nil {
		t.Fatal(err)
	}
	if err := links.AddBridge(l.bridge, addr, nil); err != nil {
		t.Fatal(err)
	}
	return l
}

// underlayLAN is the underlay of a `tranche up` cluster as a LAN: its bridge joins the
// cluster's nodes and holds the API server's cluster listener (10.240.0.1:6443), so
// machines on it reach the API server as the cluster's own agents do.
func underlayLAN(c *localCluster) *lan {
	return &lan{ns: c.prefix + "net", bridge: clusternet.UnderlayBridge, cidr: clusternet.DefaultUnderlayCIDR}
}

func openLinks(t testing.TB, ns string) *netns.Links {
	t.Helper()
	l, err := netns.OpenLinks(ns)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// machine is a network namespace on a lan.
type machine struct {
	name, ns string
	addr     netip.Addr
	lan      *lan
}

// addMachine makes the namespace ns with eth0 (a veth to the LAN's bridge) holding addr,
// and, when t ends, stops what still runs in it and removes it.
func (l *lan) addMachine(t testing.TB, name, ns string, addr netip.Addr) *machine {
	t.Helper()
	if !l.cidr.Contains(addr) {
		t.Fatalf("machine %s: %s is not on the LAN %s", name, addr, l.cidr)
	}
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		killNetnsProcesses(t, ns)
		if err := netns.Delete(ns); err != nil {
			t.Error(err)
		}
	})
	h := fnv.New32a()
	h.Write([]byte(ns))
	port := fmt.Sprintf("m_%08x", h.Sum32())
	ll := openLinks(t, l.ns)
	defer ll.Close()
	if err := ll.AddVeth(port, "eth0", ns); err != nil {
		t.Fatal(err)
	}
	if err := ll.AttachToBridge(port, l.bridge); err != nil {
		t.Fatal(err)
	}
	ml := openLinks(t, ns)
	defer ml.Close()
	if err := ml.LoUp(); err != nil {
		t.Fatal(err)
	}
	if err := ml.AddAddr("eth0", netip.PrefixFrom(addr, l.cidr.Bits())); err != nil {
		t.Fatal(err)
	}
	if err := ml.SetUp("eth0"); err != nil {
		t.Fatal(err)
	}
	return &machine{name: name, ns: ns, addr: addr, lan: l}
}

// start runs cmd inside the machine, output to logPath, and returns a function that
// stops it (SIGTERM, then SIGKILL after 15 s; idempotent), which also runs when t ends; a
// failed test then logs the end of its output. It also dies with the test binary.
func (m *machine) start(t testing.TB, cmd *exec.Cmd, logPath string) (stop func()) {
	t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := netns.StartProcess(m.ns, cmd); err != nil {
		t.Fatalf("machine %s: %v", m.name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { stopProcess(cmd, done) }) }
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("%s on machine %s (end):\n%s", filepath.Base(logPath), m.name, tail(string(out), 4000))
		}
	})
	return stop
}

// stopProcess stops cmd (started with Setsid) with every process of its group, as
// cluster.StopGroup does: a README block's shell and the tranche or etcd it runs both
// get SIGTERM, and it returns once all have stopped (SIGKILL after 15 s).
func stopProcess(cmd *exec.Cmd, done <-chan struct{}) {
	cluster.StopGroup(cmd.Process.Pid, 15*time.Second)
	<-done
}

// killNetnsProcesses kills every process whose network namespace is the named one (an
// agent's shim, left running on purpose, and what it started).
func killNetnsProcesses(t testing.TB, ns string) {
	var want unix.Stat_t
	if err := unix.Stat(netns.Path(ns), &want); err != nil {
		return
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st) == nil && st.Ino == want.Ino && st.Dev == want.Dev {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// machineAgent is `tranche agent` on a machine joined to the cluster c: its namespace is
// the node's (named c.prefix+name, so the agent finds it as a `tranche up` node's), its
// Node has podCIDR and the machine's address, it authenticates with a node certificate
// from c's CA (as `tranche up` makes its agents'), its pod network with one for
// bootstrap.NodeNetworkUser, and it runs with --backend backend.
// It returns the agent's stop function.
func (m *machine) startAgent(t testing.TB, c *localCluster, podCIDR netip.Prefix, backend string) (stop func()) {
	t.Helper()
	dir := filepath.Join(c.dataDir, "nodes", m.name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	server := "https://" + netip.AddrPortFrom(clusternet.DefaultAPIAddress, 6443).String()
	clusterFile, networkKubeconfig, ca := m.agentFiles(t, dir, c.prefix, clusternet.DefaultAPIAddress, podCIDR, filepath.Join(c.dataDir, "pki"), server)
	cert, key, err := pki.EnsureClient(dir, ca, "client", "system:node:"+m.name, []string{"system:nodes"})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := pki.WriteKubeconfig(kubeconfig, server, ca.CertPEM, cert, key, ""); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(trancheBin, "agent", "--kubeconfig", kubeconfig, "--network-kubeconfig", networkKubeconfig,
		"--node-name", m.name, "--cluster-file", clusterFile, "--root-dir", dir, "--backend", backend)
	return m.start(t, cmd, filepath.Join(dir, "agent.log"))
}

// agentFiles writes in dir what every agent on m needs beside its node credentials: the
// cluster file (namespace prefix prefix, m's LAN, the API server's address apiAddr, the
// node with m's address and podCIDR) and the kubeconfig of the pod network's own
// identity (bootstrap.NodeNetworkUser, as flannel's service account: it reads every
// Node) for server, signed by the CA in pkiDir. It returns their paths and that CA.
func (m *machine) agentFiles(t testing.TB, dir, prefix string, apiAddr netip.Addr, podCIDR netip.Prefix, pkiDir, server string) (clusterFile, networkKubeconfig string, ca *pki.CA) {
	t.Helper()
	topo := clusternet.Topology{Prefix: prefix, UnderlayCIDR: m.lan.cidr, APIAddress: apiAddr,
		ClusterCIDR: clusternet.DefaultClusterCIDR, Nodes: []clusternet.Node{{Name: m.name, Underlay: m.addr, PodCIDR: podCIDR}}}
	if m.ns != topo.NodeNamespace(m.name) {
		t.Fatalf("machine %s: namespace %s must be %s for its agent", m.name, m.ns, topo.NodeNamespace(m.name))
	}
	data, err := json.Marshal(map[string]any{"topology": topo})
	if err != nil {
		t.Fatal(err)
	}
	clusterFile = filepath.Join(dir, "cluster.json")
	if err := os.WriteFile(clusterFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ca, err = pki.EnsureCA(pkiDir)
	if err != nil {
		t.Fatal(err)
	}
	ncert, nkey, err := pki.EnsureClient(dir, ca, "network", bootstrap.NodeNetworkUser, nil)
	if err != nil {
		t.Fatal(err)
	}
	networkKubeconfig = filepath.Join(dir, "network.kubeconfig")
	if err := pki.WriteKubeconfig(networkKubeconfig, server, ca.CertPEM, ncert, nkey, ""); err != nil {
		t.Fatal(err)
	}
	return clusterFile, networkKubeconfig, ca
}

// webContainer ends the spec of the machine tests' web pods in their manifests:
// agnhost's netexec on port 8080, Ready once it answers /healthz (probed every second).
const webContainer = `  containers:
  - name: web
    image: registry.k8s.io/e2e-test-images/agnhost:2.52
    args: ["netexec", "--http-port=8080"]
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
`

// waitNodesReady waits up to within until the Nodes names (machines running agents)
// are all Ready on s. (It lists every Node: `kubectl get nodes NAME` of one name
// returns the Node itself, not a list.)
func waitNodesReady(t testing.TB, s kubectlRunner, within time.Duration, names ...string) {
	t.Helper()
	eventually(t, within, strings.Join(names, " and ")+" Ready", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "nodes", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		lines := strings.Split(out, "\n")
		for _, n := range names {
			if !slices.Contains(lines, n+" True") {
				return false, out
			}
		}
		return true, ""
	})
}

// TestSimulatedLAN checks the helper itself, without a cluster: three machines on a LAN
// of their own reach each other by address and nothing else, and a process started on
// a machine sees the machine's network as its own.
func TestSimulatedLAN(t *testing.T) {
	prefix := fmt.Sprintf("sl%d-", runID)
	l := newLAN(t, prefix+"lan", netip.MustParsePrefix("192.168.90.0/24"), netip.Addr{})
	var ms []*machine
	for i, name := range []string{"a", "b", "c"} {
		ms = append(ms, l.addMachine(t, name, prefix+name, netip.AddrFrom4([4]byte{192, 168, 90, byte(10 + i)})))
	}
	ln, err := netns.Listen(ms[2].ns, "tcp", "192.168.90.12:7000")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(c.RemoteAddr().String()))
			c.Close()
		}
	}()
	for _, from := range ms[:2] {
		conn, err := netns.Dial(from.ns, "tcp", "192.168.90.12:7000", 2*time.Second)
		if err != nil {
			t.Fatalf("machine %s to c: %v", from.name, err)
		}
		b := make([]byte, 64)
		n, _ := conn.Read(b)
		conn.Close()
		if got, _, _ := strings.Cut(string(b[:n]), ":"); got != from.addr.String() {
			t.Errorf("c saw machine %s as %q, want %s", from.name, got, from.addr)
		}
	}
	logPath := filepath.Join(t.TempDir(), "ip.log")
	ms[0].start(t, exec.Command("ip", "-brief", "addr", "show", "eth0"), logPath)
	eventually(t, 10*time.Second, "a process on machine a sees a's eth0", func() (bool, string) {
		out, _ := os.ReadFile(logPath)
		return strings.Contains(string(out), "192.168.90.10/24"), string(out)
	})
}
