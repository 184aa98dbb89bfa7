package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tranche/tranche/internal/allocator"
	"github.com/tranche/tranche/internal/netns"
	"github.com/tranche/tranche/internal/server"
	"github.com/tranche/tranche/internal/testutil"
)

// standInEnv makes the test binary act as a node agent: it takes `tranche agent`'s
// flags, registers its Node as Ready through the cluster listener with the node's own
// credentials, and waits for SIGTERM. So the test runs the real start-up path (node
// namespace, underlay, node certificate) without the real agent.
const standInEnv = "TRANCHE_CLUSTER_TEST_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(standInEnv) == "1" {
		os.Exit(standInAgent(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func standInAgent(args []string) int {
	flags := map[string]string{}
	for i := 1; i+1 < len(args); i += 2 {
		flags[args[i]] = args[i+1]
	}
	name := flags["--node-name"]
	rc, err := clientcmd.BuildConfigFromFlags("", flags["--kubeconfig"])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	client := kubernetes.NewForConfigOrDie(rc)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if z := flags["--zone"]; z != "" {
		node.Labels[v1.LabelTopologyZone] = z
	}
	for ctx.Err() == nil {
		err = register(ctx, client, node)
		if err == nil {
			fmt.Println("stand-in agent: node", name, "Ready")
			break
		}
		fmt.Fprintln(os.Stderr, "stand-in agent:", err)
		time.Sleep(200 * time.Millisecond)
	}
	<-ctx.Done()
	return 0
}

func register(ctx context.Context, client kubernetes.Interface, node *v1.Node) error {
	n, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		n, err = client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	now := metav1.Now()
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "StandIn",
		LastHeartbeatTime: now, LastTransitionTime: now}}
	_, err = client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func testConfig(t *testing.T, prefix, dataDir string, out *testutil.Buffer) Config {
	ports, err := allocator.ParsePortRange("30000-32767")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		DataDir: dataDir,
		Prefix:  prefix,
		Nodes:   2,
		Zones:   []string{"a", "b"},
		Server: server.Config{
			Listen:      freePort(t),
			ServiceCIDR: netip.MustParsePrefix("10.96.0.0/12"),
			NodePorts:   ports,
			Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		},
		AgentCommand: func(a Agent) *exec.Cmd {
			cmd := exec.Command(self, a.Args()...)
			cmd.Env = append(os.Environ(), standInEnv+"=1")
			return cmd
		},
		Out:          out,
		ReadyTimeout: 30 * time.Second,
		StopGrace:    2 * time.Second,
		NoDNSWait:    true, // the stand-in agents run no pods
	}
}

// running cluster started by startUp.
type upRun struct {
	cancel context.CancelFunc
	done   chan error
}

func startUp(t *testing.T, cfg Config) *upRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &upRun{cancel: cancel, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() { r.done <- Up(ctx, cfg, ready) }()
	select {
	case <-ready:
	case err := <-r.done:
		r.done <- err
		t.Fatalf("Up: %v\noutput:\n%s", err, cfg.Out)
	case <-time.After(45 * time.Second):
		t.Fatalf("Up not ready after 45s; output:\n%s", cfg.Out)
	}
	return r
}

func (r *upRun) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err
		if err != nil {
			t.Errorf("Up returned %v after stop", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Up did not return 30s after its context ended")
	}
}

// machineState is what a cluster must leave as it found it: the root namespace's links
// and routes, and namespaces, mounts and processes belonging to the test's cluster.
func machineState(t *testing.T, prefix, dataDir string) map[string]string {
	t.Helper()
	s := map[string]string{}
	for _, args := range [][]string{{"-br", "link"}, {"-br", "addr"}, {"-4", "route"}} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v", args, err)
		}
		s["ip "+strings.Join(args, " ")] = string(out)
	}
	names, err := netns.List(prefix)
	if err != nil {
		t.Fatal(err)
	}
	s["netns"] = strings.Join(names, " ")
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mounts, _ := mountsUnder(f, absPath(dataDir))
	f.Close()
	s["mounts"] = strings.Join(mounts, " ")
	s["processes"] = strings.Join(processesMentioning(dataDir), " ")
	return s
}

// processesMentioning lists live processes whose command line contains s (agents carry
// the data directory in their flags).
func processesMentioning(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte(s)) && e.Name() != fmt.Sprint(os.Getpid()) {
			var pid int
			if _, err := fmt.Sscan(e.Name(), &pid); err == nil && running(pid) {
				out = append(out, e.Name()+":"+strings.ReplaceAll(string(cmdline), "\x00", " "))
			}
		}
	}
	return out
}

func sameNetNS(t *testing.T, pid int, ns string) bool {
	t.Helper()
	var a, b unix.Stat_t
	if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &a) != nil || unix.Stat(netns.Path(ns), &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// startStray starts a process in namespace ns as a pod process would be: in a session of
// its own, not recorded anywhere.
func startStray(t *testing.T, ns string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "3600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := netns.StartProcess(ns, cmd); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd
}

func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
}

func TestLifecycle(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	prefix := fmt.Sprintf("tk%03d-", os.Getpid()%1000)
	dataDir := t.TempDir()
	before := machineState(t, prefix, dataDir)
	out := &testutil.Buffer{}
	cfg := testConfig(t, prefix, dataDir, out)
	// Registered after TempDir: runs before it, also after a failure.
	t.Cleanup(func() {
		if err := Down(context.Background(), Config{DataDir: dataDir, Prefix: prefix, StopGrace: time.Second}, false); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if diff := diffState(before, machineState(t, prefix, dataDir)); diff != "" {
			t.Errorf("the machine is not as the test found it:\n%s", diff)
		}
		if t.Failed() {
			t.Logf("progress output:\n%s", out)
		}
	})
	ctx := context.Background()

	up := startUp(t, cfg)
	wantNS := []string{prefix + "net", prefix + "tranche-1", prefix + "tranche-2"}
	if names, _ := netns.List(prefix); !slices.Equal(names, wantNS) {
		t.Errorf("namespaces = %v, want %v", names, wantNS)
	}
	state, err := LoadState(filepath.Join(dataDir, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(state.Zones); got != "map[tranche-1:a tranche-2:b]" {
		t.Errorf("zones = %s", got)
	}
	if state.ProxyMode != "nftables" {
		t.Errorf("recorded proxy mode %q, want the default nftables", state.ProxyMode)
	}
	for i, n := range state.Topology.Nodes {
		if want := netip.AddrFrom4([4]byte{10, 240, 0, byte(10 + i)}); n.Underlay != want {
			t.Errorf("node %s underlay %s, want %s", n.Name, n.Underlay, want)
		}
		pid, ok := livePID(filepath.Join(dataDir, "nodes", n.Name, "agent.pid"))
		if !ok || !sameNetNS(t, pid, prefix+n.Name) {
			t.Errorf("agent of %s (pid %d, %v) is not running in its namespace", n.Name, pid, ok)
		}
	}
	for _, want := range []string{"proxy mode: nftables", "network: 2 nodes", "API server ready on https://", "node tranche-1 Ready", "node tranche-2 Ready", "cluster ready in", "export KUBECONFIG=" + dataDir} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("progress output lacks %q:\n%s", want, out)
		}
	}

	t.Run("one cluster per data dir and prefix", func(t *testing.T) {
		err := Up(ctx, testConfig(t, prefix, dataDir, &testutil.Buffer{}), nil)
		if err == nil || !strings.Contains(err.Error(), "a cluster is already running on "+dataDir) {
			t.Errorf("second Up on the data dir: %v", err)
		}
		err = Up(ctx, testConfig(t, prefix, t.TempDir(), &testutil.Buffer{}), nil)
		if err == nil || !strings.Contains(err.Error(), "only one can run at a time") {
			t.Errorf("second Up with the prefix: %v", err)
		}
	})

	client, err := adminClient(cfg.paths())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("node add and remove", func(t *testing.T) {
		if err := AddNode(ctx, cfg, "extra", "c"); err != nil {
			t.Fatalf("AddNode: %v", err)
		}
		s, _ := LoadState(filepath.Join(dataDir, "cluster.json"))
		n, ok := s.Topology.Node("extra")
		if !ok || n.Underlay != netip.MustParseAddr("10.240.0.12") || s.Zones["extra"] != "c" || !netns.Exists(prefix+"extra") {
			t.Errorf("after AddNode: node %+v %v, zones %v", n, ok, s.Zones)
		}
		if err := AddNode(ctx, cfg, "extra", ""); err == nil {
			t.Error("adding extra twice succeeded")
		}
		pid, _ := livePID(filepath.Join(dataDir, "nodes", "extra", "agent.pid"))
		if err := RemoveNode(ctx, cfg, "extra"); err != nil {
			t.Fatalf("RemoveNode: %v", err)
		}
		if running(pid) || netns.Exists(prefix+"extra") {
			t.Errorf("after RemoveNode: agent running %v, namespace exists %v", running(pid), netns.Exists(prefix+"extra"))
		}
		if _, err := client.CoreV1().Nodes().Get(ctx, "extra", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Node extra after RemoveNode: %v", err)
		}
		s, _ = LoadState(filepath.Join(dataDir, "cluster.json"))
		if _, ok := s.Topology.Node("extra"); ok || s.Zones["extra"] != "" {
			t.Errorf("cluster.json still has node extra: %+v", s)
		}
	})

	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stray := startStray(t, prefix+"tranche-1")
	mountTmpfs(t, filepath.Join(dataDir, "nodes", "tranche-1", "volumes", "v"))
	up.stop(t)
	if diff := diffState(before, machineState(t, prefix, dataDir)); diff != "" {
		t.Errorf("after Up stopped, the machine is not as before:\n%s", diff)
	}
	if running(stray.Process.Pid) {
		t.Error("a process in a node namespace survived the stop")
	}

	t.Run("restart restores the cluster", func(t *testing.T) {
		up := startUp(t, cfg)
		defer up.stop(t)
		s, err := LoadState(filepath.Join(dataDir, "cluster.json"))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(s) != fmt.Sprint(state) {
			t.Errorf("restored state %+v, want %+v", s, state)
		}
		if !strings.Contains(out.String(), "restoring the cluster") {
			t.Errorf("no restore message:\n%s", out)
		}
		if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{}); err != nil {
			t.Errorf("ConfigMap kept after restart: %v", err)
		}
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) != 2 {
			t.Errorf("nodes after restart: %v, %v", nodes, err)
		}
	})

	t.Run("down removes a crashed cluster's leftovers", func(t *testing.T) {
		// What a crashed `up` leaves: a node namespace with its agent (pid recorded), a
		// pod namespace with a process nobody recorded, a mount below the data dir.
		for _, ns := range []string{prefix + "tranche-1", prefix + "pod-x"} {
			if err := netns.Create(ns); err != nil {
				t.Fatal(err)
			}
		}
		agent := startStray(t, prefix+"tranche-1")
		if err := writePIDFile(filepath.Join(dataDir, "nodes", "tranche-1", "agent.pid"), agent.Process.Pid); err != nil {
			t.Fatal(err)
		}
		pod := startStray(t, prefix+"pod-x")
		mountTmpfs(t, filepath.Join(dataDir, "nodes", "tranche-1", "volumes", "w"))
		var downOut bytes.Buffer
		if err := Down(ctx, Config{DataDir: dataDir, Out: &downOut, StopGrace: time.Second}, true); err != nil {
			t.Fatalf("Down: %v", err)
		}
		if running(agent.Process.Pid) || running(pod.Process.Pid) {
			t.Errorf("processes survived Down: agent %v, pod %v", running(agent.Process.Pid), running(pod.Process.Pid))
		}
		if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--purge left %s: %v", dataDir, err)
		}
		if want := "removed 1 agent, 1 process, 2 network namespaces, 1 mount"; !strings.Contains(downOut.String(), want) {
			t.Errorf("Down output %q lacks %q", downOut.String(), want)
		}
	})
}

func diffState(before, after map[string]string) string {
	var b strings.Builder
	for k, v := range before {
		if after[k] != v {
			fmt.Fprintf(&b, "%s:\nbefore:\n%s\nafter:\n%s\n", k, v, after[k])
		}
	}
	return b.String()
}
