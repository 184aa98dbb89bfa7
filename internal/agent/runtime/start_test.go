package runtime

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	crv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/tranche/tranche/internal/agent/images"
	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/agent/shim"
	"github.com/tranche/tranche/internal/agent/status"
	"github.com/tranche/tranche/internal/clusternet"
	"github.com/tranche/tranche/internal/imagebuild"
	"github.com/tranche/tranche/internal/imagestore"
)

// planPod is a one-container pod for plan tests, changed by mutate.
func planPod(mutate func(*v1.Pod)) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "0123456789abcdef"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "example.test/app:1",
			Command: []string{"/bin/app", "$(GREETING)"}, Args: []string{"--to=$(WHO)", "$$(WHO)"}}}},
	}
	if mutate != nil {
		mutate(pod)
	}
	return pod
}

// planIn is the plan input of pod's first container with the given volumes.
func planIn(pod *v1.Pod, volumes ...volumeSource) planInput {
	return planInput{pod: pod, container: &pod.Spec.Containers[0], env: []string{"GREETING=hello", "WHO=world"},
		image: crv1.Config{StopSignal: "SIGQUIT"}, id: strings.Repeat("ab", 32), restartCount: 2,
		bundleDir: "/r/c/abababababababab", containerDir: "/r/pods/u/containers/c", etcDir: "/r/pods/u/etc",
		volumes: volumes, netNS: "/run/netns/x", ipcNS: "/r/pods/u/ns/ipc", utsNS: "/r/pods/u/ns/uts",
		hostname: "p", podCgroup: "/tranche/n/podu", nodeMemory: 1 << 30, seccompDir: "/r/seccomp",
		hostCapabilities: []string{"CAP_CHOWN", "CAP_KILL"}, cgroup2: true}
}

func TestPlanContainer(t *testing.T) {
	dest := func(p *containerPlan) []string {
		var out []string
		for _, m := range p.input.Mounts {
			if strings.HasPrefix(m.Source, "/r/") || strings.HasPrefix(m.Source, "/data") {
				out = append(out, m.Destination+"<"+m.Source)
				if m.ReadOnly {
					out[len(out)-1] += " ro"
				}
			}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		in    planInput
		check func(t *testing.T, p *containerPlan)
	}{{
		name: "the command and arguments are expanded, $$ escapes",
		in:   planIn(planPod(nil)),
		check: func(t *testing.T, p *containerPlan) {
			if diff := cmp.Diff([]string{"/bin/app", "hello", "--to=world", "$(WHO)"}, append(p.input.Container.Command, p.input.Container.Args...)); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "paths: bundle, rootfs, the log numbered by restart count, the termination log by id",
		in:   planIn(planPod(nil)),
		check: func(t *testing.T, p *containerPlan) {
			got := []string{p.dir, p.rootfs, p.upper, p.work, p.logPath, p.termLog, p.input.Rootfs, p.input.CgroupsPath}
			want := []string{"/r/c/abababababababab", "/r/c/abababababababab/rootfs", "/r/c/abababababababab/upper",
				"/r/c/abababababababab/work", "/r/pods/u/containers/c/logs/2.log",
				"/r/pods/u/containers/c/abababababababab.termination-log", "/r/c/abababababababab/rootfs",
				"/tranche/n/podu/" + strings.Repeat("ab", 32)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("paths (-want +got):\n%s", diff)
			}
			if p.stopSignal != syscall.SIGQUIT {
				t.Errorf("stop signal %v, want SIGQUIT from the image", p.stopSignal)
			}
			wantReq := shim.StartRequest{ID: strings.Repeat("ab", 32), Bundle: p.dir, LogPath: p.logPath}
			if diff := cmp.Diff(wantReq, p.request); diff != "" {
				t.Errorf("start request (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "the pod's /etc files and the termination log are mounted",
		in:   planIn(planPod(nil)),
		check: func(t *testing.T, p *containerPlan) {
			want := []string{"/etc/hosts</r/pods/u/etc/hosts", "/etc/resolv.conf</r/pods/u/etc/resolv.conf",
				"/etc/hostname</r/pods/u/etc/hostname", "/dev/termination-log</r/pods/u/containers/c/abababababababab.termination-log"}
			if diff := cmp.Diff(want, dest(p)); diff != "" {
				t.Errorf("mounts (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "a volume over /etc/hosts replaces the pod's; a custom termination path; volume files and directories",
		in: planIn(planPod(func(pod *v1.Pod) {
			pod.Spec.Containers[0].TerminationMessagePath = "/tmp/end"
			pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "h", MountPath: "/etc/hosts"}, {Name: "d", MountPath: "/data", ReadOnly: true}}
		}), volumeSource{mount: v1.VolumeMount{Name: "h", MountPath: "/etc/hosts"}, source: "/data/hosts"},
			volumeSource{mount: v1.VolumeMount{Name: "d", MountPath: "/data", ReadOnly: true}, source: "/data/d", dir: true}),
		check: func(t *testing.T, p *containerPlan) {
			want := []string{"/etc/resolv.conf</r/pods/u/etc/resolv.conf", "/etc/hostname</r/pods/u/etc/hostname",
				"/tmp/end</r/pods/u/containers/c/abababababababab.termination-log", "/etc/hosts</data/hosts", "/data</data/d ro"}
			if diff := cmp.Diff(want, dest(p)); diff != "" {
				t.Errorf("mounts (-want +got):\n%s", diff)
			}
			for _, m := range p.input.Mounts {
				if m.Destination == "/etc/hosts" && !m.File || m.Destination == "/data" && m.File {
					t.Errorf("mount %s: file %v", m.Destination, m.File)
				}
			}
		},
	}, {
		name: "a tty container gets a terminal in its spec and its start request",
		in: planIn(planPod(func(pod *v1.Pod) {
			pod.Spec.Containers[0].TTY, pod.Spec.Containers[0].Stdin = true, true
		})),
		check: func(t *testing.T, p *containerPlan) {
			if !p.input.Container.TTY || !p.request.TTY || !p.request.Stdin {
				t.Errorf("container tty %v, request tty %v stdin %v; want all true", p.input.Container.TTY, p.request.TTY, p.request.Stdin)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.in.container.DeepCopy()
			p := planContainer(tc.in)
			tc.check(t, p)
			if diff := cmp.Diff(before, tc.in.container); diff != "" {
				t.Errorf("the plan changed the pod's container (-before +after):\n%s", diff)
			}
		})
	}
}

// fakeStartEnv is a Manager whose containers run in a FakeRunner, with one image in
// its store, and a pod state with a sandbox that was never made: start without root.
type fakeStartEnv struct {
	m      *Manager
	run    *FakeRunner
	events *record.FakeRecorder
	ps     *podState
}

func newFakeStartEnv(t *testing.T, pod *v1.Pod) *fakeStartEnv {
	t.Helper()
	dir := t.TempDir()
	store, err := imagestore.Open(filepath.Join(dir, "images"))
	if err != nil {
		t.Fatal(err)
	}
	// One layer with one file, owned by whoever runs the test: unpacking needs no root.
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "bin/app", Mode: 0o755, Size: 2, Uid: os.Getuid(), Gid: os.Getgid(), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte("#!")); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(layer.Bytes(), types.DockerLayer))
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.Config(img, crv1.Config{Entrypoint: []string{"/bin/app"}, StopSignal: "SIGINT"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(context.Background(), img, "example.test/app:1"); err != nil {
		t.Fatal(err)
	}
	topo, err := clusternet.NewTopology("trf-", "n1")
	if err != nil {
		t.Fatal(err)
	}
	run := NewFakeRunner()
	events := record.NewFakeRecorder(100)
	m, err := New(Config{NodeName: "n1", Topology: topo, RootDir: filepath.Join(dir, "root"),
		Images: images.New(store, imagebuild.Source{}, images.Offline()), Shim: shim.NewClient(filepath.Join(dir, "shim")),
		Runc: &runc.Runtime{Binary: "/nonexistent/runc"}, Runner: run, Recorder: events})
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := m.podState(pod)
	ps.pod, ps.volumes = pod, map[string]string{}
	ps.netns, ps.ip, ps.hostname, ps.sandboxReady = "trf-p-x", netip.MustParseAddr("10.244.1.5"), pod.Name, true
	return &fakeStartEnv{m: m, run: run, events: events, ps: ps}
}

// startOnce runs start for the pod's first container, as SyncPod does, and returns it.
func (e *fakeStartEnv) startOnce() *container {
	e.ps.mu.Lock()
	defer e.ps.mu.Unlock()
	spec := &e.ps.pod.Spec.Containers[0]
	c := e.ps.container(spec.Name, false)
	e.m.start(context.Background(), e.ps, c, spec)
	return c
}

func TestStartWithFakeRunner(t *testing.T) {
	pod := planPod(nil)
	e := newFakeStartEnv(t, pod)
	c := e.startOnce()

	e.ps.mu.Lock()
	inst := c.inst
	e.ps.mu.Unlock()
	if inst == nil {
		t.Fatalf("no instance running; waiting %+v, term %+v", c.waiting, c.term)
	}
	if len(e.run.Started) != 1 {
		t.Fatalf("%d start requests, want 1", len(e.run.Started))
	}
	req := e.run.Started[0]
	if req.ID != inst.id || req.Bundle != inst.dir || req.LogPath != filepath.Join(e.m.podDir(pod.UID), "containers", "c", "logs", "0.log") {
		t.Errorf("start request %+v does not match the instance %s in %s", req, inst.id, inst.dir)
	}
	spec, ok := e.run.Spec(inst.id)
	if !ok {
		t.Fatal("the runner does not know the instance")
	}
	if got := spec.Process.Args; !slices.Equal(got, []string{"/bin/app", "$(GREETING)", "--to=$(WHO)", "$(WHO)"}) {
		// No GREETING or WHO in the environment: references stay as written.
		t.Errorf("args %q", got)
	}
	if !slices.Contains(spec.Process.Env, "HOSTNAME=p") {
		t.Errorf("env %q lacks the pod's hostname", spec.Process.Env)
	}
	if inst.stopSignal != syscall.SIGINT || !c.ready || !c.started || c.restartCount != 0 {
		t.Errorf("instance stop signal %v, ready %v, started %v, restarts %d; want SIGINT from the image, ready and started, 0",
			inst.stopSignal, c.ready, c.started, c.restartCount)
	}
	if !e.run.Mounted(filepath.Join(inst.dir, "rootfs")) {
		t.Error("the instance's root file system is not mounted")
	}
	if fi, err := os.Stat(inst.termLog); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("termination log: %v %v, want mode 0666 so that any user may write it", fi, err)
	}

	// The process exits: wait records it, deletes the container and its bundle.
	if err := e.run.Exit(inst.id, 3); err != nil {
		t.Fatal(err)
	}
	<-inst.done
	e.ps.mu.Lock()
	term := c.term
	running := c.inst != nil
	e.ps.mu.Unlock()
	if running || term == nil || term.ExitCode != 3 || term.ContainerID != status.ContainerIDPrefix+inst.id {
		t.Fatalf("after exit 3: running %v, terminated %+v", running, term)
	}
	if !slices.Contains(e.run.Deleted, inst.id) || e.run.Mounted(filepath.Join(inst.dir, "rootfs")) {
		t.Errorf("deleted %v, rootfs still mounted %v: want the instance deleted and unmounted", e.run.Deleted, e.run.Mounted(filepath.Join(inst.dir, "rootfs")))
	}
	if _, err := os.Stat(inst.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bundle %s left behind: %v", inst.dir, err)
	}

	// The next instance counts a restart and logs to 1.log.
	c2 := e.startOnce()
	if c2.inst == nil || c2.restartCount != 1 || c2.prevTerm == nil || c2.prevTerm.ExitCode != 3 {
		t.Fatalf("restart: instance %v, restarts %d, last state %+v", c2.inst != nil, c2.restartCount, c2.prevTerm)
	}
	if got := e.run.Started[1].LogPath; filepath.Base(got) != "1.log" {
		t.Errorf("second instance logs to %s, want 1.log", got)
	}
	if err := e.run.Kill(context.Background(), c2.inst.id, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c2.inst.done
}

func TestStartFailures(t *testing.T) {
	t.Run("the runner cannot start the process: StartError, bundle removed", func(t *testing.T) {
		e := newFakeStartEnv(t, planPod(nil))
		e.run.StartErr = errors.New(`runc run: exec: "/bin/app": stat /bin/app: no such file or directory`)
		c := e.startOnce()
		if c.inst != nil || c.term == nil || c.term.Reason != "StartError" || c.term.ExitCode != 128 ||
			c.waiting == nil || c.waiting.Reason != "RunContainerError" || !strings.Contains(c.waiting.Message, "/bin/app") {
			t.Fatalf("running %v, terminated %+v, waiting %+v", c.inst != nil, c.term, c.waiting)
		}
		if _, err := os.Stat(e.m.bundleDir(c.id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("bundle left behind: %v", err)
		}
	})
	t.Run("an unknown volume: CreateContainerError before anything runs", func(t *testing.T) {
		e := newFakeStartEnv(t, planPod(func(pod *v1.Pod) {
			pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "nope", MountPath: "/x"}}
		}))
		c := e.startOnce()
		if c.waiting == nil || c.waiting.Reason != "CreateContainerError" || !strings.Contains(c.waiting.Message, `cannot find volume "nope"`) {
			t.Fatalf("waiting %+v", c.waiting)
		}
		if len(e.run.Started) != 0 || c.id != "" {
			t.Errorf("started %d, id %q: want nothing started", len(e.run.Started), c.id)
		}
	})
	for _, tc := range []struct {
		name, profile, reason, message string
	}{
		{"a Localhost seccomp profile without a name: CreateContainerConfigError", "", "CreateContainerConfigError", "localhostProfile must be set"},
		{"a Localhost seccomp profile the node lacks: CreateContainerError", "missing.json", "CreateContainerError", "cannot load seccomp profile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeStartEnv(t, planPod(func(pod *v1.Pod) {
				pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{
					Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &tc.profile}}
			}))
			c := e.startOnce()
			if c.waiting == nil || c.waiting.Reason != tc.reason || !strings.Contains(c.waiting.Message, tc.message) {
				t.Fatalf("waiting %+v, want %s saying %q", c.waiting, tc.reason, tc.message)
			}
			if len(e.run.Started) != 0 || len(e.run.mounted) != 0 {
				t.Errorf("started %d, mounted %v: want nothing left", len(e.run.Started), e.run.mounted)
			}
			if entries, _ := os.ReadDir(filepath.Join(e.m.cfg.RootDir, "c")); len(entries) != 0 {
				t.Errorf("bundles left behind: %v", entries)
			}
		})
	}
	t.Run("an image the node does not have: ErrImagePull", func(t *testing.T) {
		e := newFakeStartEnv(t, planPod(func(pod *v1.Pod) { pod.Spec.Containers[0].Image = "example.test/other:1" }))
		c := e.startOnce()
		if c.waiting == nil || c.waiting.Reason != "ErrImagePull" {
			t.Fatalf("waiting %+v", c.waiting)
		}
	})
}

// TestPostStartHoldsContainerCreating: while a postStart hook runs the container
// reports waiting with ContainerCreating and does not count as running; once the hook
// is done it is Running.
func TestPostStartHoldsContainerCreating(t *testing.T) {
	pod := planPod(func(p *v1.Pod) {
		p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 1}}}
	})
	e := newFakeStartEnv(t, pod)
	c := e.startOnce()
	state := func() (string, bool) {
		e.ps.mu.Lock()
		defer e.ps.mu.Unlock()
		v, _ := c.view()
		switch {
		case v.State.Waiting != nil:
			return v.State.Waiting.Reason, c.running()
		case v.State.Running != nil:
			return "Running", c.running()
		}
		return "other", c.running()
	}
	if got, running := state(); got != "ContainerCreating" || running {
		t.Fatalf("during the hook: %s, running %v; want ContainerCreating, not running", got, running)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, running := state()
		if got == "Running" && running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the hook: %s, running %v; want Running", got, running)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
