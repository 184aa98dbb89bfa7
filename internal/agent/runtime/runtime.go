// Package runtime turns the pods bound to a node into OCI containers, as a container
// runtime and kubelet would together.
//
// A pod's sandbox is a network namespace <prefix>p-<first 12 hex digits of its UID>,
// attached to the node's pod bridge with an address from the node's subnet (allocations
// persist in RootDir/sandboxes.json), IPC and UTS namespaces kept by bind mounts under
// RootDir/pods/<uid>/ns (the UTS one carries the pod's hostname), a pod cgroup
// (/tranche/<node namespace>/pod<uid>), and its /etc/hosts, /etc/resolv.conf and
// /etc/hostname under RootDir/pods/<uid>/etc. A hostNetwork pod joins the node's network
// namespace instead: its IP is the node's and its hostname the node's name.
//
// Each container instance is an OCI container started by the node's shim
// (internal/agent/shim: `runc run --detach`, the shim the parent of the container's
// process and the owner of its stdio and CRI log) from a bundle under RootDir/c/<id>:
// its root file system is an overlay of its image's layers (from the node's image
// store) with an upper directory of its own, removed with the instance; its spec
// (internal/agent/ocispec) joins the pod's namespaces, has a PID namespace and a cgroup
// of its own (or the pod's shared PID namespace, held by a pause sandbox container, or
// for an ephemeral container its target's), the pod's volumes and /etc files
// bind-mounted, and the capabilities, seccomp profile and limits Kubernetes and
// containerd give it. Exec sessions and exec probes are `runc exec` with the
// container's own process settings.
//
// Starting an instance (start.go) is a pure plan (planContainer: the spec's input,
// mounts, paths and the shim's request) between gathering its inputs and applying it
// through a Runner, the I/O edge (rootfs mount, shim and runc calls), which FakeRunner
// stands in for in tests. The pod's network namespace and veth are made while the rest
// of its sandbox and its first bundles are (awaitNetwork).
//
// The shim outlives the agent. The agent records each pod's containers (ids, restart
// counts, last states, running instances) in RootDir/pods/<uid>/containers.json; a new
// agent adopts the instances the shim still runs, with their sandbox, instead of
// starting others (adopt.go), and Cleanup removes only what no kept pod records.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/tranche/tranche/internal/agent/backoff"
	"github.com/tranche/tranche/internal/agent/images"
	"github.com/tranche/tranche/internal/agent/ocispec"
	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/agent/shim"
	"github.com/tranche/tranche/internal/agent/status"
	"github.com/tranche/tranche/internal/clusternet"
	"github.com/tranche/tranche/internal/netns"
)

// Config describes the node whose pods a Manager runs.
type Config struct {
	// NodeName is the node's name in Topology.
	NodeName string
	// NodeNS is the node's network namespace, from which probes and preStop HTTP hooks
	// dial the pods; "" means the namespace the agent runs in. hostNetwork pods run in
	// it, or, when it is "", in the node's namespace of Topology.
	NodeNS string
	// Topology is the cluster network; pod addresses come from the node's PodCIDR.
	Topology clusternet.Topology
	// RootDir holds the sandbox state and the pods' files:
	// RootDir/pods/<uid>/{etc,containers/<name>/{logs,config,data}}, and RootDir/bin,
	// the busybox applet links.
	RootDir string
	// Images gives containers their images (required).
	Images *images.Service
	// Shim runs the containers and owns their stdio (required): the node's shim,
	// which outlives the agent, so that a new agent finds its pods' containers again.
	Shim *shim.Client
	// Runc deletes, signals and execs into containers, with the shim's runc state
	// directory; New finds runc and uses RootDir/runc when it is nil.
	Runc *runc.Runtime
	// Runner mounts containers' root file systems and runs their processes; New
	// uses the real one (NewRunner of Shim and Runc) when it is nil.
	Runner Runner
	// PodPidsLimit is the pids.max of every pod's cgroup (kubelet's --pod-max-pids);
	// 0 or less sets none.
	PodPidsLimit int64
	// SeccompDir holds the Localhost seccomp profiles (kubelet's <root-dir>/seccomp);
	// RootDir/seccomp when empty.
	SeccompDir string
	// ClusterDNS and ClusterDomain configure the pods' resolv.conf and hostnames.
	ClusterDNS    []string
	ClusterDomain string
	// HostResolvConf is the node's resolv.conf, the base of Default-policy pods'
	// (/etc/resolv.conf when empty).
	HostResolvConf string
	// HostHostsFile is the node's /etc/hosts, which hostNetwork pods get a copy of
	// (/etc/hosts when empty).
	HostHostsFile string
	// Lookup reads ConfigMaps and Secrets for container environments, and the
	// RuntimeClass a pod names; without it a container referring to a ConfigMap or
	// Secret waits with CreateContainerConfigError and RuntimeClasses are not checked.
	Lookup Lookup
	// Services gives containers kubelet's Service variables (KUBERNETES_SERVICE_HOST,
	// NAME_SERVICE_HOST, NAME_PORT, ...); nil gives none.
	Services Services
	// Logs is the container log rotation (kubelet's defaults, DefaultLogMaxSize and
	// DefaultLogMaxFiles, for zero fields).
	Logs shim.LogPolicy
	// Backoff is the crash-loop back-off (kubelet's, on Clock, when nil).
	Backoff *backoff.Backoff
	// Clock drives probes, back-off and timestamps (the real clock when nil).
	Clock clock.WithTicker
	// Recorder receives the events kubelet records on a pod (Pulled, Created, Started, Failed, BackOff, Unhealthy, Killing); none
	// are recorded when nil.
	Recorder record.EventRecorder
	// Logger receives the runtime's logs (discarded when nil).
	Logger *slog.Logger
}

// Runtime runs the pods of one node.
type Runtime interface {
	// SyncPod makes the pod's processes match the pod: it creates the sandbox, runs
	// init containers in order then the containers, restarts them per restartPolicy
	// with CrashLoopBackOff, runs probes, and enforces activeDeadlineSeconds. It is
	// idempotent and returns the view status.Compute turns into the pod's status; the
	// error says why the sandbox could not be made (the view then says not ready).
	SyncPod(ctx context.Context, pod *v1.Pod, volumes map[string]string) (status.PodView, error)
	// KillPod runs the preStop hooks, sends SIGTERM, waits up to gracePeriod (hooks
	// included, at least 2 s after them), sends SIGKILL, and removes the sandbox:
	// namespace, address and files except the logs. A killed pod is not started again.
	KillPod(ctx context.Context, pod *v1.Pod, gracePeriod time.Duration) error
	// LogPath returns the log file of a container's current instance, or of the
	// previous one.
	LogPath(podUID types.UID, container string, previous bool) (string, error)
	// Exec runs cmd in a running container's namespaces, environment and user, and
	// returns its exit code; err is for a command that could not be run.
	Exec(ctx context.Context, podUID types.UID, container string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (exitCode int, err error)
	// Changes receives the UID of a pod whose view changed (a process exited, a probe
	// result flipped, a back-off expired) so the agent syncs it at once. Sends never
	// block: when the agent lags, notifications are dropped and its periodic sync
	// catches up.
	Changes() <-chan types.UID
	// Cleanup removes the sandboxes (processes, namespace, address) of pods that are
	// neither in keep nor synced since the agent started, such as those left by a
	// crashed agent.
	Cleanup(ctx context.Context, keep map[types.UID]bool) error
}

var _ Runtime = (*Manager)(nil)

// endpointDrain is how long a deleted pod's containers keep running before SIGTERM (at
// most half the grace period, and counting a preStop hook's time): the EndpointSlice
// controller marks the pod terminating and every node's proxy steers new connections
// away within that time (bench/netprog: p99 64-106 ms on a loaded machine), so a rolling
// update loses no request without a preStop sleep in every pod. Established connections
// are served to the end by the still-running process.
const endpointDrain = 500 * time.Millisecond

// minGraceAfterPreStop is how long a container gets after its preStop hook, however
// much of the grace period the hook used (kubelet's minimum).
const minGraceAfterPreStop = 2 * time.Second

// Manager is the real Runtime. Create it with New.
type Manager struct {
	cfg     Config
	node    clusternet.Node
	backoff *backoff.Backoff
	changes chan types.UID
	runc    *runc.Runtime
	// run is the I/O edge of starting and ending container instances.
	run Runner
	// hostCaps is the agent's capability bounding set: what privileged containers get.
	hostCaps []string
	// minOOMScoreAdj is the lowest oom_score_adj containers can get on this host
	// (ocispec.Input.MinOOMScoreAdj), nil for any.
	minOOMScoreAdj *int

	mu      sync.Mutex
	ips     *clusternet.PodIPs
	records map[types.UID]sandboxRecord
	pods    map[types.UID]*podState
	killed  map[types.UID]bool
	// allocations are the pods' allocated requests, for resizes (resize.go).
	allocations allocationBook
}

// New checks cfg, restores the persisted sandbox addresses and prepares the busybox
// applet directory.
func New(cfg Config) (*Manager, error) {
	node, ok := cfg.Topology.Node(cfg.NodeName)
	if !ok {
		return nil, fmt.Errorf("runtime: node %q is not in the cluster topology", cfg.NodeName)
	}
	if cfg.RootDir == "" {
		return nil, errors.New("runtime: RootDir must be set")
	}
	if cfg.Images == nil {
		return nil, errors.New("runtime: an image service (Images) must be set")
	}
	if cfg.Shim == nil {
		return nil, errors.New("runtime: a shim (Shim) must be set")
	}
	if cfg.SeccompDir == "" {
		cfg.SeccompDir = filepath.Join(cfg.RootDir, "seccomp")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HostResolvConf == "" {
		cfg.HostResolvConf = "/etc/resolv.conf"
	}
	if cfg.HostHostsFile == "" {
		cfg.HostHostsFile = "/etc/hosts"
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = "cluster.local"
	}
	if cfg.Logs.MaxSize == 0 {
		cfg.Logs.MaxSize = shim.DefaultLogMaxSize
	}
	if cfg.Logs.MaxFiles == 0 {
		cfg.Logs.MaxFiles = shim.DefaultLogMaxFiles
	}
	if err := cfg.Logs.Check(); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	if cfg.Backoff == nil {
		cfg.Backoff = backoff.New(cfg.Clock)
	}
	if cfg.Runc == nil {
		bin, err := runc.Find()
		if err != nil {
			return nil, fmt.Errorf("runtime: %w", err)
		}
		cfg.Runc = &runc.Runtime{Binary: bin, Root: filepath.Join(cfg.RootDir, "runc"), Logger: cfg.Logger}
	}
	if cfg.Runner == nil {
		cfg.Runner = NewRunner(cfg.Shim, cfg.Runc)
	}
	ips, err := clusternet.NewPodIPs(node.PodCIDR)
	if err != nil {
		return nil, fmt.Errorf("runtime: node %q: %w", cfg.NodeName, err)
	}
	m := &Manager{
		cfg:     cfg,
		node:    node,
		backoff: cfg.Backoff,
		changes: make(chan types.UID, 1024),
		runc:    cfg.Runc,
		run:     cfg.Runner,
		ips:     ips,
		records: map[types.UID]sandboxRecord{},
		pods:    map[types.UID]*podState{},
		killed:  map[types.UID]bool{},
	}
	if err := os.MkdirAll(filepath.Join(cfg.RootDir, "pods"), 0o755); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	if err := m.loadRecords(); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	if err := os.MkdirAll(cfg.SeccompDir, 0o755); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	if m.hostCaps, err = ocispec.HostCapabilities(); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	if m.minOOMScoreAdj, err = ocispec.MinOOMScoreAdj(m.hostCaps); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	return m, nil
}

// Changes implements Runtime.
func (m *Manager) Changes() <-chan types.UID { return m.changes }

func (m *Manager) notify(uid types.UID) {
	select {
	case m.changes <- uid:
	default:
	}
}

// dial connects from the node's network namespace.
func (m *Manager) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	if m.cfg.NodeNS == "" {
		return net.DialTimeout(network, addr, timeout)
	}
	return netns.Dial(m.cfg.NodeNS, network, addr, timeout)
}

// podState is the runtime's state of one pod.
type podState struct {
	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	pod     *v1.Pod
	volumes map[string]string
	netns   string
	// fsGroupDone lists the volumes already given to the pod's fsGroup.
	fsGroupDone map[string]bool
	// ipcNS and utsNS are the paths of the pod's IPC and UTS namespaces.
	ipcNS, utsNS string
	// pidSandbox holds the PID namespace of a pod that shares one (nil otherwise).
	pidSandbox *pidSandbox
	// loaded is set once what an earlier agent recorded of the pod was read;
	// adopted when it left instances running, whose sandbox is then kept.
	loaded, adopted bool
	ip              netip.Addr
	hostname        string
	sandboxReady    bool
	// network is set while the sandbox's network is being made (awaitNetwork).
	network   *pendingNetwork
	startTime time.Time
	terminal  bool
	// deadlineArmed is the activeDeadlineSeconds a notification is scheduled for (0:
	// none); an update of the deadline schedules another.
	deadlineArmed int64
	// deadlineExceeded is set once the pod was stopped for its activeDeadlineSeconds:
	// its phase is then Failed with kubelet's reason DeadlineExceeded.
	deadlineExceeded bool
	containers       map[string]*container
	inits            map[string]*container
	// ephemerals are the debugging containers (pods/ephemeralcontainers), started
	// once and never restarted.
	ephemerals map[string]*container
	// resize is the pod's allocation and in-place resize (resize.go).
	resize resizeState
}

// groups are the pod's container maps: regular, init and ephemeral.
func (ps *podState) groups() []map[string]*container {
	return []map[string]*container{ps.containers, ps.inits, ps.ephemerals}
}

// podState returns the state of pod, creating it on first sight.
func (m *Manager) podState(pod *v1.Pod) (*podState, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.killed[pod.UID] {
		return nil, false
	}
	ps, ok := m.pods[pod.UID]
	if !ok {
		ctx, cancel := context.WithCancel(context.Background())
		ps = &podState{ctx: ctx, cancel: cancel, startTime: m.cfg.Clock.Now(),
			containers: map[string]*container{}, inits: map[string]*container{}, ephemerals: map[string]*container{}}
		if pod.Status.StartTime != nil {
			ps.startTime = pod.Status.StartTime.Time
		}
		m.pods[pod.UID] = ps
	}
	return ps, true
}

// SyncPod implements Runtime.
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, volumes map[string]string) (status.PodView, error) {
	if pod == nil {
		return status.PodView{}, errors.New("sync: no pod given")
	}
	if pod.Spec.NodeName != m.cfg.NodeName {
		return status.PodView{}, fmt.Errorf("sync pod %s/%s: bound to node %q, not %q", pod.Namespace, pod.Name, pod.Spec.NodeName, m.cfg.NodeName)
	}
	ps, ok := m.podState(pod)
	if !ok {
		return status.PodView{Terminal: true}, nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.pod = pod.DeepCopy()
	ps.volumes = volumes
	m.syncResize(ps)
	if !ps.loaded {
		ps.loaded = true
		ps.adopted = m.adopt(ctx, ps)
	}
	if !ps.sandboxReady {
		if err := m.runtimeHandlerError(ctx, pod); err != nil {
			m.event(pod, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
			return m.view(ps), err
		}
	}
	if err := m.ensureSandbox(ps); err != nil {
		return m.view(ps), err
	}
	view, err := m.syncContainers(ctx, ps)
	if nerr := m.awaitNetwork(ps); nerr != nil {
		return m.view(ps), nerr
	}
	return view, err
}

// syncContainers is SyncPod once the sandbox is made (its network may still be in the
// making: awaitNetwork). ps.mu is held.
func (m *Manager) syncContainers(ctx context.Context, ps *podState) (status.PodView, error) {
	pod := ps.pod
	if !ps.terminal && pod.DeletionTimestamp == nil {
		if err := m.ensurePIDSandbox(ctx, ps); err != nil {
			return m.view(ps), err
		}
	}
	now := m.cfg.Clock.Now()
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil && !ps.terminal && now.Sub(ps.startTime) >= time.Duration(*d)*time.Second {
		m.cfg.Logger.Info("pod exceeded its active deadline, stopping it", "pod", pod.Namespace+"/"+pod.Name)
		ps.terminal, ps.deadlineExceeded = true, true
		m.event(pod, v1.EventTypeNormal, reasonDeadlineExceeded, messageDeadlineExceeded)
		m.stopAll(ps, gracePeriod(pod))
	}
	if ps.terminal || pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return m.view(ps), nil
	}
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil && ps.deadlineArmed != *d {
		ps.deadlineArmed = *d
		m.later(ps, ps.startTime.Add(time.Duration(*d)*time.Second).Sub(now))
	}
	if !m.syncInits(ctx, ps) {
		return m.view(ps), nil
	}
	policy := pod.Spec.RestartPolicy
	for i := range pod.Spec.Containers {
		spec := &ps.pod.Spec.Containers[i]
		c := ps.container(spec.Name, false)
		m.ensureRunning(ctx, ps, c, spec, policy)
	}
	m.syncEphemerals(ctx, ps)
	return m.view(ps), nil
}

// syncInits runs the init containers one after the other and reports whether all have
// completed (sidecars, init containers with restartPolicy Always, count once started).
func (m *Manager) syncInits(ctx context.Context, ps *podState) bool {
	pod := ps.pod
	for i := range pod.Spec.InitContainers {
		spec := &pod.Spec.InitContainers[i]
		c := ps.container(spec.Name, true)
		if spec.RestartPolicy != nil && *spec.RestartPolicy == v1.ContainerRestartPolicyAlways {
			m.ensureRunning(ctx, ps, c, spec, v1.RestartPolicyAlways)
			if !c.running() {
				return false
			}
			continue
		}
		if c.inst == nil && c.term != nil && c.term.ExitCode == 0 {
			continue
		}
		policy := v1.RestartPolicyOnFailure
		if pod.Spec.RestartPolicy == v1.RestartPolicyNever {
			policy = v1.RestartPolicyNever
		}
		m.ensureRunning(ctx, ps, c, spec, policy)
		return false
	}
	return true
}

// later makes the pod's view change notification fire after d (a back-off or deadline
// expiring), unless the pod is killed first.
func (m *Manager) later(ps *podState, d time.Duration) {
	if d < 0 {
		d = 0
	}
	uid, ctx := ps.pod.UID, ps.ctx
	go func() {
		select {
		case <-m.cfg.Clock.After(d):
			m.notify(uid)
		case <-ctx.Done():
		}
	}()
}

// Kubelet's reason and message for a pod stopped at its activeDeadlineSeconds
// (pkg/kubelet/active_deadline.go), on its event and its Failed status.
const (
	reasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// view builds the PodView; ps.mu is held.
func (m *Manager) view(ps *podState) status.PodView {
	v := status.PodView{
		SandboxReady:        ps.sandboxReady,
		StartTime:           ps.startTime,
		Terminal:            ps.terminal,
		Containers:          map[string]status.ContainerView{},
		InitContainers:      map[string]status.ContainerView{},
		EphemeralContainers: map[string]status.ContainerView{},
	}
	if ps.sandboxReady {
		v.PodIPs = []string{ps.ip.String()}
	}
	if ps.deadlineExceeded {
		v.FailedReason, v.FailedMessage = reasonDeadlineExceeded, messageDeadlineExceeded
	}
	v.Resize = ps.resizeView()
	if m.node.Underlay.IsValid() {
		v.HostIPs = []string{m.node.Underlay.String()}
	}
	for name, c := range ps.containers {
		if cv, ok := c.view(); ok {
			v.Containers[name] = cv
		}
	}
	for name, c := range ps.inits {
		if cv, ok := c.view(); ok {
			v.InitContainers[name] = cv
		}
	}
	for name, c := range ps.ephemerals {
		if cv, ok := c.view(); ok {
			v.EphemeralContainers[name] = cv
		}
	}
	return v
}

// gracePeriod is the pod's terminationGracePeriodSeconds (30 s by default).
func gracePeriod(pod *v1.Pod) time.Duration {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// stopAll stops every running container in the background; ps.mu is held.
func (m *Manager) stopAll(ps *podState, grace time.Duration) {
	for _, cs := range ps.groups() {
		for _, c := range cs {
			if inst := c.inst; inst != nil {
				go m.stopInstance(ps, c, inst, grace, 0)
			}
		}
	}
}

// KillPod implements Runtime.
func (m *Manager) KillPod(ctx context.Context, pod *v1.Pod, grace time.Duration) error {
	if pod == nil {
		return errors.New("kill: no pod given")
	}
	m.mu.Lock()
	ps := m.pods[pod.UID]
	m.killed[pod.UID] = true
	m.mu.Unlock()
	if ps != nil {
		ps.mu.Lock()
		ps.terminal = true
		var wg sync.WaitGroup
		for _, cs := range ps.groups() {
			for _, c := range cs {
				if inst := c.inst; inst != nil {
					wg.Go(func() { m.stopInstance(ps, c, inst, grace, min(grace/2, endpointDrain)) })
				}
			}
		}
		ps.mu.Unlock()
		wg.Wait()
		ps.mu.Lock()
		if sb := ps.pidSandbox; sb != nil {
			m.removePIDSandbox(sb)
			ps.pidSandbox = nil
		}
		ps.mu.Unlock()
		ps.cancel()
		m.mu.Lock()
		delete(m.pods, pod.UID)
		m.mu.Unlock()
		for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range cs {
				m.backoff.Forget(backoff.Key(pod, &cs[i]))
			}
		}
	}
	if err := m.removeSandbox(pod.UID); err != nil {
		return fmt.Errorf("kill pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	m.notify(pod.UID)
	return nil
}

// Cleanup implements Runtime.
func (m *Manager) Cleanup(ctx context.Context, keep map[types.UID]bool) error {
	m.mu.Lock()
	var stale []types.UID
	for uid := range m.records {
		if _, live := m.pods[uid]; !live && !keep[uid] {
			stale = append(stale, uid)
		}
	}
	for uid := range m.killed {
		if !keep[uid] {
			delete(m.killed, uid)
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, uid := range stale {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		errs = append(errs, m.removeSandbox(uid))
	}
	errs = append(errs, m.removeStaleContainers(ctx, keep))
	return errors.Join(errs...)
}

// removeStaleContainers deletes the runc containers and bundles no running instance
// owns and no record of a pod in keep names (those are adopted when the pod is
// synced): those of pods gone while no agent ran.
func (m *Manager) removeStaleContainers(ctx context.Context, keep map[types.UID]bool) error {
	live := map[string]bool{}
	// Pod locks are taken without the manager's: SyncPod holds a pod's and then takes
	// the manager's.
	m.mu.Lock()
	pods := make([]*podState, 0, len(m.pods))
	for _, ps := range m.pods {
		pods = append(pods, ps)
	}
	m.mu.Unlock()
	for _, ps := range pods {
		ps.mu.Lock()
		for _, cs := range ps.groups() {
			for _, c := range cs {
				if c.inst != nil {
					live[c.inst.id] = true
					live[filepath.Base(c.inst.dir)] = true
				}
			}
		}
		if sb := ps.pidSandbox; sb != nil {
			live[sb.id] = true
			live[filepath.Base(sb.dir)] = true
		}
		ps.mu.Unlock()
	}
	for id := range m.recordedInstances(keep) {
		live[id] = true
	}
	var errs []error
	states, err := m.runc.List(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, st := range states {
		if !live[st.ID] {
			m.cfg.Logger.Info("removing a container no pod of this node accounts for (its pod was deleted while no agent ran)",
				"container", st.ID, "status", string(st.Status), "bundle", st.Bundle)
			if err := m.runc.Delete(ctx, st.ID); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if scs, err := m.cfg.Shim.List(ctx); err == nil {
		for _, sc := range scs {
			if !live[sc.ID] {
				_ = m.cfg.Shim.Forget(ctx, sc.ID)
			}
		}
	}
	entries, _ := os.ReadDir(filepath.Join(m.cfg.RootDir, "c"))
	for _, e := range entries {
		if !live[e.Name()] {
			m.removeBundle(filepath.Join(m.cfg.RootDir, "c", e.Name()))
		}
	}
	return errors.Join(errs...)
}

// LogPath implements Runtime: logs are RootDir/pods/<uid>/containers/<name>/logs/<n>.log,
// n being the instance's restart count; the rotated parts of an instance's log are
// <n>.log.1 (the newest) to <n>.log.<MaxFiles-1> (the oldest), and the files of the
// instance before the current one are kept.
func (m *Manager) LogPath(podUID types.UID, name string, previous bool) (string, error) {
	dir := filepath.Join(m.podDir(podUID), "containers", name, "logs")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("container %q in pod %s has no logs: %w", name, podUID, err)
	}
	latest := -1
	for _, e := range entries {
		var n int
		if _, err := fmt.Sscanf(e.Name(), "%d.log", &n); err == nil && e.Name() == fmt.Sprintf("%d.log", n) && n > latest {
			latest = n
		}
	}
	if latest < 0 {
		return "", fmt.Errorf("container %q in pod %s has no logs", name, podUID)
	}
	if !previous {
		return filepath.Join(dir, fmt.Sprintf("%d.log", latest)), nil
	}
	for n := latest - 1; n >= 0; n-- {
		p := filepath.Join(dir, fmt.Sprintf("%d.log", n))
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("previous terminated container %q in pod %s not found", name, podUID)
}

// Exec implements Runtime: `runc exec` in the running container, with its user,
// environment, capabilities and working directory.
func (m *Manager) Exec(ctx context.Context, podUID types.UID, name string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	return m.ExecStream(ctx, podUID, name, argv, Streams{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// execCombined is Exec with stdout and stderr collected, for exec probes and hooks.
func (m *Manager) execCombined(ctx context.Context, uid types.UID, name string, argv []string) (int, []byte, error) {
	var out lockedBuffer
	code, err := m.Exec(ctx, uid, name, argv, nil, &out, &out)
	return code, out.bytes(), err
}

type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

func (l *lockedBuffer) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b...)
}

// nodeResources are the node's CPU and memory for resourceFieldRefs on unset limits.
func nodeResources() (resource.Quantity, resource.Quantity) {
	cpu := *resource.NewQuantity(int64(numCPU()), resource.DecimalSI)
	return cpu, *resource.NewQuantity(totalMemory(), resource.BinarySI)
}
