package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/internal/clusternet"
	"github.com/tranche/tranche/internal/dns"
	"github.com/tranche/tranche/internal/netns"
	"github.com/tranche/tranche/internal/server"
)

// Up runs the local cluster until ctx ends: it takes the cluster's locks (one cluster per
// data directory and per namespace prefix), removes what a crashed run left, restores
// the cluster from cluster.json or creates one of cfg.Nodes nodes, builds the network,
// starts the API server with its cluster listener in the underlay namespace, starts one
// agent per node and waits until every node is Ready; then it prints the
// `export KUBECONFIG=` line and closes ready (which may be nil). When ctx ends (or the
// API server fails) it stops the agents and whatever still runs in the cluster's
// namespaces, stops the API server, removes the namespaces and unmounts what is mounted
// below the data directory. It returns nil after a clean stop on ctx.
func Up(ctx context.Context, cfg Config, ready chan<- struct{}) (err error) {
	start := time.Now()
	out := cfg.out()
	p := cfg.paths()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	var recorded State
	if s, err := LoadState(p.state()); err == nil {
		recorded = s
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	prefix := cfg.prefixOf(recorded.Topology.Prefix)

	pidLock, holder, err := tryLock(p.pidFile(), selfPIDRecord())
	if err != nil {
		return err
	}
	if pidLock == nil {
		return fmt.Errorf("a cluster is already running on %s (pid %s); stop it with `tranche down --data-dir %s`", cfg.DataDir, firstField(holder), cfg.DataDir)
	}
	defer pidLock.release()
	defer os.Remove(p.pidFile())
	prefixLock, holder, err := tryLock(prefixLockPath(prefix), fmt.Sprintf("%d %s", os.Getpid(), dataDir))
	if err != nil {
		return err
	}
	if prefixLock == nil {
		pid, dir, _ := strings.Cut(holder, " ")
		return fmt.Errorf("another cluster (pid %s, data dir %s) uses the network namespaces %s*; only one can run at a time: stop it with `tranche down --data-dir %s`", pid, dir, prefix, dir)
	}
	defer prefixLock.release()
	defer os.Remove(prefixLockPath(prefix))

	if leftovers(p, prefix) {
		fmt.Fprintln(out, "removing leftovers of an earlier run")
		rep, err := cleanup(p, prefix, cfg.stopGrace())
		if err != nil {
			return fmt.Errorf("removing leftovers of an earlier run: %w", err)
		}
		fmt.Fprintf(out, "  removed %s\n", rep)
	}

	state := recorded
	if len(recorded.Topology.Nodes) > 0 {
		state.Topology.Prefix = prefix
		fmt.Fprintf(out, "restoring the cluster of %s: nodes %s\n", p.state(), strings.Join(state.nodeNames(), ", "))
		if cfg.Nodes > 0 && cfg.Nodes != len(state.Topology.Nodes) {
			fmt.Fprintf(out, "  (--nodes %d ignored: use `tranche node add|remove` to change a cluster, or `tranche down --purge` to start anew)\n", cfg.Nodes)
		}
	} else if state, err = newState(prefix, max(cfg.Nodes, 1), cfg.Zones); err != nil {
		return err
	}
	if err := writeState(p, state); err != nil {
		return err
	}

	if err := clusternet.Up(state.Topology); err != nil {
		_ = clusternet.Teardown(prefix)
		return err
	}
	fmt.Fprintf(out, "network: %d nodes (underlay %s, pods %s, namespaces %s*)\n",
		len(state.Topology.Nodes), state.Topology.UnderlayCIDR, state.Topology.ClusterCIDR, prefix)

	// From here on everything stops through this one path, whatever fails.
	srvCtx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	srvDone := make(chan error, 1)
	serverStarted := false
	defer func() {
		stopErr := shutdown(cfg, p, prefix, stopServer, srvDone, serverStarted)
		if err == nil {
			err = stopErr
		}
		fmt.Fprintln(out, "cluster stopped")
	}()

	lnAddr := netip.AddrPortFrom(state.Topology.APIAddress, APIPort).String()
	ln, err := netns.Listen(state.Topology.Underlay(), "tcp", lnAddr)
	if err != nil {
		return err
	}
	dnsCfg, stopRelay, err := startDNSRelay(cfg, state.Topology)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopRelay()
	dnsCfg.APIServer = "https://" + lnAddr
	sc := cfg.Server
	sc.DataDir = cfg.DataDir
	if sc.Listen == "" {
		sc.Listen = "127.0.0.1:6443"
	}
	sc.Listeners = []net.Listener{ln}
	sc.AdvertiseAddress = state.Topology.APIAddress
	sc.DNS = dnsCfg
	sc.AdvertisePort = APIPort
	underlay := state.Topology.Underlay()
	sc.ClusterDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return netns.Dial(underlay, network, addr, 10*time.Second)
	}
	if !sc.ClusterCIDR.IsValid() {
		sc.ClusterCIDR = state.Topology.ClusterCIDR
	}
	pubHost, lbPool := publisherHost(sc.LoadBalancerPool)
	sc.LoadBalancerPool = lbPool
	srvReady := make(chan struct{})
	serverStarted = true
	go func() {
		err := server.Run(srvCtx, sc, srvReady)
		ln.Close()
		srvDone <- err
	}()
	if err := waitServer(ctx, srvReady, srvDone, cfg.readyTimeout()); err != nil {
		return err
	}
	fmt.Fprintf(out, "API server ready on https://%s (cluster listener %s in %s)\n", sc.Listen, lnAddr, state.Topology.Underlay())

	client, err := adminClient(p)
	if err != nil {
		return err
	}
	pubCtx, stopPublisher := context.WithCancel(srvCtx)
	defer stopPublisher()
	if err := startPublisher(pubCtx, p, state.Topology.Underlay(), sc.LoadBalancerPool, pubHost, cfg.logger()); err != nil {
		return err
	}
	var procs []*agentProc
	for _, n := range state.Topology.Nodes {
		if err := prepareNode(p, state.Topology, n.Name); err != nil {
			return err
		}
		a, err := startAgent(cfg, state, n.Name, false)
		if err != nil {
			return err
		}
		procs = append(procs, a)
	}
	fmt.Fprintf(out, "agents started: %s (logs in %s)\n", strings.Join(state.nodeNames(), ", "), filepath.Join(cfg.DataDir, "nodes", "NAME", "agent.log"))
	if err := waitNodesReady(ctx, client, state.nodeNames(), procs, cfg.readyTimeout(), out); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if !cfg.NoDNSWait {
		nodeNS := state.Topology.NodeNamespace(state.Topology.Nodes[0].Name)
		if err := waitDNS(ctx, client, nodeNS, cfg.readyTimeout(), out); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	supCtx, stopSupervising := context.WithCancel(ctx)
	defer stopSupervising() // before the shutdown stops the agents
	for _, a := range procs {
		go superviseAgent(supCtx, cfg, a, out)
	}
	fmt.Fprintf(out, "cluster ready in %.1fs\n\nexport KUBECONFIG=%s\n\n", time.Since(start).Seconds(), filepath.Join(dataDir, "kubeconfig"))
	if ready != nil {
		close(ready)
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-srvDone:
		srvDone <- err
		if err == nil {
			err = errors.New("the API server stopped")
		}
		return fmt.Errorf("API server: %w", err)
	}
}

// superviseAgent starts a node's agent again whenever it ends while the cluster runs,
// as a node's service manager restarts kubelet: after 100 ms (systemd's RestartSec
// default), doubling up to 30 s while it keeps failing within a minute of its start. Its pods' containers run on in the
// node's shim meanwhile, and the new agent adopts them. An agent whose node was
// removed (tranche node remove) is not restarted.
func superviseAgent(ctx context.Context, cfg Config, a *agentProc, out io.Writer) {
	const firstDelay = 100 * time.Millisecond
	delay := firstDelay
	for {
		started := time.Now()
		select {
		case <-ctx.Done():
			return
		case <-a.done:
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > time.Minute {
			delay = firstDelay
		}
		fmt.Fprintf(out, "agent of node %s ended (%v): starting it again in %s\n", a.node, a.err, delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
		// Under the state lock, which `tranche node remove` holds from before it stops
		// the agent until the node is out of the cluster state.
		next, removed, err := restartAgent(cfg, a.node)
		if removed {
			return
		}
		if err != nil {
			fmt.Fprintf(out, "agent of node %s: %v\n", a.node, err)
			continue
		}
		a = next
	}
}

// restartAgent starts node's agent again unless the node has left the cluster state;
// it holds the state lock meanwhile.
func restartAgent(cfg Config, node string) (a *agentProc, removed bool, err error) {
	l, err := waitLock(cfg.paths().stateLock())
	if err != nil {
		return nil, false, err
	}
	defer l.release()
	s, err := LoadState(cfg.paths().state())
	if err != nil {
		return nil, false, err
	}
	if _, ok := s.Topology.Node(node); !ok {
		return nil, true, nil
	}
	a, err = startAgent(cfg, s, node, false)
	return a, false, err
}

// waitServer waits until the API server is ready, fails, ctx ends or timeout passes.
func waitServer(ctx context.Context, ready <-chan struct{}, done chan error, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ready:
		return nil
	case err := <-done:
		done <- err
		if err == nil {
			err = errors.New("it stopped before it was ready")
		}
		return fmt.Errorf("API server: %w", err)
	case <-ctx.Done():
		return nil
	case <-t.C:
		return fmt.Errorf("API server not ready after %s", timeout)
	}
}

// shutdown stops a cluster Up started: agents (their process groups, SIGTERM then
// SIGKILL), anything left in the cluster's namespaces, the API server, the namespaces,
// and mounts below the data directory.
func shutdown(cfg Config, p paths, prefix string, stopServer context.CancelFunc, srvDone chan error, serverStarted bool) error {
	var errs []error
	_, err := stopRecordedAgents(p, cfg.stopGrace())
	errs = append(errs, err)
	names, err := netns.List(prefix)
	errs = append(errs, err)
	_, err = killNamespaceProcesses(names, 2*time.Second)
	errs = append(errs, err)
	stopServer()
	if serverStarted {
		if err := <-srvDone; err != nil {
			errs = append(errs, fmt.Errorf("API server: %w", err))
		}
	}
	errs = append(errs, clusternet.Teardown(prefix))
	_, err = unmountUnder(cfg.DataDir)
	errs = append(errs, err)
	return errors.Join(errs...)
}

// writeState saves s as cluster.json under the state lock.
func writeState(p paths, s State) error {
	l, err := waitLock(p.stateLock())
	if err != nil {
		return err
	}
	defer l.release()
	return saveState(p.state(), s)
}

// firstField returns the first space-separated field of s.
func firstField(s string) string {
	f, _, _ := strings.Cut(s, " ")
	return f
}

// startDNSRelay opens the relay the cluster DNS forwards other names to, on port 53
// of the API server's underlay address (pods have no route out of the cluster
// network), towards cfg.UpstreamDNS or the host's resolvers.
func startDNSRelay(cfg Config, topo clusternet.Topology) (server.DNSConfig, func(), error) {
	ups := cfg.UpstreamDNS
	if len(ups) == 0 {
		var err error
		if ups, err = dns.ResolvConfUpstreams("/etc/resolv.conf"); err != nil {
			fmt.Fprintf(cfg.out(), "no upstream DNS (%v): the cluster DNS refuses names outside the cluster; give --upstream-dns\n", err)
			return server.DNSConfig{}, func() {}, nil
		}
	}
	addr := netip.AddrPortFrom(topo.APIAddress, 53).String()
	pc, err := netns.ListenPacket(topo.Underlay(), "udp", addr)
	if err != nil {
		return server.DNSConfig{}, nil, fmt.Errorf("cluster DNS relay: %w", err)
	}
	ln, err := netns.Listen(topo.Underlay(), "tcp", addr)
	if err != nil {
		pc.Close()
		return server.DNSConfig{}, nil, fmt.Errorf("cluster DNS relay: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = (&dns.Relay{Upstreams: ups, Logger: cfg.logger().With("component", "dns-relay")}).Serve(ctx, pc, ln)
		close(done)
	}()
	return server.DNSConfig{Upstreams: []string{addr}}, func() { cancel(); <-done }, nil
}

// waitDNS waits until the cluster DNS answers kubernetes.default from a node.
func waitDNS(ctx context.Context, client kubernetes.Interface, nodeNS string, timeout time.Duration, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dial := func(network, addr string, t time.Duration) (net.Conn, error) {
		return netns.Dial(nodeNS, network, addr, t)
	}
	addrs := func(ctx context.Context) []string { return dns.KubeDNSAddrs(ctx, client) }
	at, err := dns.WaitAnswers(ctx, dial, addrs, "kubernetes.default.svc.cluster.local.")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "cluster DNS answers (%s)\n", at)
	return nil
}
