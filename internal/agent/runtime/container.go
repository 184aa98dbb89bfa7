package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
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

	"github.com/tranche/tranche/internal/agent/backoff"
	"github.com/tranche/tranche/internal/agent/images"
	"github.com/tranche/tranche/internal/agent/probe"
	"github.com/tranche/tranche/internal/agent/status"
	"github.com/tranche/tranche/internal/netns"
)

// container is the runtime state of one container of a pod across its instances. All
// fields are guarded by the pod's mutex.
type container struct {
	name         string
	plan         images.Plan
	id           string
	inst         *instance
	startedAt    time.Time
	term         *v1.ContainerStateTerminated
	prevTerm     *v1.ContainerStateTerminated
	waiting      *v1.ContainerStateWaiting
	restartCount int32
	started      bool
	ready        bool
	created      bool
}

// instance is one running process of a container.
type instance struct {
	id   string
	pid  int
	env  []string
	cred *credential
	// stopSignal is the image's STOPSIGNAL (SIGTERM when 0).
	stopSignal syscall.Signal
	done       chan struct{}
	stop       context.CancelFunc
	probe      map[probe.Kind]*probe.Worker
	// console is the instance's stdio for attach.
	console *console
}

// credential is the user a container runs as.
type credential struct {
	uid, gid uint32
	groups   []uint32
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

func (c *container) running() bool { return c.inst != nil }

// view is the container's ContainerView; ok is false before anything was tried.
func (c *container) view() (status.ContainerView, bool) {
	v := status.ContainerView{ID: c.id, Image: c.plan.Image, ImageID: c.plan.ImageID, RestartCount: c.restartCount}
	switch {
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
	if c.term != nil {
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

// start creates and starts a new instance of c. Failures before a process exists leave
// c waiting with kubelet's reason (CreateContainerConfigError, ErrImagePull,
// CreateContainerError); a program that cannot be executed is an instance that ended
// at once with StartError, as containerd reports it. ps.mu is held.
func (m *Manager) start(ctx context.Context, ps *podState, c *container, spec *v1.Container) {
	pod := ps.pod
	cpu, mem := nodeResources()
	pe := podEnv{pod: pod, podIPs: []string{ps.ip.String()}, hostIPs: []string{m.node.Underlay.String()}, hostname: ps.hostname, nodeCPU: cpu, nodeMemory: mem}
	if m.cfg.Services != nil {
		svcs, err := m.cfg.Services()
		if err != nil {
			m.cfg.Logger.Warn("listing Services for the container's environment", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
		pe.services = serviceEnv(pod.Namespace, pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks, svcs)
	}
	env, err := containerEnv(ctx, pe, spec, m.cfg.Lookup, defaultPath, nil)
	if err != nil {
		c.waiting = &v1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: err.Error()}
		m.event(pod, v1.EventTypeWarning, "Failed", "Error: "+err.Error())
		m.later(ps, backoff.DefaultInitial)
		return
	}
	expanded := spec.DeepCopy()
	lookup := environLookup(env)
	for i := range expanded.Command {
		expanded.Command[i] = expand(expanded.Command[i], lookup)
	}
	for i := range expanded.Args {
		expanded.Args[i] = expand(expanded.Args[i], lookup)
	}
	plan, err := m.cfg.Catalog.Resolve(spec.Image, expanded)
	if err != nil {
		reason := "ErrImagePull"
		if c.waiting != nil && (c.waiting.Reason == "ErrImagePull" || c.waiting.Reason == "ImagePullBackOff") {
			reason = "ImagePullBackOff"
		}
		msg := err.Error()
		if reason == "ImagePullBackOff" {
			msg = fmt.Sprintf("Back-off pulling image %q: %s", spec.Image, err)
		}
		c.waiting = &v1.ContainerStateWaiting{Reason: reason, Message: msg}
		m.event(pod, v1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: %s", spec.Image, err))
		m.later(ps, backoff.DefaultInitial)
		return
	}
	cdir := filepath.Join(m.podDir(pod.UID), "containers", spec.Name)
	plan = plan.Expand(filepath.Join(cdir, "config"), filepath.Join(cdir, "data"))
	if plan.Applets != "" {
		// busybox's applets first, unless the container set its own PATH.
		for i, kv := range env {
			if kv == "PATH="+defaultPath {
				env[i] = "PATH=" + containerApplets + ":" + defaultPath
			}
		}
	}
	env = withImageEnv(env, plan.Env)
	// There is no image to pull: the event that says an image is there says what
	// runs in its place.
	m.event(pod, v1.EventTypeNormal, "Pulled", "Container image "+strconv.Quote(spec.Image)+" already present on machine: "+plan.Message)
	if !c.created {
		c.created = true
		m.cfg.Logger.Info("container image plan", "pod", pod.Namespace+"/"+pod.Name, "container", spec.Name, "plan", plan.Message)
	}
	script, cred, err := m.prepare(ps, spec, &plan, cdir, env)
	c.plan = plan
	if err != nil {
		c.waiting = &v1.ContainerStateWaiting{Reason: "CreateContainerError", Message: err.Error()}
		m.event(pod, v1.EventTypeWarning, "Failed", "Error: "+err.Error())
		m.later(ps, backoff.DefaultInitial)
		return
	}

	// A new instance from here on.
	if c.id != "" {
		c.restartCount++
	}
	if c.term != nil {
		c.prevTerm = c.term
	}
	c.id, c.term, c.waiting, c.started, c.ready = newID(), nil, nil, spec.StartupProbe == nil, false
	if err := os.MkdirAll(filepath.Join(cdir, "logs"), 0o755); err != nil {
		m.startFailed(ps, c, err.Error())
		return
	}
	logPath := filepath.Join(cdir, "logs", fmt.Sprintf("%d.log", c.restartCount))
	m.pruneLogs(filepath.Dir(logPath), int(c.restartCount))
	log, err := openCRILog(logPath, m.cfg.Logs, m.cfg.Clock.Now)
	if err != nil {
		m.startFailed(ps, c, err.Error())
		return
	}
	argv := m.argv(plan)
	if len(argv) == 0 {
		log.close()
		m.startFailed(ps, c, "no program to run: the tranche binary (SelfExe) is not configured for built-in images")
		return
	}
	if _, err := lookPathIn(argv[0], environLookup(env)); err != nil {
		log.close()
		m.startFailed(ps, c, fmt.Sprintf("failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: %q: %v: unknown", argv[0], err))
		return
	}
	stdout := &streamWriter{log: log, stream: "stdout"}
	stderr := &streamWriter{log: log, stream: "stderr"}
	con, err := newConsole(spec, stdout, stderr)
	if err != nil {
		log.close()
		m.startFailed(ps, c, err.Error())
		return
	}
	cmd := &exec.Cmd{
		Path:   m.cfg.Catalog.Busybox,
		Args:   []string{"sh", "-c", script + " " + shellJoin(m.withUser(cred, argv))},
		Env:    env,
		Stdout: stdout,
		Stderr: stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:   unix.CLONE_NEWPID,
			Unshareflags: unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC,
			Setpgid:      true,
			Pdeathsig:    syscall.SIGKILL,
		},
	}
	con.configure(cmd)
	startedR, startedW, err := os.Pipe()
	if err != nil {
		con.abort()
		log.close()
		m.startFailed(ps, c, err.Error())
		return
	}
	cmd.ExtraFiles = []*os.File{startedW} // fd 3 = startedFD
	err = netns.StartProcess(ps.netns, cmd)
	startedW.Close()
	if err != nil {
		startedR.Close()
		con.abort()
		log.close()
		m.startFailed(ps, c, err.Error())
		return
	}
	waitStarted(startedR, setupTimeout)
	startedR.Close()
	con.started()
	pctx, stop := context.WithCancel(ps.ctx)
	inst := &instance{id: c.id, pid: cmd.Process.Pid, env: env, cred: cred, stopSignal: plan.StopSignal, done: make(chan struct{}), stop: stop, console: con}
	c.inst, c.startedAt = inst, m.cfg.Clock.Now()
	m.event(pod, v1.EventTypeNormal, "Created", "Created container: "+spec.Name)
	m.event(pod, v1.EventTypeNormal, "Started", "Started container "+spec.Name)
	if spec.ReadinessProbe == nil {
		c.ready = true
	}
	go m.wait(ps, c, inst, cmd, stdout, stderr, log)
	m.startProbes(pctx, ps, c, inst, spec)
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

// argv is the program a plan runs; nil when it needs the tranche binary and there is
// none.
func (m *Manager) argv(p images.Plan) []string {
	if p.Builtin == "" {
		return p.Argv
	}
	if m.cfg.SelfExe == "" {
		return nil
	}
	if p.Self {
		return append([]string{m.cfg.SelfExe, p.Builtin}, p.BuiltinArgs...)
	}
	return append([]string{m.cfg.SelfExe, "builtin", p.Builtin}, p.BuiltinArgs...)
}

// withUser prefixes argv with setpriv when the container runs as another user.
func (m *Manager) withUser(cred *credential, argv []string) []string {
	if cred == nil {
		return argv
	}
	groups := "--clear-groups"
	if len(cred.groups) > 0 {
		gs := make([]string, len(cred.groups))
		for i, g := range cred.groups {
			gs[i] = strconv.FormatUint(uint64(g), 10)
		}
		groups = "--groups=" + strings.Join(gs, ",")
	}
	return append([]string{m.setpriv, fmt.Sprintf("--reuid=%d", cred.uid), fmt.Sprintf("--regid=%d", cred.gid), groups, "--"}, argv...)
}

// containerApplets is where containers see the busybox applet links (RootDir/bin).
const containerApplets = "/run/.tranche-bin"

// withImageEnv adds an image's environment (images.Plan.Env) under the container's:
// as with a container image's ENV, a variable the container sets wins, except the
// default PATH, which the image's replaces.
func withImageEnv(env, image []string) []string {
	out := append([]string(nil), env...)
	for _, kv := range image {
		name, _, _ := strings.Cut(kv, "=")
		found := false
		for i, have := range out {
			if n, v, _ := strings.Cut(have, "="); n == name {
				found = true
				if name == "PATH" && v == defaultPath {
					out[i] = kv
				}
			}
		}
		if !found {
			out = append(out, kv)
		}
	}
	return out
}

// prepare writes the plan's files and returns the start-up script (everything before
// the final exec, which the caller appends) and the user to run as. The plan is
// already expanded for the container's directories.
func (m *Manager) prepare(ps *podState, spec *v1.Container, plan *images.Plan, cdir string, env []string) (string, *credential, error) {
	configDir, dataDir := filepath.Join(cdir, "config"), filepath.Join(cdir, "data")
	cred, err := m.credential(ps.pod, spec, plan.User)
	if err != nil {
		return "", nil, err
	}
	if cred != nil && m.setpriv == "" {
		return "", nil, fmt.Errorf("container %q runs as user %d, which needs util-linux's setpriv on the node", spec.Name, cred.uid)
	}
	for _, d := range []string{configDir, dataDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", nil, err
		}
	}
	if cred != nil {
		if err := os.Chown(dataDir, int(cred.uid), int(cred.gid)); err != nil {
			return "", nil, err
		}
	}
	for name, content := range plan.Files {
		p := filepath.Join(configDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", nil, err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return "", nil, err
		}
	}
	bb := shellQuote(m.cfg.Catalog.Busybox)
	etc := filepath.Join(m.podDir(ps.pod.UID), "etc")
	var s strings.Builder
	s.WriteString("set -e\n")
	fmt.Fprintf(&s, "%s mount -t proc proc /proc\n", bb)
	// Copies of other pods' namespace mounts would keep those namespaces alive.
	fmt.Fprintf(&s, "%s umount -l /run/netns 2>/dev/null || true\n", bb)
	// The container gets its own /run, as in any container: the host's runtime state
	// stays out of sight, and mount points under /run (the service account token at
	// /var/run/secrets/kubernetes.io/serviceaccount) can be created there.
	fmt.Fprintf(&s, "%s mount -t tmpfs -o mode=0755,size=16m tmpfs /run\n", bb)
	for _, f := range []string{"hosts", "resolv.conf", "hostname"} {
		fmt.Fprintf(&s, "%s mount --bind %s /etc/%s\n", bb, shellQuote(filepath.Join(etc, f)), f)
	}
	fmt.Fprintf(&s, "%s hostname %s\n", bb, shellQuote(ps.hostname))
	if plan.Applets != "" {
		// Seen through the private /run, so that a volume mounted over the directory
		// holding the node's data (an emptyDir at /tmp while the data dir is under
		// /tmp) does not hide the applets.
		fmt.Fprintf(&s, "%s mkdir -p %s\n", bb, containerApplets)
		fmt.Fprintf(&s, "%s mount --bind %s %s\n", bb, shellQuote(m.applets), containerApplets)
	}
	for _, pm := range plan.Mounts {
		if _, err := os.Stat(pm.Target); err != nil {
			return "", nil, fmt.Errorf("image %q needs %s on the node's file system (install the Debian package that provides it; make deps does): %w", spec.Image, pm.Target, err)
		}
		fmt.Fprintf(&s, "%s mount --bind %s %s\n", bb, shellQuote(pm.Source), shellQuote(pm.Target))
	}
	// Every volume is first bound to a staging point in the private /run, then from
	// there to its mount path: a volume mounted over a directory that holds the node's
	// data (say an emptyDir at /tmp while the data dir is under /tmp) would otherwise
	// hide the sources of the volumes mounted after it.
	type volMount struct {
		stage, target string
		readOnly      bool
	}
	var mounts []volMount
	for i, vm := range spec.VolumeMounts {
		src, ok := ps.volumes[vm.Name]
		if !ok {
			return "", nil, fmt.Errorf("cannot find volume %q to mount into container %q", vm.Name, spec.Name)
		}
		if vm.SubPath != "" {
			src = filepath.Join(src, vm.SubPath)
		}
		target := vm.MountPath
		if dir, ok := underPlanMount(plan.Mounts, target); ok {
			// The mount point lies in a directory the plan provides: make it there.
			if fi, err := os.Stat(src); err == nil && !fi.IsDir() {
				err = os.MkdirAll(filepath.Dir(dir), 0o755)
				if err == nil {
					err = touch(dir)
				}
				if err != nil {
					return "", nil, fmt.Errorf("mount point %q of volume %q: %w", vm.MountPath, vm.Name, err)
				}
			} else if err := os.MkdirAll(dir, 0o755); err != nil {
				return "", nil, fmt.Errorf("mount point %q of volume %q: %w", vm.MountPath, vm.Name, err)
			}
		} else if underRun(target) {
			// busybox's remount finds mounts by their path in /proc/mounts, which
			// shows /run, not the /var/run symlink.
			target = "/run/" + strings.TrimPrefix(strings.TrimPrefix(filepath.Clean(target), "/var/run/"), "/run/")
		} else if _, err := os.Stat(target); err != nil {
			return "", nil, fmt.Errorf("mount point %q of volume %q does not exist on the node's file system (containers run on it, without an image): %w", vm.MountPath, vm.Name, err)
		}
		stage := fmt.Sprintf("/run/.tranche-volumes/%d", i)
		if fi, err := os.Stat(src); err == nil && !fi.IsDir() {
			fmt.Fprintf(&s, "%s mkdir -p /run/.tranche-volumes && %s touch %s\n", bb, bb, stage)
		} else {
			fmt.Fprintf(&s, "%s mkdir -p %s\n", bb, stage)
		}
		fmt.Fprintf(&s, "%s mount --bind %s %s\n", bb, shellQuote(src), stage)
		mounts = append(mounts, volMount{stage, target, vm.ReadOnly})
	}
	for _, m := range mounts {
		if underRun(m.target) {
			fmt.Fprintf(&s, "%s mkdir -p %s\n", bb, shellQuote(m.target))
		}
		fmt.Fprintf(&s, "%s mount --bind %s %s\n", bb, m.stage, shellQuote(m.target))
		if m.readOnly {
			fmt.Fprintf(&s, "%s mount -o remount,bind,ro %s\n", bb, shellQuote(m.target))
		}
	}
	// Without a workingDir a container starts in / (the images' usual WORKDIR), not
	// in the agent's own directory.
	wd := spec.WorkingDir
	if wd == "" {
		wd = "/"
	}
	fmt.Fprintf(&s, "cd %s\n", shellQuote(wd))
	// From here the container counts as started (startedFD): its mounts are in place,
	// so a preStop hook or kubectl exec sees the container's file system, never the
	// node's. What follows (the image's setup, then its program) is the entrypoint.
	fmt.Fprintf(&s, "echo >&%d; exec %d>&-\n", startedFD, startedFD)
	for _, d := range plan.OwnedDirs {
		// In double quotes, not single: the image's directories name its variables ($PGDATA).
		fmt.Fprintf(&s, "%s mkdir -p \"%s\"\n", bb, d)
		if cred != nil {
			fmt.Fprintf(&s, "%s chown %d:%d \"%s\"\n", bb, cred.uid, cred.gid, d)
		}
	}
	for _, setup := range plan.Setup {
		fmt.Fprintf(&s, "%s\n", shellJoin(m.withUser(cred, setup)))
	}
	s.WriteString("exec")
	return s.String(), cred, nil
}

// startedFD is the descriptor on which a container's start-up script says that its
// mounts are done; setupTimeout bounds the wait for it.
const (
	startedFD    = 3
	setupTimeout = 10 * time.Second
)

// waitStarted waits until the start-up script writes to r, closes it (it failed before:
// the process's exit tells why) or timeout passes.
func waitStarted(r *os.File, timeout time.Duration) {
	_ = r.SetReadDeadline(time.Now().Add(timeout))
	var b [1]byte
	_, _ = r.Read(b[:])
}

// credential is the user the container runs as: securityContext runAsUser/runAsGroup
// (the container's over the pod's) or the plan's user; nil for the agent's own.
func (m *Manager) credential(pod *v1.Pod, spec *v1.Container, planUser string) (*credential, error) {
	var uid, gid *int64
	var groups []int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		uid, gid, groups = sc.RunAsUser, sc.RunAsGroup, sc.SupplementalGroups
	}
	if sc := spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = sc.RunAsGroup
		}
	}
	if uid == nil && planUser != "" {
		u, err := user.Lookup(planUser)
		if err != nil {
			return nil, fmt.Errorf("container %q: user %q: %w", spec.Name, planUser, err)
		}
		id, _ := strconv.ParseInt(u.Uid, 10, 64)
		g, _ := strconv.ParseInt(u.Gid, 10, 64)
		uid = &id
		if gid == nil {
			gid = &g
		}
	}
	if uid == nil {
		if gid == nil && len(groups) == 0 {
			return nil, nil
		}
		uid = new(int64(os.Getuid()))
	}
	c := &credential{uid: uint32(*uid)}
	switch {
	case gid != nil:
		c.gid = uint32(*gid)
	default:
		if u, err := user.LookupId(strconv.FormatInt(*uid, 10)); err == nil {
			g, _ := strconv.ParseUint(u.Gid, 10, 32)
			c.gid = uint32(g)
		}
	}
	for _, g := range groups {
		c.groups = append(c.groups, uint32(g))
	}
	return c, nil
}

// wait reaps an instance, records how it ended and notifies the agent.
func (m *Manager) wait(ps *podState, c *container, inst *instance, cmd *exec.Cmd, stdout, stderr *streamWriter, log *criLog) {
	err := cmd.Wait()
	inst.console.finish()
	stdout.flush()
	stderr.flush()
	log.close()
	code := 0
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Signaled():
			code = 128 + int(ws.Signal())
		default:
			code = ws.ExitStatus()
		}
	} else if err != nil {
		code = 128
	}
	inst.stop()
	ps.mu.Lock()
	if c.inst == inst {
		c.inst = nil
		c.ready = false
		c.term = &v1.ContainerStateTerminated{ExitCode: int32(code), StartedAt: metav1.NewTime(c.startedAt),
			FinishedAt: metav1.NewTime(m.cfg.Clock.Now()), ContainerID: status.ContainerIDPrefix + inst.id}
	}
	uid := ps.pod.UID
	ps.mu.Unlock()
	close(inst.done)
	m.notify(uid)
}

// stopInstance runs the container's preStop hook, waits until drain has passed since it
// began (endpointDrain, for a deleted pod), sends SIGTERM to its process group, and
// SIGKILL when it has not exited within grace (at least minGraceAfterPreStop after the
// hook). It returns when the instance has exited.
func (m *Manager) stopInstance(ps *podState, c *container, inst *instance, grace, drain time.Duration) {
	ps.mu.Lock()
	pod := ps.pod
	var spec *v1.Container
	for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == c.name {
				spec = &cs[i]
			}
		}
	}
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
	_ = unix.Kill(-inst.pid, sig)
	select {
	case <-inst.done:
		return
	case <-m.cfg.Clock.After(grace):
	}
	// PID 1 of the container's PID namespace: its death takes every process in it.
	_ = unix.Kill(inst.pid, unix.SIGKILL)
	_ = unix.Kill(-inst.pid, unix.SIGKILL)
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
		c.ready = u.Result == probe.Success
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

// lookPathIn resolves a program as execve through PATH from env would.
func lookPathIn(prog string, env func(string) (string, bool)) (string, error) {
	if strings.Contains(prog, "/") {
		st, err := os.Stat(prog)
		if err != nil {
			return "", errors.New("no such file or directory")
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return "", errors.New("permission denied")
		}
		return prog, nil
	}
	path, _ := env("PATH")
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, prog)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("executable file not found in $PATH")
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// setProcessGroup puts cmd in its own process group and makes cancelling kill the
// whole group, so that an exec's forked child goes too.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return unix.Kill(-cmd.Process.Pid, unix.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
}

func numCPU() int { return goruntime.NumCPU() }

func totalMemory() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// underPlanMount returns where, on the node, the mount point target is when it lies
// strictly below one of the plan's mount targets (the last such mount wins, as it
// hides the others).
func underPlanMount(mounts []images.Mount, target string) (string, bool) {
	target = filepath.Clean(target)
	for i := len(mounts) - 1; i >= 0; i-- {
		base := filepath.Clean(mounts[i].Target)
		if rel, err := filepath.Rel(base, target); err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") {
			return filepath.Join(mounts[i].Source, rel), true
		}
	}
	return "", false
}

// touch creates an empty file at p unless it exists.
func touch(p string) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// underRun reports whether p lies in the container's private /run (directly or
// through Debian's /var/run symlink), where missing mount points can be created.
func underRun(p string) bool {
	p = filepath.Clean(p)
	return strings.HasPrefix(p, "/run/") || strings.HasPrefix(p, "/var/run/")
}
