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
	"github.com/tranche/tranche/internal/controller/servicelb"
	"github.com/tranche/tranche/internal/dns"
	"github.com/tranche/tranche/internal/netns"
	"github.com/tranche/tranche/internal/proxy"
	"github.com/tranche/tranche/internal/publisher"
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
	r, err := openUp(cfg)
	if err != nil {
		return err
	}
	unlock, err := r.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := r.removeLeftovers(); err != nil {
		return err
	}
	if err := r.restoreOrCreate(); err != nil {
		return err
	}
	if err := r.buildNetwork(); err != nil {
		return err
	}

	// From here on everything stops through this one path, whatever fails.
	srv := newServerRun(ctx)
	defer func() {
		stopErr := shutdown(cfg, r.p, r.addr.prefix, srv.stop, srv.done, srv.started)
		if err == nil {
			err = stopErr
		}
		fmt.Fprintln(r.out, "cluster stopped")
	}()
	stopRelay, err := r.startServer(ctx, srv)
	if err != nil {
		return err
	}
	defer stopRelay()
	client, err := adminClient(r.p)
	if err != nil {
		return err
	}
	pubCtx, stopPublisher := context.WithCancel(srv.ctx)
	defer stopPublisher()
	if err := startPublisher(pubCtx, r.p, r.state.Topology.Underlay(), r.sc.LoadBalancerPool, r.pubHost, cfg.logger()); err != nil {
		return err
	}
	procs, err := r.startAgents()
	if err != nil {
		return err
	}
	if err := r.waitReady(ctx, client, procs); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	supCtx, stopSupervising := context.WithCancel(ctx)
	defer stopSupervising() // before the shutdown stops the agents
	for _, a := range procs {
		go superviseAgent(supCtx, cfg, a, r.out)
	}
	fmt.Fprintf(r.out, "cluster ready in %.1fs\n\nexport KUBECONFIG=%s\n\n", time.Since(start).Seconds(), filepath.Join(r.dataDir, "kubeconfig"))
	if ready != nil {
		close(ready)
	}
	return srv.wait(ctx)
}

// bringUp is one run of Up, filled in by its steps in order.
type bringUp struct {
	cfg     Config
	out     io.Writer
	p       paths
	dataDir string // absolute
	// recorded is the cluster.json found at the start (zero for a new cluster).
	recorded State
	// name is the name recorded for the cluster, empty for none (a data dir given
	// without --name keeps its own name, or none).
	name string
	// addr are the namespace prefix, API address and load-balancer pool of this run.
	addr addresses
	// state is the cluster being run (restoreOrCreate).
	state State
	// sc is the API server's configuration and pubHost the host side of the publisher
	// (startServer).
	sc      server.Config
	pubHost *publisher.Host
}

// openUp makes the data directory, reads what it records and settles the run's
// addresses: explicit ones, else recorded ones, else those chosen for the name.
func openUp(cfg Config) (*bringUp, error) {
	r := &bringUp{cfg: cfg, out: cfg.out(), p: cfg.paths()}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	var err error
	if r.dataDir, err = filepath.Abs(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	if s, err := LoadState(r.p.state()); err == nil {
		r.recorded = s
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	r.name = cfg.Name
	if rec := r.recorded.Name; rec != "" {
		if r.name != "" && r.name != rec {
			return nil, fmt.Errorf("the data dir %s holds the cluster %q, not %q: give --name %s, or another --data-dir", cfg.DataDir, rec, r.name, rec)
		}
		r.name = rec
	}
	r.addr = addresses{prefix: cfg.Prefix, listen: cfg.Server.Listen}
	if r.addr.prefix == "" {
		r.addr.prefix = r.recorded.Topology.Prefix
	}
	if r.addr.listen == "" {
		r.addr.listen = r.recorded.Listen
	}
	pool, poolKnown := "", true
	switch {
	case cfg.LoadBalancerPool != nil:
		pool = *cfg.LoadBalancerPool
	default:
		pool, poolKnown = recordedPool(r.recorded.LoadBalancerPool)
	}
	if r.addr.prefix == "" || r.addr.listen == "" || !poolKnown {
		t := taken{}
		if nameOr(r.name) != DefaultName {
			t = machineTaken(r.dataDir)
		}
		chosen, err := chooseAddresses(nameOr(r.name), t)
		if err != nil {
			return nil, err
		}
		if r.addr.prefix == "" {
			r.addr.prefix = chosen.prefix
		}
		if r.addr.listen == "" {
			r.addr.listen = chosen.listen
		}
		if !poolKnown {
			pool = chosen.pool
		}
	}
	r.addr.pool = pool
	return r, nil
}

// lock takes the data directory's pid lock and the namespace prefix's lock; the
// returned func releases both.
func (r *bringUp) lock() (func(), error) {
	p, prefix := r.p, r.addr.prefix
	pidLock, holder, err := tryLock(p.pidFile(), selfPIDRecord())
	if err != nil {
		return nil, err
	}
	if pidLock == nil {
		return nil, fmt.Errorf("a cluster is already running on %s (pid %s); stop it with `tranche down --data-dir %s`", r.cfg.DataDir, firstField(holder), r.cfg.DataDir)
	}
	prefixLock, holder, err := tryLock(prefixLockPath(prefix), fmt.Sprintf("%d %s", os.Getpid(), r.dataDir))
	if err != nil {
		os.Remove(p.pidFile())
		pidLock.release()
		return nil, err
	}
	if prefixLock == nil {
		os.Remove(p.pidFile())
		pidLock.release()
		pid, dir, _ := strings.Cut(holder, " ")
		return nil, fmt.Errorf("another cluster (pid %s, data dir %s) uses the network namespaces %s*; only one can run at a time: stop it with `tranche down --data-dir %s`, or start this one beside it under another name with `tranche up --name NAME`", pid, dir, prefix, dir)
	}
	return func() {
		os.Remove(prefixLockPath(prefix))
		prefixLock.release()
		os.Remove(p.pidFile())
		pidLock.release()
	}, nil
}

// removeLeftovers removes what a crashed run of this cluster left on the machine.
func (r *bringUp) removeLeftovers() error {
	if !leftovers(r.p, r.addr.prefix) {
		return nil
	}
	fmt.Fprintln(r.out, "removing leftovers of an earlier run")
	rep, err := cleanup(r.p, r.addr.prefix, r.cfg.stopGrace())
	if err != nil {
		return fmt.Errorf("removing leftovers of an earlier run: %w", err)
	}
	fmt.Fprintf(r.out, "  removed %s\n", rep)
	return nil
}

// restoreOrCreate settles the cluster's state, the recorded one or a new one of
// cfg.Nodes nodes, records it with this run's name and addresses, and prints them.
func (r *bringUp) restoreOrCreate() error {
	cfg, out := r.cfg, r.out
	state := r.recorded
	if len(r.recorded.Topology.Nodes) > 0 {
		state.Topology.Prefix = r.addr.prefix
		fmt.Fprintf(out, "restoring the cluster of %s: nodes %s\n", r.p.state(), strings.Join(state.nodeNames(), ", "))
		if cfg.Nodes > 0 && cfg.Nodes != len(state.Topology.Nodes) {
			fmt.Fprintf(out, "  (--nodes %d ignored: use `tranche node add|remove` to change a cluster, or `tranche down --purge` to start anew)\n", cfg.Nodes)
		}
	} else {
		s, err := newState(r.addr.prefix, max(cfg.Nodes, 1), cfg.Zones)
		if err != nil {
			return err
		}
		state = s
	}
	state.Name, state.Listen = r.name, r.addr.listen
	state.LoadBalancerPool = recordPool(r.addr.pool)
	state.ProxyMode, state.IPVSScheduler = proxyModeOf(cfg, state)
	state.Registries, state.ImageGC = cfg.Registries, cfg.ImageGC
	fmt.Fprintf(out, "proxy mode: %s\n", state.ProxyMode)
	if r.name != "" {
		shown := state.LoadBalancerPool
		fmt.Fprintf(out, "cluster %s: data dir %s, network namespaces %s*, API server https://%s, load balancers %s\n",
			r.name, r.dataDir, r.addr.prefix, r.addr.listen, shown)
	}
	r.state = state
	return writeState(r.p, state)
}

// proxyModeOf picks the nodes' proxy mode and IPVS scheduler: the configured ones, else
// the recorded ones, else nftables (and the agent's default scheduler). Another mode
// than the recorded one switches the cluster: each agent removes the old mode's rules
// at start.
func proxyModeOf(cfg Config, recorded State) (mode, scheduler string) {
	mode, scheduler = cfg.ProxyMode, cfg.IPVSScheduler
	if mode == "" {
		mode = recorded.ProxyMode
	}
	if mode == "" {
		mode = proxy.ModeNFTables
	}
	if scheduler == "" {
		scheduler = recorded.IPVSScheduler
	}
	return mode, scheduler
}

// buildNetwork builds the cluster network of the state's topology.
func (r *bringUp) buildNetwork() error {
	topo := r.state.Topology
	if err := clusternet.Up(topo); err != nil {
		_ = clusternet.Teardown(r.addr.prefix)
		return err
	}
	fmt.Fprintf(r.out, "network: %d nodes (underlay %s, pods %s, namespaces %s*)\n",
		len(topo.Nodes), topo.UnderlayCIDR, topo.ClusterCIDR, r.addr.prefix)
	return nil
}

// serverRun is the API server goroutine of Up.
type serverRun struct {
	ctx     context.Context // the server's; outlives Up's ctx until shutdown
	stop    context.CancelFunc
	done    chan error
	started bool
}

func newServerRun(ctx context.Context) *serverRun {
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	return &serverRun{ctx: sctx, stop: stop, done: make(chan error, 1)}
}

// wait returns nil when ctx ends, or the API server's error when it stops first.
func (s *serverRun) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-s.done:
		s.done <- err
		if err == nil {
			err = errors.New("the API server stopped")
		}
		return fmt.Errorf("API server: %w", err)
	}
}

// startServer opens the cluster listener and the DNS relay in the underlay namespace,
// starts the API server in srv and waits until it is ready. It returns the relay's stop
// func (the relay is already stopped when it fails).
func (r *bringUp) startServer(ctx context.Context, srv *serverRun) (func(), error) {
	cfg, topo := r.cfg, r.state.Topology
	lnAddr := netip.AddrPortFrom(topo.APIAddress, APIPort).String()
	ln, err := netns.Listen(topo.Underlay(), "tcp", lnAddr)
	if err != nil {
		return nil, err
	}
	dnsCfg, stopRelay, err := startDNSRelay(cfg, topo)
	if err != nil {
		ln.Close()
		return nil, err
	}
	dnsCfg.APIServer = "https://" + lnAddr
	sc := cfg.Server
	sc.DataDir = cfg.DataDir
	sc.Listen = r.addr.listen
	sc.Listeners = []net.Listener{ln}
	sc.AdvertiseAddress = topo.APIAddress
	sc.DNS = dnsCfg
	sc.AdvertisePort = APIPort
	underlay := topo.Underlay()
	sc.ClusterDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return netns.Dial(underlay, network, addr, 10*time.Second)
	}
	if !sc.ClusterCIDR.IsValid() {
		sc.ClusterCIDR = topo.ClusterCIDR
	}
	pool, err := servicelb.ParsePool(r.addr.pool)
	if err != nil {
		ln.Close()
		stopRelay()
		return nil, fmt.Errorf("--loadbalancer-pool: %w", err)
	}
	r.pubHost, sc.LoadBalancerPool = publisherHost(pool)
	srvReady := make(chan struct{})
	srv.started = true
	go func() {
		err := server.Run(srv.ctx, sc, srvReady)
		ln.Close()
		srv.done <- err
	}()
	if err := waitServer(ctx, srvReady, srv.done, cfg.readyTimeout()); err != nil {
		stopRelay()
		return nil, err
	}
	r.sc = sc
	fmt.Fprintf(r.out, "API server ready on https://%s (cluster listener %s in %s)\n", sc.Listen, lnAddr, topo.Underlay())
	return stopRelay, nil
}

// startAgents prepares every node's credentials and starts its agent.
func (r *bringUp) startAgents() ([]*agentProc, error) {
	var procs []*agentProc
	for _, n := range r.state.Topology.Nodes {
		if err := prepareNode(r.p, r.state.Topology, n.Name); err != nil {
			return nil, err
		}
		a, err := startAgent(r.cfg, r.state, n.Name, false)
		if err != nil {
			return nil, err
		}
		procs = append(procs, a)
	}
	fmt.Fprintf(r.out, "agents started: %s (logs in %s)\n", strings.Join(r.state.nodeNames(), ", "), filepath.Join(r.cfg.DataDir, "nodes", "NAME", "agent.log"))
	return procs, nil
}

// waitReady waits until every node is Ready and, unless cfg.NoDNSWait, the cluster
// DNS answers from the first node.
func (r *bringUp) waitReady(ctx context.Context, client kubernetes.Interface, procs []*agentProc) error {
	if err := waitNodesReady(ctx, client, r.state.nodeNames(), procs, r.cfg.readyTimeout(), r.out); err != nil {
		return err
	}
	if r.cfg.NoDNSWait {
		return nil
	}
	nodeNS := r.state.Topology.NodeNamespace(r.state.Topology.Nodes[0].Name)
	return waitDNS(ctx, client, nodeNS, r.cfg.readyTimeout(), r.out)
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
