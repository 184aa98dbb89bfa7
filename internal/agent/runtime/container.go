package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/tranche/tranche/internal/agent/backoff"
	"github.com/tranche/tranche/internal/agent/ocispec"
	"github.com/tranche/tranche/internal/agent/probe"
	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/agent/shim"
	"github.com/tranche/tranche/internal/agent/status"
	"github.com/tranche/tranche/internal/imagestore"
	"github.com/tranche/tranche/internal/netns"
)

// container is the runtime state of one container of a pod across its instances. All
// fields are guarded by the pod's mutex.
type container struct {
	name string
	// image and imageID are what the status reports: the image's normalised name and
	// its repository digest.
	image, imageID string
	id             string
	inst           *instance
	startedAt      time.Time
	term           *v1.ContainerStateTerminated
	prevTerm       *v1.ContainerStateTerminated
	waiting        *v1.ContainerStateWaiting
	restartCount   int32
	started        bool
	ready          bool
	created        bool
	// postStarting is set while the instance's postStart hook runs: as with kubelet,
	// whose sync waits for the hook, the container does not count as running yet.
	postStarting bool
}

// instance is one running OCI container of a container, whose process is initPID on
// the host, a child of the node's shim.
type instance struct {
	id      string
	initPID int
	// process is the container's process in its OCI spec: exec sessions run with its
	// user, environment, capabilities and working directory.
	process specs.Process
	// dir is the instance's bundle (config.json, rootfs, upper and work directories).
	dir string
	// cgroup is the container's cgroup path (cgroupfs layout).
	cgroup string
	// stopSignal is the image's STOPSIGNAL (SIGTERM when 0).
	stopSignal syscall.Signal
	// logPath is the instance's CRI log; termLog the file behind its
	// terminationMessagePath.
	logPath, termLog string
	done             chan struct{}
	stop             context.CancelFunc
	probe            map[probe.Kind]*probe.Worker
}

func (ps *podState) container(name string, init bool) *container {
	cs := ps.containers
	if init {
		cs = ps.inits
	}
	c, ok := cs[name]
	if !ok {
		c = &container{name: name}
		for _, st := range append(append([]v1.ContainerStatus(nil), ps.pod.Status.ContainerStatuses...), ps.pod.Status.InitContainerStatuses...) {
			if st.Name == name {
				// Keep counting across agent restarts, as kubelet does from the
				// runtime's records.
				c.restartCount = st.RestartCount
			}
		}
		cs[name] = c
	}
	return c
}

func (c *container) running() bool { return c.inst != nil && !c.postStarting }

// view is the container's ContainerView; ok is false before anything was tried.
func (c *container) view() (status.ContainerView, bool) {
	v := status.ContainerView{ID: c.id, Image: c.image, ImageID: c.imageID, RestartCount: c.restartCount}
	switch {
	case c.inst != nil && c.postStarting:
		v.State.Waiting = &v1.ContainerStateWaiting{Reason: status.ReasonContainerCreating}
		if c.prevTerm != nil {
			v.LastState.Terminated = c.prevTerm.DeepCopy()
		}
	case c.inst != nil:
		v.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(c.startedAt)}
		v.Started, v.Ready = c.started, c.ready
		if c.prevTerm != nil {
			v.LastState.Terminated = c.prevTerm.DeepCopy()
		}
	case c.waiting != nil:
		v.State.Waiting = c.waiting.DeepCopy()
		if c.term != nil {
			v.LastState.Terminated = c.term.DeepCopy()
		}
	case c.term != nil:
		v.State.Terminated = c.term.DeepCopy()
		if c.prevTerm != nil {
			v.LastState.Terminated = c.prevTerm.DeepCopy()
		}
	default:
		return v, false
	}
	return v, true
}

// ensureRunning starts c when it has never run, or restarts it after an exit when
// policy says so and its back-off allows; otherwise it records why it waits. ps.mu is
// held.
func (m *Manager) ensureRunning(ctx context.Context, ps *podState, c *container, spec *v1.Container, policy v1.RestartPolicy) {
	if c.inst != nil {
		return
	}
	if c.term != nil && !ps.resize.restarting[c.name] {
		if policy == v1.RestartPolicyNever || (policy == v1.RestartPolicyOnFailure && c.term.ExitCode == 0) {
			c.waiting = nil
			return
		}
		wait, window := m.backoff.Check(backoff.Key(ps.pod, spec), c.term.FinishedAt.Time)
		if wait > 0 {
			c.waiting = &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: backoff.Message(window, spec.Name, ps.pod)}
			m.event(ps.pod, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container "+spec.Name+" in pod "+podID(ps.pod))
			m.later(ps, wait)
			return
		}
	}
	m.start(ctx, ps, c, spec)
}

// start creates and starts a new instance of c: the image from the node's store, a
// root file system over its layers, an OCI bundle, and `runc run`. Failures before a
// process exists leave c waiting with kubelet's reason (InvalidImageName, ErrImagePull,
// CreateContainerConfigError, CreateContainerError); a program that cannot be executed
// is an instance that ended at once with StartError, as containerd reports it. What
// runs is planContainer's (pure); the I/O goes through m.run. Each step's time is
// logged at debug level ("container started"). ps.mu is held.
func (m *Manager) start(ctx context.Context, ps *podState, c *container, spec *v1.Container) {
	pod := ps.pod
	if ctx.Err() != nil {
		// The sync was cancelled (the pod is being deleted): start nothing more.
		return
	}
	t := newPhases(m.cfg.Clock)
	if !m.ensureImageVolumes(ctx, ps, c, spec) {
		return
	}
	cpu, mem := nodeResources()
	pe := podEnv{pod: pod, podIPs: []string{ps.ip.String()}, hostIPs: []string{m.node.Underlay.String()}, hostname: ps.hostname, nodeCPU: cpu, nodeMemory: mem}
	if m.cfg.Services != nil {
		svcs, err := m.cfg.Services()
		if err != nil {
			m.cfg.Logger.Warn("listing Services for the container's environment", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
		pe.services = serviceEnv(pod.Namespace, pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks, svcs)
	}
	env, err := containerEnv(ctx, pe, spec, m.cfg.Lookup)
	if err != nil {
		m.waitWith(ps, c, "CreateContainerConfigError", err.Error())
		return
	}
	t.mark("env")
	img, ok := m.ensureImage(ctx, ps, c, spec)
	if !ok {
		return
	}
	c.image, c.imageID = imageStatus(img, spec.Image)
	if !c.created {
		c.created = true
		m.cfg.Logger.Info("container image", "pod", pod.Namespace+"/"+pod.Name, "container", spec.Name, "image", c.image, "imageID", c.imageID)
	}
	t.mark("image")
	id := newID()
	restartCount := c.restartCount
	if c.id != "" {
		restartCount++
	}
	in := planInput{pod: pod, container: spec, env: env, image: img.Config.Config, id: id, restartCount: restartCount,
		bundleDir: m.bundleDir(id), containerDir: filepath.Join(m.podDir(pod.UID), "containers", spec.Name),
		etcDir: filepath.Join(m.podDir(pod.UID), "etc"), netNS: netns.Path(ps.netns), ipcNS: ps.ipcNS, utsNS: ps.utsNS,
		pidNS: pidNS(ps), hostname: ps.hostname, podCgroup: m.podCgroup(pod.UID), nodeMemory: mem.Value(),
		seccompDir: m.cfg.SeccompDir, hostCapabilities: m.hostCaps, minOOMScoreAdj: m.minOOMScoreAdj, cgroup2: runc.Cgroup2(), logs: m.cfg.Logs}
	plan, err := m.prepare(ctx, ps, spec, img, &in, t)
	if err != nil {
		m.removeBundle(in.bundleDir)
		reason := "CreateContainerError"
		var ce *ocispec.ConfigError
		if errors.As(err, &ce) {
			reason = "CreateContainerConfigError"
		}
		m.waitWith(ps, c, reason, err.Error())
		return
	}

	// The pod's network is made meanwhile (ensureSandbox): the process needs it.
	if err := m.awaitNetwork(ps); err != nil {
		m.removeBundle(plan.dir)
		return
	}
	t.mark("network")

	// A new instance from here on.
	c.restartCount = restartCount
	if c.term != nil {
		c.prevTerm = c.term
	}
	c.id, c.term, c.waiting, c.started, c.ready = id, nil, nil, spec.StartupProbe == nil, false
	c.postStarting = spec.Lifecycle != nil && spec.Lifecycle.PostStart != nil
	pid, err := m.runPlan(plan, restartCount)
	if err != nil {
		m.removeBundle(plan.dir)
		m.startFailed(ps, c, err.Error())
		return
	}
	t.mark("run")
	pctx, stop := context.WithCancel(ps.ctx)
	inst := &instance{id: id, initPID: pid, process: *plan.spec.Process, dir: plan.dir,
		cgroup: plan.spec.Linux.CgroupsPath, stopSignal: plan.stopSignal,
		logPath: plan.logPath, termLog: plan.termLog, done: make(chan struct{}), stop: stop}
	c.inst, c.startedAt = inst, m.cfg.Clock.Now()
	m.event(pod, v1.EventTypeNormal, "Created", "Created container: "+spec.Name)
	m.event(pod, v1.EventTypeNormal, "Started", "Started container "+spec.Name)
	if spec.ReadinessProbe == nil {
		c.ready = true
	}
	m.saveContainers(ps)
	go m.wait(ps, c, inst, spec)
	m.startProbes(pctx, ps, c, inst, spec)
	if spec.Lifecycle != nil && spec.Lifecycle.PostStart != nil {
		go m.runPostStart(ps, c, inst, pod, spec, ps.ip.String())
	}
	m.cfg.Logger.Debug("container started", append([]any{"pod", podID(pod), "container", spec.Name}, t.attrs()...)...)
}

// prepare resolves the container's volumes and PID namespace into in, plans the
// instance and writes its bundle (root file system and config.json). ps.mu is held.
func (m *Manager) prepare(ctx context.Context, ps *podState, spec *v1.Container, img imagestore.Image, in *planInput, t *phases) (*containerPlan, error) {
	var err error
	if in.volumes, err = m.volumeSources(ps, spec, in.env); err != nil {
		return nil, err
	}
	if ns, ok, err := m.ephemeralPIDNS(ps, spec.Name); err != nil {
		return nil, err
	} else if ok {
		in.pidNS = ns
	}
	plan := planContainer(*in)
	t.mark("plan")
	if err := m.leaseImage(ps, spec.Name, img, in.bundleDir); err != nil {
		return nil, err
	}
	lowers, err := m.cfg.Images.Store().Lowers(ctx, img)
	if err != nil {
		return nil, fmt.Errorf("unpacking image %q: %w", spec.Image, err)
	}
	t.mark("layers")
	if err := m.writeBundle(plan, in.containerDir, spec.Image, lowers); err != nil {
		return nil, err
	}
	t.mark("bundle")
	return plan, nil
}

// waitWith leaves c waiting with reason (before any instance of it could be made) and
// retries after the initial back-off; ps.mu is held.
func (m *Manager) waitWith(ps *podState, c *container, reason, msg string) {
	c.waiting = &v1.ContainerStateWaiting{Reason: reason, Message: msg}
	m.event(ps.pod, v1.EventTypeWarning, "Failed", "Error: "+msg)
	m.later(ps, backoff.DefaultInitial)
}

// imageStatus is what a container status reports of img: the normalised name the pod
// asked for and the repository digest ("name@sha256:..."), as containerd reports them.
func imageStatus(img imagestore.Image, ref string) (image, imageID string) {
	image = ref
	if n, err := imagestore.Normalize(ref); err == nil {
		image = n
	}
	repo := image
	if i := strings.LastIndex(repo, "@"); i >= 0 {
		repo = repo[:i]
	} else if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return image, repo + "@" + img.Digest
}

// stopSignal parses an image's STOPSIGNAL ("SIGQUIT", "QUIT", "3"); 0 means SIGTERM.
func stopSignal(s string) syscall.Signal {
	if s == "" {
		return 0
	}
	if n, err := strconv.Atoi(s); err == nil {
		return syscall.Signal(n)
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig
	}
	return 0
}

// terminationLogSuffix names the file behind a container instance's
// terminationMessagePath, in the container's directory.
const terminationLogSuffix = ".termination-log"

// fsGroup gives the named volume to the pod's fsGroup, once per pod and volume, as
// kubelet does when it mounts it. ps.mu is held.
func (m *Manager) fsGroup(ps *podState, volume string) error {
	sc := ps.pod.Spec.SecurityContext
	if sc == nil || sc.FSGroup == nil || ps.fsGroupDone[volume] {
		return nil
	}
	for i := range ps.pod.Spec.Volumes {
		v := &ps.pod.Spec.Volumes[i]
		if v.Name == volume && ownedByFSGroup(v) {
			if err := applyFSGroup(ps.volumes[volume], *sc.FSGroup, readOnlyVolume(v), sc.FSGroupChangePolicy); err != nil {
				return err
			}
		}
	}
	if ps.fsGroupDone == nil {
		ps.fsGroupDone = map[string]bool{}
	}
	ps.fsGroupDone[volume] = true
	return nil
}

// pruneTerminationLogs removes the termination-message files of earlier instances.
func pruneTerminationLogs(cdir string) {
	entries, _ := os.ReadDir(cdir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), terminationLogSuffix) {
			os.Remove(filepath.Join(cdir, e.Name()))
		}
	}
}

// terminationMessage is what the container wrote to its termination-message file (at
// most 4096 bytes, kubelet's limit), or with FallbackToLogsOnError and an error exit
// and an empty file, the last lines of its log.
func terminationMessage(path string, spec *v1.Container, code int, logPath string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4096 {
		b = b[:4096]
	}
	if len(b) == 0 && code != 0 && spec != nil && spec.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError {
		return lastLogLines(logPath, 80, 2048)
	}
	return string(b)
}

// bundleDir is where an instance's bundle lives: short, as overlayfs's mount options
// (which name the upper and work directories) are limited to a page.
func (m *Manager) bundleDir(id string) string {
	return filepath.Join(m.cfg.RootDir, "c", id[:16])
}

// removeBundle unmounts an instance's root file system and removes its bundle.
func (m *Manager) removeBundle(dir string) {
	if err := m.run.UnmountRootfs(filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "rootfs")); err != nil {
		m.cfg.Logger.Warn("unmounting a container's root file system", "dir", dir, "err", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		m.cfg.Logger.Warn("removing a container's bundle", "dir", dir, "err", err)
	}
	m.releaseImage(dir)
}

// startFailed records an instance that could not be started; ps.mu is held.
func (m *Manager) startFailed(ps *podState, c *container, msg string) {
	now := metav1.NewTime(m.cfg.Clock.Now())
	c.term = &v1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", Message: msg, StartedAt: metav1.NewTime(time.Unix(0, 0).UTC()), FinishedAt: now, ContainerID: status.ContainerIDPrefix + c.id}
	c.waiting = &v1.ContainerStateWaiting{Reason: "RunContainerError", Message: msg}
	m.event(ps.pod, v1.EventTypeWarning, "Failed", "Error: "+msg)
	m.cfg.Logger.Warn("container could not start", "pod", ps.pod.Namespace+"/"+ps.pod.Name, "container", c.name, "error", msg)
	m.later(ps, 0)
}

// pruneLogs keeps the log files (the current one and its rotations) of the previous
// instance and removes older instances' files.
func (m *Manager) pruneLogs(dir string, current int) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		numStr, _, _ := strings.Cut(e.Name(), ".")
		n, err := strconv.Atoi(numStr)
		if err == nil && n < current-1 {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// wait waits for an instance to exit (the shim tells), records how the container
// ended (its exit code, OOMKilled when the kernel killed it for its memory limit, its
// termination message), removes its bundle and notifies the agent. An instance the
// shim no longer knows (the shim was restarted) is lost: it is killed and recorded as
// ended with 137.
func (m *Manager) wait(ps *podState, c *container, inst *instance, spec *v1.Container) {
	code := 0
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		exit, err := m.run.Wait(context.Background(), inst.id)
		if err == nil {
			code = exit
			break
		}
		if errors.Is(err, shim.ErrNotFound) {
			m.cfg.Logger.Warn("the shim lost a container: killing it", "pod", podID(ps.pod), "container", c.name, "id", inst.id)
			_ = m.run.Kill(context.Background(), inst.id, syscall.SIGKILL)
			code = 137
			break
		}
		m.cfg.Logger.Warn("waiting for a container through the shim", "container", inst.id, "err", err)
		time.Sleep(delay)
	}
	// runc keeps a detached container's cgroup, and the OOM kills it counted, until
	// the container is deleted.
	oom := false
	if st, err := runc.Stats(inst.cgroup); err == nil {
		oom = st.OOMKilled(code)
	}
	inst.stop()
	if err := m.run.Delete(context.Background(), inst.id); err != nil {
		m.cfg.Logger.Warn("deleting a container", "container", inst.id, "err", err)
	}
	_ = m.run.Forget(context.Background(), inst.id)
	m.removeBundle(inst.dir)
	term := &v1.ContainerStateTerminated{ExitCode: int32(code), ContainerID: status.ContainerIDPrefix + inst.id,
		Message: terminationMessage(inst.termLog, spec, code, inst.logPath)}
	if oom {
		term.Reason = "OOMKilled"
	}
	ps.mu.Lock()
	if c.inst == inst {
		c.inst = nil
		c.ready = false
		term.StartedAt, term.FinishedAt = metav1.NewTime(c.startedAt), metav1.NewTime(m.cfg.Clock.Now())
		c.term = term
		m.saveContainers(ps)
	}
	uid := ps.pod.UID
	ps.mu.Unlock()
	close(inst.done)
	m.notify(uid)
}

// stopInstance runs the container's preStop hook, waits until drain has passed since it
// began (endpointDrain, for a deleted pod), sends the stop signal to its process, and
// SIGKILL when it has not exited within grace (at least minGraceAfterPreStop after the
// hook). It returns when the instance has exited.
func (m *Manager) stopInstance(ps *podState, c *container, inst *instance, grace, drain time.Duration) {
	ps.mu.Lock()
	pod := ps.pod
	spec := containerSpec(pod, c.name)
	podIP := ps.ip.String()
	ps.mu.Unlock()
	start := m.cfg.Clock.Now()
	if spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil && grace > 0 {
		m.runPreStop(pod, spec, inst, podIP, grace)
		grace = max(grace-m.cfg.Clock.Since(start), minGraceAfterPreStop)
	}
	if wait := drain - m.cfg.Clock.Since(start); wait > 0 {
		select {
		case <-inst.done:
			return
		case <-m.cfg.Clock.After(wait):
		}
		grace = max(grace-wait, 0)
	}
	sig := inst.stopSignal
	if sig == 0 {
		sig = unix.SIGTERM
	}
	// The container's process: PID 1 of its PID namespace (or, in a shared one, the
	// container's main process), as runc kill would signal it.
	_ = unix.Kill(inst.initPID, sig)
	select {
	case <-inst.done:
		return
	case <-m.cfg.Clock.After(grace):
	}
	// PID 1 of the container's PID namespace: its death takes every process in it,
	// and runc then exits with 137.
	_ = unix.Kill(inst.initPID, unix.SIGKILL)
	<-inst.done
}

// runPreStop runs a preStop hook (exec, httpGet, tcpSocket or sleep) within grace.
func (m *Manager) runPreStop(pod *v1.Pod, spec *v1.Container, inst *instance, podIP string, grace time.Duration) {
	h := spec.Lifecycle.PreStop
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if h.Sleep != nil {
		select {
		case <-m.cfg.Clock.After(time.Duration(h.Sleep.Seconds) * time.Second):
		case <-ctx.Done():
		case <-inst.done:
		}
		return
	}
	p := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: h.Exec, HTTPGet: h.HTTPGet, TCPSocket: h.TCPSocket},
		TimeoutSeconds: int32(max(grace/time.Second, 1))}
	prober := m.proberFor(pod.UID)
	res, msg := prober.Probe(ctx, p, pod, spec, podIP)
	if res != probe.Success {
		m.cfg.Logger.Warn("preStop hook failed", "pod", pod.Namespace+"/"+pod.Name, "container", spec.Name, "message", msg)
	}
}

// proberFor is a prober that dials from the node's network namespace and whose exec
// handlers run in the pod's containers.
func (m *Manager) proberFor(uid types.UID) *probe.Prober {
	return &probe.Prober{Dial: m.dial, Exec: func(ctx context.Context, name string, cmd []string) (int, []byte, error) {
		return m.execCombined(ctx, uid, name, cmd)
	}}
}

// startProbes starts the instance's startup, liveness and readiness workers; their
// updates flip started and ready, restart the container on a liveness or startup
// failure, and notify the agent at once. ps.mu is held.
func (m *Manager) startProbes(ctx context.Context, ps *podState, c *container, inst *instance, spec *v1.Container) {
	pod := ps.pod
	podIP := ps.ip.String()
	uid := pod.UID
	prober := m.proberFor(uid)
	specs := map[probe.Kind]*v1.Probe{probe.Startup: spec.StartupProbe, probe.Liveness: spec.LivenessProbe, probe.Readiness: spec.ReadinessProbe}
	inst.probe = map[probe.Kind]*probe.Worker{}
	for kind, p := range specs {
		if p != nil {
			inst.probe[kind] = probe.NewWorker(kind, p, pod.Spec.RestartPolicy)
		}
	}
	if len(inst.probe) == 0 {
		return
	}
	updates := make(chan probe.Update, 8)
	state := func() probe.Container {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		return probe.Container{ID: inst.id, Running: c.inst == inst, StartedAt: c.startedAt, Terminated: c.inst != inst,
			Started: c.started, PodDeleting: ps.pod.DeletionTimestamp != nil || ps.terminal}
	}
	for kind, w := range inst.probe {
		p := specs[kind]
		run := func(ctx context.Context) (probe.Result, string) { return prober.Probe(ctx, p, pod, spec, podIP) }
		go w.Run(ctx, m.cfg.Clock, state, run, updates)
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case u := <-updates:
				m.applyProbe(ps, c, inst, u)
			}
		}
	}()
}

// applyProbe applies one probe result change to the instance it is about.
func (m *Manager) applyProbe(ps *podState, c *container, inst *instance, u probe.Update) {
	ps.mu.Lock()
	if c.inst != inst {
		ps.mu.Unlock()
		return
	}
	pod := ps.pod
	switch u.Kind {
	case probe.Readiness:
		if ready := u.Result == probe.Success; ready != c.ready {
			c.ready = ready
			m.saveContainers(ps) // a new agent adopts the container as ready as it is
		}
	case probe.Startup:
		if u.Result == probe.Success && !c.started {
			c.started = true
			for _, k := range []probe.Kind{probe.Liveness, probe.Readiness} {
				if w := inst.probe[k]; w != nil {
					w.Trigger()
				}
			}
		}
	}
	kill := u.Result == probe.Failure && (u.Kind == probe.Liveness || u.Kind == probe.Startup)
	ps.mu.Unlock()
	if u.Result == probe.Failure {
		m.event(pod, v1.EventTypeWarning, "Unhealthy", string(u.Kind)+" probe failed: "+u.Message)
	}
	if kill {
		m.event(pod, v1.EventTypeNormal, "Killing", fmt.Sprintf("Container %s failed %s probe, will be restarted", c.name, strings.ToLower(string(u.Kind))))
		m.cfg.Logger.Info("container failed its probe, restarting it", "pod", pod.Namespace+"/"+pod.Name,
			"container", c.name, "probe", string(u.Kind), "message", u.Message)
		go m.stopInstance(ps, c, inst, gracePeriod(pod), 0)
	}
	m.notify(pod.UID)
}

// event records an event on the pod when the runtime has a recorder.
func (m *Manager) event(pod *v1.Pod, eventType, reason, message string) {
	if m.cfg.Recorder != nil && pod != nil {
		m.cfg.Recorder.Event(pod, eventType, reason, message)
	}
}

// podID is namespace/name.
func podID(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// newID returns a container id: 64 hex digits, like containerd's.
func newID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func numCPU() int { return goruntime.NumCPU() }

func totalMemory() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
