// Package cluster runs a local tranche cluster on one machine (`tranche up`, `down`,
// `node add|remove`): the cluster network of clusternet, the API server in this process
// with a second listener inside the underlay namespace, and one `tranche agent` child
// per node started inside that node's namespace. Everything a cluster leaves on the
// machine is found again from its data directory (pid files, cluster.json) and its
// namespace prefix, so a crashed cluster is cleaned up by the next `up` or by `down`.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tranche/tranche/internal/auth/pki"
	"github.com/tranche/tranche/internal/clusternet"
	"github.com/tranche/tranche/internal/logging"
	"github.com/tranche/tranche/internal/netns"
	"github.com/tranche/tranche/internal/server"
)

// DefaultPrefix starts the name of every network namespace of the production cluster.
const DefaultPrefix = "tr-"

// PIDFile is the file in the data directory naming the running `tranche up` process;
// that process holds a lock on it while it runs.
const PIDFile = "tranche.pid"

// APIPort is the port of the API server's cluster listener on the underlay.
const APIPort = 6443

// LockDir holds one lock file per namespace prefix, so two clusters never share
// namespaces even with different data directories.
const LockDir = "/run/tranche"

// Config configures Up, Down, AddNode and RemoveNode.
type Config struct {
	// Name is the cluster's name (a DNS label, see ValidateName); empty means the one
	// recorded in cluster.json, else DefaultName's addresses. A cluster of another name
	// gets addresses of its own on its first start (see chooseAddresses).
	Name string
	// DataDir holds the cluster: cluster.json, the PKI, etcd's data, the admin
	// kubeconfig and DATA/nodes/NAME for each node's kubeconfig, log and pid file.
	DataDir string
	// Prefix starts every network namespace name; empty means the one recorded in
	// cluster.json, else DefaultPrefix (or one chosen for Name). Tests use a unique one.
	Prefix string
	// LoadBalancerPool is the pool of LoadBalancer addresses (`--loadbalancer-pool`,
	// parsed into Server.LoadBalancerPool by Up); nil means the one recorded in
	// cluster.json, else servicelb.DefaultPool (or one chosen for Name).
	LoadBalancerPool *string
	// Nodes is the number of nodes of a new cluster (0 means 1); a cluster restored from
	// cluster.json keeps its own nodes.
	Nodes int
	// Zones are handed out round robin to a new cluster's nodes.
	Zones []string
	// ProxyMode is the nodes' service proxy mode (`--proxy-mode`, already checked);
	// empty means the one recorded in cluster.json, else nftables. IPVSScheduler is the
	// scheduler of mode ipvs, empty meaning the recorded one, else the agent's default.
	ProxyMode, IPVSScheduler string
	// Server is the API server's configuration. Up sets DataDir, Listeners,
	// AdvertiseAddress and LoadBalancerPool, and ClusterCIDR when it is unset; an empty
	// Listen means the one recorded in cluster.json, else DefaultListen (or a free port
	// chosen for Name).
	Server server.Config
	// AgentCommand builds the command run as a node's agent; nil means DefaultAgentCommand.
	// The command's stdio, session and parent-death signal are set by the caller.
	AgentCommand func(Agent) *exec.Cmd
	// AgentLogLevel is passed to agents as --log-level when not empty.
	AgentLogLevel string
	// ImageGC are the agents' image garbage collection thresholds, recorded in
	// cluster.json for agents started later (`tranche node add`, restarts).
	ImageGC ImageGC
	// Registries is the registries configuration file (`--registries`, absolute and
	// already checked) passed to agents, empty for none; recorded in cluster.json for
	// agents started by `tranche node add`.
	Registries string
	// Out receives the progress lines a person follows; nil discards them.
	Out io.Writer
	// ReadyTimeout bounds the wait for the API server and the nodes; 0 means 2 minutes.
	ReadyTimeout time.Duration
	// StopGrace is how long agents and leftover processes get to exit after SIGTERM
	// before SIGKILL; 0 means 10 seconds.
	StopGrace time.Duration
	// UpstreamDNS are the resolvers (IP:port) the cluster DNS relay forwards to; empty
	// means the host's, from /etc/resolv.conf.
	UpstreamDNS []string
	// NoDNSWait makes the cluster ready without waiting for the cluster DNS to answer
	// (tests whose stand-in agents run no pods).
	NoDNSWait bool
}

func (c Config) paths() paths { return paths{dir: c.DataDir} }

func (c Config) out() io.Writer {
	if c.Out == nil {
		return io.Discard
	}
	return c.Out
}

func (c Config) logger() *slog.Logger {
	if c.Server.Logger != nil {
		return c.Server.Logger
	}
	return slog.Default()
}

func (c Config) readyTimeout() time.Duration {
	if c.ReadyTimeout <= 0 {
		return 2 * time.Minute
	}
	return c.ReadyTimeout
}

func (c Config) stopGrace() time.Duration {
	if c.StopGrace <= 0 {
		return 10 * time.Second
	}
	return c.StopGrace
}

// prefixOf picks the namespace prefix: the configured one, else the recorded one, else
// DefaultPrefix.
func (c Config) prefixOf(recorded string) string {
	switch {
	case c.Prefix != "":
		return c.Prefix
	case recorded != "":
		return recorded
	}
	return DefaultPrefix
}

// prefixLockPath is the lock file of a namespace prefix.
func prefixLockPath(prefix string) string {
	return filepath.Join(LockDir, prefix+"cluster.lock")
}

// Agent describes one node agent to start: the values of `tranche agent`'s flags.
type Agent struct {
	// Node is the node name (--node-name).
	Node string
	// Namespace is the node's network namespace the agent runs in.
	Namespace string
	// Kubeconfig holds the node's credentials (--kubeconfig).
	Kubeconfig string
	// ClusterFile is cluster.json (--cluster-file).
	ClusterFile string
	// RootDir is the node's directory DATA/nodes/NAME (--root-dir).
	RootDir string
	// Zone is the node's zone (--zone), empty for none.
	Zone string
	// LogLevel is --log-level, empty for the agent's default.
	LogLevel string
	// ProxyMode is --proxy-mode and IPVSScheduler --ipvs-scheduler, empty for the
	// agent's defaults.
	ProxyMode, IPVSScheduler string
	// ImageGC are --image-gc-high-threshold and --image-gc-low-threshold.
	ImageGC ImageGC
	// Registries is --registries, empty for none.
	Registries string
}

// Args returns the arguments of `tranche agent` for a (without the program name).
func (a Agent) Args() []string {
	args := []string{"agent", "--kubeconfig", a.Kubeconfig, "--node-name", a.Node,
		"--cluster-file", a.ClusterFile, "--root-dir", a.RootDir, "--backend", "none"} // up's cluster network routes its nodes
	if a.Zone != "" {
		args = append(args, "--zone", a.Zone)
	}
	if a.LogLevel != "" {
		args = append(args, "--log-level", a.LogLevel)
	}
	if a.ProxyMode != "" {
		args = append(args, "--proxy-mode", a.ProxyMode)
	}
	if a.IPVSScheduler != "" {
		args = append(args, "--ipvs-scheduler", a.IPVSScheduler)
	}
	args = append(args, a.ImageGC.args()...)
	if a.Registries != "" {
		args = append(args, "--registries", a.Registries)
	}
	return args
}

// DefaultAgentCommand runs `tranche agent` from this very binary.
func DefaultAgentCommand(a Agent) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		self = "/proc/self/exe"
	}
	return exec.Command(self, a.Args()...)
}

// agentProc is an agent this process started (and so must reap).
type agentProc struct {
	node string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// started is when it was started: its Node's heartbeats from before are an
	// earlier agent's.
	started time.Time
}

// exited returns the agent's exit error once it has exited.
func (a *agentProc) exited() (error, bool) {
	select {
	case <-a.done:
		if a.err == nil {
			return errors.New("exit status 0"), true
		}
		return a.err, true
	default:
		return nil, false
	}
}

// prepareNode issues the node's client certificate (CN system:node:NAME, O
// system:nodes) and writes DATA/nodes/NAME/kubeconfig pointing at the cluster listener.
func prepareNode(p paths, topo clusternet.Topology, node string) error {
	dir := p.nodeDir(node)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("node %q: %w", node, err)
	}
	ca, err := pki.EnsureCA(p.pki())
	if err != nil {
		return fmt.Errorf("node %q: %w", node, err)
	}
	cert, key, err := pki.EnsureClient(dir, ca, "client", "system:node:"+node, []string{"system:nodes"})
	if err != nil {
		return fmt.Errorf("node %q: %w", node, err)
	}
	server := "https://" + netip.AddrPortFrom(topo.APIAddress, APIPort).String()
	if err := pki.WriteKubeconfig(filepath.Join(dir, "kubeconfig"), server, ca.CertPEM, cert, key, ""); err != nil {
		return fmt.Errorf("node %q: %w", node, err)
	}
	return nil
}

// startAgent starts node's agent inside its namespace in a session of its own, output
// to DATA/nodes/NAME/agent.log, and records its pid. An attached agent gets SIGTERM
// when this process dies; a detached one (`node add`) outlives it.
func startAgent(cfg Config, s State, node string, detached bool) (*agentProc, error) {
	p := cfg.paths()
	a := Agent{
		Node:        node,
		Namespace:   s.Topology.NodeNamespace(node),
		Kubeconfig:  filepath.Join(p.nodeDir(node), "kubeconfig"),
		ClusterFile: p.state(),
		RootDir:     p.nodeDir(node),
		Zone:        s.Zones[node],
		LogLevel:    cfg.AgentLogLevel,
		// The recorded mode, so that agents restarted by superviseAgent or started by
		// `tranche node add` run the cluster's mode.
		ProxyMode:     s.ProxyMode,
		IPVSScheduler: s.IPVSScheduler,
		ImageGC:       s.ImageGC,
		Registries:    s.Registries,
	}
	build := cfg.AgentCommand
	if build == nil {
		build = DefaultAgentCommand
	}
	cmd := build(a)
	logPath := filepath.Join(p.nodeDir(node), "agent.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("agent of node %q: %w", node, err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "--- %s starting %s\n", time.Now().Format(time.RFC3339), strings.Join(cmd.Args, " "))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, logFile, logFile
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Pdeathsig = 0
	if !detached {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	}
	started := time.Now()
	if err := netns.StartProcess(a.Namespace, cmd); err != nil {
		return nil, fmt.Errorf("agent of node %q: %w", node, err)
	}
	proc := &agentProc{node: node, log: logPath, cmd: cmd, done: make(chan struct{}), started: started}
	go func() {
		proc.err = cmd.Wait()
		close(proc.done)
	}()
	if err := writePIDFile(p.agentPID(node), cmd.Process.Pid); err != nil {
		StopGroup(cmd.Process.Pid, time.Second)
		<-proc.done
		if exitErr, ok := proc.exited(); ok {
			return nil, agentFailure(proc, exitErr)
		}
		return nil, err
	}
	return proc, nil
}

// agentFailure explains an agent that exited before its node was Ready, with the end
// of its log, where the reason is.
func agentFailure(a *agentProc, exitErr error) error {
	tail := logTail(a.log, 10)
	hint := ""
	if strings.Contains(tail, `unknown command "agent"`) {
		hint = "\nthis tranche binary has no `agent` command yet, so no node can run"
	}
	return fmt.Errorf("the agent of node %q exited before the node was Ready (%v); %s ends with:\n%s%s", a.node, exitErr, a.log, tail, hint)
}

// logTail returns the last n lines of a file, indented.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "  (unreadable: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// adminClient is a client with the admin kubeconfig `tranche up` wrote.
func adminClient(p paths) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig: %w", err)
	}
	logging.QuietWarnings(rc, nil) // its few reads get no warning worth a line
	rc.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(rc)
}

// nodeReadySince reports whether n is Ready by a heartbeat not older than since (to the
// second, the heartbeat's precision): on a restart, the Node of the last run is still
// Ready until the node lifecycle controller notices, whatever its new agent does.
func nodeReadySince(n *v1.Node, since time.Time) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(since.Truncate(time.Second))
		}
	}
	return false
}

// waitNodesReady polls the API until every named node is Ready, by a heartbeat of the
// agent started in procs when there is one, printing each as it turns Ready. It fails as soon as one of procs (agents this process started) exits,
// or after timeout.
func waitNodesReady(ctx context.Context, client kubernetes.Interface, names []string, procs []*agentProc, timeout time.Duration, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pending := map[string]bool{}
	for _, n := range names {
		pending[n] = true
	}
	since := map[string]time.Time{}
	for _, a := range procs {
		since[a.node] = a.started
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, a := range procs {
			if exitErr, ok := a.exited(); ok && pending[a.node] {
				return agentFailure(a, exitErr)
			}
		}
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, name := range names {
				for i := range list.Items {
					if n := &list.Items[i]; pending[name] && n.Name == name && nodeReadySince(n, since[name]) {
						delete(pending, name)
						fmt.Fprintf(out, "node %s Ready\n", name)
					}
				}
			}
			if len(pending) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			var late []string
			for _, n := range names {
				if pending[n] {
					late = append(late, n)
				}
			}
			if err == nil {
				err = ctx.Err()
			}
			return fmt.Errorf("nodes %s not Ready after %s (%w); see their agent.log below %s", strings.Join(late, ", "), timeout, err, filepath.Dir(filepath.Dir(procLog(procs))))
		case <-tick.C:
		}
	}
}

// procLog names one agent's log for error messages (any will do: they share a parent).
func procLog(procs []*agentProc) string {
	if len(procs) == 0 {
		return "nodes/NAME/agent.log"
	}
	return procs[0].log
}

// selfPIDRecord is what a lock or pid file of this process holds.
func selfPIDRecord() string {
	pid := os.Getpid()
	st, _ := startTime(pid)
	return strconv.Itoa(pid) + " " + strconv.FormatUint(st, 10)
}
