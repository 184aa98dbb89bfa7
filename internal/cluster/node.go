package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/clusternet"
	"github.com/tranche/tranche/internal/netns"
)

// openRunning checks that a cluster runs on cfg.DataDir and takes the state lock, which
// the caller releases; it returns the recorded state.
func openRunning(cfg Config) (State, *lock, error) {
	p := cfg.paths()
	if running, _ := held(p.pidFile()); !running {
		return State{}, nil, fmt.Errorf("no cluster is running on %s; start it with `tranche up --data-dir %s`", cfg.DataDir, cfg.DataDir)
	}
	l, err := waitLock(p.stateLock())
	if err != nil {
		return State{}, nil, err
	}
	s, err := LoadState(p.state())
	if err != nil {
		l.release()
		return State{}, nil, err
	}
	return s, l, nil
}

// AddNode adds node name (in zone, when not empty) to the cluster running on
// cfg.DataDir: its Node (registered first, so that node IPAM gives it its pod subnet),
// its network (the lowest free underlay address, that pod subnet), its
// credentials, cluster.json, and its agent, started detached with its pid recorded so
// that the cluster's `up` process or `tranche down` stops it. It returns once the node
// is Ready. When the agent fails the node stays in the cluster for `RemoveNode`.
func AddNode(ctx context.Context, cfg Config, name, zone string) error {
	out := cfg.out()
	p := cfg.paths()
	s, l, err := openRunning(cfg)
	if err != nil {
		return err
	}
	defer l.release()
	if _, ok := s.Topology.Node(name); ok {
		return fmt.Errorf("node %q is already in the cluster on %s", name, cfg.DataDir)
	}
	client, err := adminClient(p)
	if err != nil {
		return err
	}
	n, err := s.Topology.NextNode(name)
	if err != nil {
		return err
	}
	// The pod subnet comes from node IPAM, as a joined machine's does: picking one here
	// from the Nodes listed would race with a machine joining meanwhile.
	if n.PodCIDR, err = reserveNode(ctx, client, name, cfg.readyTimeout()); err != nil {
		return err
	}
	placed := false
	defer func() {
		if !placed {
			_ = client.CoreV1().Nodes().Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
		}
	}()
	topo, err := clusternet.AddNode(s.Topology, n)
	if err != nil {
		return err
	}
	s.Topology = topo
	s.setZone(name, zone)
	if err := saveState(p.state(), s); err != nil {
		return err
	}
	placed = true
	fmt.Fprintf(out, "network: node %s added (underlay %s, pods %s)\n", name, n.Underlay, n.PodCIDR)
	if err := prepareNode(p, s.Topology, name); err != nil {
		return err
	}
	a, err := startAgent(cfg, s, name, true)
	if err != nil {
		return fmt.Errorf("%w\nremove the node with `tranche node remove %s`", err, name)
	}
	fmt.Fprintf(out, "agent started (pid %d, log %s)\n", a.cmd.Process.Pid, a.log)
	if err := waitNodesReady(ctx, client, []string{name}, []*agentProc{a}, cfg.readyTimeout(), out); err != nil {
		return fmt.Errorf("%w\nremove the node with `tranche node remove %s`", err, name)
	}
	return nil
}

// RemoveNode removes node name from the cluster running on cfg.DataDir without draining
// it: it stops the node's agent and whatever else runs in the node's namespace, deletes
// the Node object, removes the node from the network and from cluster.json, and
// deletes its credentials (its log stays).
func RemoveNode(ctx context.Context, cfg Config, name string) error {
	out := cfg.out()
	p := cfg.paths()
	s, l, err := openRunning(cfg)
	if err != nil {
		return err
	}
	defer l.release()
	if _, ok := s.Topology.Node(name); !ok {
		return fmt.Errorf("node %q is not in the cluster on %s", name, cfg.DataDir)
	}
	fmt.Fprintf(out, "node %s is not drained: its pods stop with it\n", name)
	if pid, ok := livePID(p.agentPID(name)); ok {
		StopGroup(pid, cfg.stopGrace())
		fmt.Fprintf(out, "stopped the agent (pid %d)\n", pid)
	}
	if err := os.Remove(p.agentPID(name)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("node %q: %w", name, err)
	}
	if _, err := killNamespaceProcesses([]string{s.Topology.NodeNamespace(name)}, 2*time.Second); err != nil {
		return fmt.Errorf("node %q: %w", name, err)
	}
	// Containers outlive their agent (runc has no parent-death signal): the node's
	// cgroup holds them all.
	if err := runc.RemoveNode(runc.NodeCgroup(s.Topology.NodeNamespace(name))); err != nil {
		return fmt.Errorf("node %q: %w", name, err)
	}
	client, err := adminClient(p)
	if err != nil {
		return err
	}
	err = client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Node %q: %w", name, err)
	}
	fmt.Fprintf(out, "deleted Node %s\n", name)
	topo, err := clusternet.RemoveNode(s.Topology, name)
	if err != nil {
		return err
	}
	s.Topology = topo
	s.setZone(name, "")
	if err := saveState(p.state(), s); err != nil {
		return err
	}
	if _, err := unmountUnder(p.nodeDir(name)); err != nil {
		return fmt.Errorf("node %q: %w", name, err)
	}
	for _, f := range []string{"kubeconfig", "client.crt", "client.key"} {
		if err := os.Remove(filepath.Join(p.nodeDir(name), f)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("node %q: %w", name, err)
		}
	}
	if netns.Exists(s.Topology.NodeNamespace(name)) {
		return fmt.Errorf("node %q: network namespace %s still exists", name, s.Topology.NodeNamespace(name))
	}
	fmt.Fprintf(out, "network: node %s removed\n", name)
	return nil
}

// reserveNode registers Node name without a pod subnet and returns the one node IPAM
// gives it: node IPAM hands out every subnet a Node does not bring, so the new node
// and a machine joining meanwhile cannot be given the same. A Node of that name
// already registered is refused.
func reserveNode(ctx context.Context, client kubernetes.Interface, name string, timeout time.Duration) (netip.Prefix, error) {
	_, err := client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return netip.Prefix{}, fmt.Errorf("node %q: a Node of that name is already registered (a machine that joined?)", name)
	}
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("node %q: registering its Node: %w", name, err)
	}
	var cidr netip.Prefix
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil || n.Spec.PodCIDR == "" {
			return false, nil
		}
		cidr, err = netip.ParsePrefix(n.Spec.PodCIDR)
		return true, err
	})
	if err != nil {
		_ = client.CoreV1().Nodes().Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
		return netip.Prefix{}, fmt.Errorf("node %q: node IPAM gave its Node no pod subnet within %s (is the controller manager running, with a free subnet in the cluster CIDR?): %w", name, timeout, err)
	}
	return cidr, nil
}
