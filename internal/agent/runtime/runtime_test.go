package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/tranche/tranche/internal/agent/backoff"
	"github.com/tranche/tranche/internal/agent/images"
	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/agent/shim"
	"github.com/tranche/tranche/internal/agent/status"
	"github.com/tranche/tranche/internal/clusternet"
	"github.com/tranche/tranche/internal/imagebuild"
	"github.com/tranche/tranche/internal/imagestore"
	"github.com/tranche/tranche/internal/netns"
)

// env is one test cluster: a node namespace with its bridge, and a Manager for it.
type testEnv struct {
	t      *testing.T
	m      *Manager
	prefix string
	dir    string
	// marks is a host directory every test pod mounts at /marks (makePod), where
	// containers leave files the test checks.
	marks string
	// volumes are more volumes of some pods, by UID, beside marks.
	volumes map[types.UID]map[string]string
}

// newTestEnv builds a one-node cluster network with a unique prefix and a Manager;
// cleanup kills every pod and removes every namespace, also after a failure, and then
// checks that nothing is left.
func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("the runtime test needs root (network, mount and PID namespaces)")
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	prefix := "trt" + hex.EncodeToString(b) + "-"
	dir := t.TempDir()
	release, err := recordOwner(prefix, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release) // last: the cleanups below remove what it covers
	topo, err := clusternet.NewTopology(prefix, "n1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := clusternet.Teardown(prefix); err != nil {
			t.Errorf("teardown: %v", err)
		}
		if left, _ := netns.List(prefix); len(left) != 0 {
			t.Errorf("namespaces left behind: %v", left)
		}
	})
	if err := clusternet.Up(topo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		node := runc.NodeCgroup(topo.NodeNamespace("n1"))
		if err := runc.RemoveNode(node); err != nil {
			t.Errorf("removing the node's cgroup: %v", err)
		}
		if left, _ := runc.NodeCgroups(prefix); len(left) != 0 {
			t.Errorf("cgroups left behind: %v", left)
		}
	})
	self := filepath.Join(dir, "tranche")
	build := exec.Command("go", "build", "-o", self, "./testdata/selfexe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // the images carry it: static
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test self binary: %v\n%s", err, out)
	}
	store, err := imagestore.Open(filepath.Join(dir, "images"))
	if err != nil {
		t.Fatal(err)
	}
	shimDir := filepath.Join(dir, "shim")
	l, err := shim.Listen(shimDir)
	if err != nil {
		t.Fatal(err)
	}
	runcBin, err := runc.Find()
	if err != nil {
		t.Fatal(err)
	}
	rt := &runc.Runtime{Binary: runcBin, Root: filepath.Join(dir, "root", "runc")}
	sctx, stopShim := context.WithCancel(context.Background())
	t.Cleanup(stopShim)
	go func() { _ = (&shim.Server{Runc: rt}).Serve(sctx, l) }()
	m, err := New(Config{
		Shim:          shim.NewClient(shimDir),
		Runc:          rt,
		NodeName:      "n1",
		NodeNS:        topo.NodeNamespace("n1"),
		Topology:      topo,
		RootDir:       filepath.Join(dir, "root"),
		Images:        images.New(store, imagebuild.Source{SelfExe: self}, images.Offline()),
		ClusterDNS:    []string{"10.96.0.10"},
		ClusterDomain: "cluster.local",
		Backoff:       backoff.NewWithLimits(clock.RealClock{}, time.Second, 2*time.Second),
		PodPidsLimit:  512,
		Recorder:      record.NewFakeRecorder(10000),
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, m: m, prefix: prefix, dir: dir, marks: filepath.Join(dir, "marks"), volumes: map[types.UID]map[string]string{}}
	if err := os.MkdirAll(e.marks, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.killAll)
	return e
}

// killAll kills every pod still known and checks that no process or sandbox is left.
func (e *testEnv) killAll() {
	e.m.mu.Lock()
	var pods []*v1.Pod
	var pids []int
	for _, ps := range e.m.pods {
		ps.mu.Lock()
		pods = append(pods, ps.pod)
		for _, cs := range []map[string]*container{ps.containers, ps.inits} {
			for _, c := range cs {
				if c.inst != nil {
					pids = append(pids, c.inst.initPID)
				}
			}
		}
		ps.mu.Unlock()
	}
	e.m.mu.Unlock()
	for _, p := range pods {
		if err := e.m.KillPod(context.Background(), p, time.Second); err != nil {
			e.t.Errorf("killing %s: %v", p.Name, err)
		}
	}
	for _, pid := range pids {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
			e.t.Errorf("process %d is still running", pid)
		}
	}
	if err := e.m.Cleanup(context.Background(), nil); err != nil {
		e.t.Errorf("cleanup: %v", err)
	}
	if left, _ := netns.List(e.prefix + "p-"); len(left) != 0 {
		e.t.Errorf("pod namespaces left behind: %v", left)
	}
	if left, _ := os.ReadDir(filepath.Join(e.m.cfg.RootDir, "c")); len(left) != 0 {
		e.t.Errorf("container bundles left behind: %v", left)
	}
	if states, err := e.m.runc.List(context.Background()); err != nil || len(states) != 0 {
		e.t.Errorf("runc containers left behind: %v (%v)", states, err)
	}
}

// makePod returns a pod on node n1 with one busybox container that mounts the test's
// marks directory at /marks, changed by mutate.
func makePod(name string, mutate func(*v1.Pod)) *v1.Pod {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:])},
		Spec: v1.PodSpec{
			NodeName:                      "n1",
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []v1.Container{{Name: "c", Image: "busybox:1.36", Command: []string{"sh", "-c", "sleep 3600"},
				VolumeMounts: []v1.VolumeMount{{Name: "marks", MountPath: "/marks"}}}},
		},
	}
	if mutate != nil {
		mutate(pod)
	}
	return pod
}

// syncUntil syncs pod until cond holds on its view, waiting for change notifications
// (or 200 ms) between syncs.
func (e *testEnv) syncUntil(pod *v1.Pod, what string, timeout time.Duration, cond func(status.PodView) bool) status.PodView {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	vols := map[string]string{"marks": e.marks}
	for k, v := range e.volumes[pod.UID] {
		vols[k] = v
	}
	for {
		v, err := e.m.SyncPod(context.Background(), pod, vols)
		if err != nil {
			e.t.Fatalf("sync %s: %v", pod.Name, err)
		}
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("pod %s: timed out waiting for %s; view: %+v", pod.Name, what, v)
		}
		select {
		case <-e.m.Changes():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func running(name string) func(status.PodView) bool {
	return func(v status.PodView) bool { c, ok := v.Containers[name]; return ok && c.State.Running != nil }
}

func (e *testEnv) exec(pod *v1.Pod, container string, cmd ...string) (string, int) {
	e.t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code, err := e.m.Exec(ctx, pod.UID, container, cmd, nil, &out, &errb)
	if err != nil {
		e.t.Fatalf("exec %v in %s: %v", cmd, pod.Name, err)
	}
	return out.String() + errb.String(), code
}

func TestRuntime(t *testing.T) {
	e := newTestEnv(t)
	marks := e.marks

	// Pod a: logs, /etc files, hostname; its preStop hook and TERM trap are checked by KillPod.
	a := makePod("a", func(p *v1.Pod) {
		p.Spec.TerminationGracePeriodSeconds = new(int64(5))
		p.Spec.Containers[0].Command = []string{"sh", "-c", "trap 'echo term > /marks/term; exit 0' TERM; echo hi; sleep 3600 & wait"}
		p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo prestop > /marks/prestop"}}}}
		p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	})
	va := e.syncUntil(a, "running", 10*time.Second, running("c"))
	if len(va.PodIPs) != 1 || !strings.HasPrefix(va.PodIPs[0], "10.244.0.") {
		t.Fatalf("pod a IPs = %v, want one address in 10.244.0.0/24", va.PodIPs)
	}
	ipA := va.PodIPs[0]

	t.Run("logs", func(t *testing.T) {
		path, err := e.m.LogPath(a.UID, "c", false)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			data, _ := os.ReadFile(path)
			if strings.Contains(string(data), " stdout F hi\n") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("log %s = %q, want a CRI line with hi", path, data)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("events say what runs", func(t *testing.T) {
		got := map[string]bool{}
		events := e.m.cfg.Recorder.(*record.FakeRecorder).Events
		for len(got) < 3 {
			select {
			case ev := <-events:
				for _, want := range []string{
					`Normal Pulled Container image "busybox:1.36" already present on machine`,
					"Normal Created Created container: c",
					"Normal Started Started container c",
				} {
					if strings.HasPrefix(ev, want) {
						got[want] = true
					}
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("events seen: %v, want Pulled, Created and Started", got)
			}
		}
	})

	t.Run("etc files and hostname", func(t *testing.T) {
		for _, tc := range []struct {
			cmd  []string
			want string
		}{
			{[]string{"cat", "/etc/hostname"}, "a\n"},
			{[]string{"hostname"}, "a\n"},
			{[]string{"cat", "/etc/hosts"}, ipA + "\ta\n"},
			{[]string{"cat", "/etc/resolv.conf"}, "nameserver 10.96.0.10"},
			{[]string{"sh", "-c", "echo $POD"}, "a\n"},
			{[]string{"sh", "-c", "echo $$"}, "\n"}, // a fresh PID namespace: the exec is a low pid

		} {
			out, code := e.exec(a, "c", tc.cmd...)
			if code != 0 || !strings.Contains(out, tc.want) {
				t.Errorf("%v: exit %d, output %q, want it to contain %q", tc.cmd, code, out, tc.want)
			}
		}
	})

	t.Run("pod to pod over TCP and readiness", func(t *testing.T) {
		b := makePod("b", func(p *v1.Pod) {
			p.Spec.Containers[0] = v1.Container{Name: "web", Image: "registry.k8s.io/e2e-test-images/agnhost:2.52",
				Args: []string{"netexec", "--http-port=8080"},
				ReadinessProbe: &v1.Probe{PeriodSeconds: 1, FailureThreshold: 1,
					ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}}}
		})
		vb := e.syncUntil(b, "ready", 15*time.Second, func(v status.PodView) bool { return v.Containers["web"].Ready })
		out, code := e.exec(a, "c", "wget", "-q", "-O", "-", "http://"+vb.PodIPs[0]+":8080/hostname")
		if code != 0 || out != "b" {
			t.Errorf("wget from a to b: exit %d, output %q, want b", code, out)
		}

		c := makePod("srv", func(p *v1.Pod) {
			p.Spec.Containers[0].Command = []string{"sh", "-c", "httpd -f -p 8081 -h / & sleep 3600"}
			p.Spec.Containers[0].ReadinessProbe = &v1.Probe{PeriodSeconds: 1, FailureThreshold: 1,
				ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8081)}}}
		})
		e.syncUntil(c, "ready", 10*time.Second, func(v status.PodView) bool { return v.Containers["c"].Ready })
		if out, code := e.exec(c, "c", "killall", "httpd"); code != 0 {
			t.Fatalf("killall httpd: exit %d: %s", code, out)
		}
		e.syncUntil(c, "not ready", 10*time.Second, func(v status.PodView) bool {
			cv := v.Containers["c"]
			return cv.State.Running != nil && !cv.Ready
		})
	})

	t.Run("crash loop", func(t *testing.T) {
		p := makePod("crash", func(p *v1.Pod) { p.Spec.Containers[0].Command = []string{"sh", "-c", "echo fail; exit 3"} })
		sawBackOff := false
		v := e.syncUntil(p, "two restarts", 20*time.Second, func(v status.PodView) bool {
			cv := v.Containers["c"]
			sawBackOff = sawBackOff || (cv.State.Waiting != nil && cv.State.Waiting.Reason == "CrashLoopBackOff")
			return cv.RestartCount >= 2 && sawBackOff
		})
		if lt := v.Containers["c"].LastState.Terminated; lt == nil || lt.ExitCode != 3 {
			t.Errorf("last state = %+v, want exit code 3", v.Containers["c"].LastState)
		}
		if prev, err := e.m.LogPath(p.UID, "c", true); err != nil {
			t.Errorf("previous log: %v", err)
		} else if data, _ := os.ReadFile(prev); !strings.Contains(string(data), "stdout F fail") {
			t.Errorf("previous log %q lacks the output", data)
		}
	})

	t.Run("liveness failure restarts", func(t *testing.T) {
		p := makePod("live", func(p *v1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &v1.Probe{PeriodSeconds: 1, FailureThreshold: 1,
				ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-e", "/marks/alive"}}}}
		})
		e.syncUntil(p, "a restart", 15*time.Second, func(v status.PodView) bool { return v.Containers["c"].RestartCount >= 1 })
	})

	t.Run("unrunnable containers", func(t *testing.T) {
		p := makePod("broken", func(p *v1.Pod) {
			p.Spec.Containers[0].Command = []string{"/does/not/exist"}
			p.Spec.Containers = append(p.Spec.Containers,
				v1.Container{Name: "img", Image: "example.com/app:1"},
				v1.Container{Name: "bad", Image: "Not A Valid/Reference"})
		})
		e.syncUntil(p, "StartError, ErrImagePull and InvalidImageName", 10*time.Second, func(v status.PodView) bool {
			c, img, bad := v.Containers["c"], v.Containers["img"], v.Containers["bad"]
			return c.LastState.Terminated != nil && c.LastState.Terminated.Reason == "StartError" &&
				img.State.Waiting != nil && img.State.Waiting.Reason == "ErrImagePull" &&
				bad.State.Waiting != nil && bad.State.Waiting.Reason == "InvalidImageName"
		})
	})

	t.Run("host network", func(t *testing.T) {
		p := makePod("hostnet", func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Command = []string{"sh", "-c", "httpd -f -p 18080 -h / & sleep 3600"}
			p.Spec.Containers[0].ReadinessProbe = &v1.Probe{PeriodSeconds: 1, FailureThreshold: 1,
				ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(18080)}}}
		})
		v := e.syncUntil(p, "ready", 10*time.Second, func(v status.PodView) bool { return v.Containers["c"].Ready })
		node, _ := e.m.cfg.Topology.Node("n1")
		if len(v.PodIPs) != 1 || v.PodIPs[0] != node.Underlay.String() {
			t.Errorf("pod IPs = %v, want the node's address %s", v.PodIPs, node.Underlay)
		}
		if ns := e.m.pods[p.UID].netns; ns != e.m.cfg.NodeNS {
			t.Errorf("the pod runs in namespace %q, not the node's %q", ns, e.m.cfg.NodeNS)
		}
		if own, _ := sandboxName(e.prefix, p.UID); netns.Exists(own) {
			t.Errorf("a hostNetwork pod got a namespace of its own, %s", own)
		}
		for _, tc := range []struct {
			cmd  []string
			want string
		}{
			{[]string{"hostname"}, "n1\n"},
			{[]string{"head", "-1", "/etc/hosts"}, "# Kubernetes-managed hosts file (host network).\n"},
			{[]string{"sh", "-c", "echo $HOSTNAME"}, "n1\n"},
		} {
			if out, code := e.exec(p, "c", tc.cmd...); code != 0 || out != tc.want {
				t.Errorf("%v: exit %d, output %q, want %q", tc.cmd, code, out, tc.want)
			}
		}
		if err := e.m.KillPod(context.Background(), p, time.Second); err != nil {
			t.Fatal(err)
		}
		if !netns.Exists(e.m.cfg.NodeNS) {
			t.Fatalf("killing a hostNetwork pod removed the node's namespace")
		}
		// The other pods of the node still run.
		if out, code := e.exec(a, "c", "true"); code != 0 {
			t.Errorf("pod a after the hostNetwork pod went: exit %d %s", code, out)
		}
	})

	t.Run("an exec at once after start sees the container's mounts and working directory", func(t *testing.T) {
		vol := filepath.Join(e.dir, "early-vol")
		if err := os.MkdirAll(vol, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(vol, "inside"), []byte("yes"), 0o644); err != nil {
			t.Fatal(err)
		}
		p := makePod("early", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: "/mnt"}}
		})
		// Exec as soon as the first sync returns, as a preStop hook of a pod deleted
		// at once would: the container's mounts must already be there.
		e.volumes[p.UID] = map[string]string{"v": vol}
		if _, err := e.m.SyncPod(context.Background(), p, map[string]string{"v": vol, "marks": e.marks}); err != nil {
			t.Fatal(err)
		}
		e.syncUntil(p, "running", 10*time.Second, running("c"))
		if out, code := e.exec(p, "c", "sh", "-c", "cat /mnt/inside; echo; pwd"); code != 0 || out != "yes\n/\n" {
			t.Fatalf("exec right after start: exit %d, output %q; want the volume's file and /", code, out)
		}
		if err := e.m.KillPod(context.Background(), p, time.Second); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a deleted pod keeps serving for the endpoint drain before SIGTERM", func(t *testing.T) {
		p := makePod("drain", func(p *v1.Pod) {
			p.Spec.Containers[0].Command = []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}
		})
		e.syncUntil(p, "running", 10*time.Second, running("c"))
		start := time.Now()
		if err := e.m.KillPod(context.Background(), p, 4*time.Second); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < endpointDrain || took > 3*time.Second {
			t.Fatalf("KillPod took %s: want SIGTERM after the %s drain, and the exit it causes soon after", took, endpointDrain)
		}
	})

	t.Run("shareProcessNamespace: one PID namespace with the sandbox's pause as PID 1", func(t *testing.T) {
		p := makePod("shared", func(p *v1.Pod) {
			p.Spec.ShareProcessNamespace = new(true)
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d", Image: "busybox:1.36", Command: []string{"sleep", "3601"}})
		})
		e.syncUntil(p, "both running", 15*time.Second, func(v status.PodView) bool { return running("c")(v) && running("d")(v) })
		if out, code := e.exec(p, "c", "cat", "/proc/1/cmdline"); code != 0 || !strings.HasPrefix(out, "/pause") {
			t.Errorf("PID 1 seen from c: exit %d, %q, want the sandbox's /pause", code, out)
		}
		if out, code := e.exec(p, "c", "ps", "-o", "args"); code != 0 || !strings.Contains(out, "sleep 3601") {
			t.Errorf("ps in c: exit %d, %q, want d's sleep 3601", code, out)
		}
		e.m.mu.Lock()
		ps := e.m.pods[p.UID]
		e.m.mu.Unlock()
		ps.mu.Lock()
		sb := *ps.pidSandbox
		ps.mu.Unlock()
		if err := e.m.KillPod(context.Background(), p, time.Second); err != nil {
			t.Fatal(err)
		}
		states, err := e.m.runc.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range states {
			if st.ID == sb.id {
				t.Errorf("the sandbox container %s is left, %s", st.ID, st.Status)
			}
		}
		if _, err := os.Stat(sb.dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the sandbox's bundle %s is left (%v)", sb.dir, err)
		}
	})

	t.Run("an ephemeral container runs once in its target's PID namespace", func(t *testing.T) {
		p := makePod("debugged", func(p *v1.Pod) { p.Spec.Containers[0].Command = []string{"sleep", "3601"} })
		e.syncUntil(p, "running", 10*time.Second, running("c"))
		p = p.DeepCopy()
		p.Spec.EphemeralContainers = []v1.EphemeralContainer{{TargetContainerName: "c", EphemeralContainerCommon: v1.EphemeralContainerCommon{
			Name: "debugger", Image: "busybox:1.36", Command: []string{"sh", "-c", "ps -o args > /marks/debugger-ps; exit 7"},
			VolumeMounts: []v1.VolumeMount{{Name: "marks", MountPath: "/marks"}}}}}
		v := e.syncUntil(p, "the ephemeral container ended", 15*time.Second, func(v status.PodView) bool {
			ec, ok := v.EphemeralContainers["debugger"]
			return ok && ec.State.Terminated != nil
		})
		if ec := v.EphemeralContainers["debugger"]; ec.State.Terminated.ExitCode != 7 || ec.RestartCount != 0 {
			t.Errorf("ephemeral container: %+v, want exit 7 and no restart", ec)
		}
		if data, err := os.ReadFile(filepath.Join(e.marks, "debugger-ps")); err != nil || !strings.Contains(string(data), "sleep 3601") {
			t.Errorf("ps in the ephemeral container: %q (%v), want the target's sleep 3601", data, err)
		}
		// Synced again, it is not restarted (restartPolicy Always is the pod's).
		v, err := e.m.SyncPod(context.Background(), p, map[string]string{"marks": e.marks})
		if err != nil {
			t.Fatal(err)
		}
		if ec := v.EphemeralContainers["debugger"]; ec.State.Terminated == nil || ec.RestartCount != 0 {
			t.Errorf("after another sync: %+v, want it still ended", ec)
		}
		if err := e.m.KillPod(context.Background(), p, time.Second); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("pod cgroup pids limit, hostPID and hostIPC", func(t *testing.T) {
		p := makePod("hostpid", func(p *v1.Pod) { p.Spec.HostPID, p.Spec.HostIPC = true, true })
		e.syncUntil(p, "running", 10*time.Second, running("c"))
		hostInit, err := os.ReadFile("/proc/1/comm")
		if err != nil {
			t.Fatal(err)
		}
		if out, code := e.exec(p, "c", "cat", "/proc/1/comm"); code != 0 || out != string(hostInit) {
			t.Errorf("hostPID: PID 1 is %q (exit %d), want the node's %q", out, code, hostInit)
		}
		hostIPC, err := os.Readlink("/proc/self/ns/ipc")
		if err != nil {
			t.Fatal(err)
		}
		if out, code := e.exec(p, "c", "readlink", "/proc/self/ns/ipc"); code != 0 || strings.TrimSpace(out) != hostIPC {
			t.Errorf("hostIPC: IPC namespace %q (exit %d), want the node's %q", out, code, hostIPC)
		}
		pidsMax := filepath.Join("/sys/fs/cgroup/pids", e.m.podCgroup(p.UID), "pids.max")
		if runc.Cgroup2() {
			pidsMax = filepath.Join("/sys/fs/cgroup", e.m.podCgroup(p.UID), "pids.max")
		}
		if data, err := os.ReadFile(pidsMax); err != nil || strings.TrimSpace(string(data)) != "512" {
			t.Errorf("%s: %q (%v), want the node's pod pids limit 512", pidsMax, data, err)
		}
		if err := e.m.KillPod(context.Background(), p, time.Second); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a new agent adopts the running containers the shim kept", func(t *testing.T) {
		p := makePod("adopted", func(p *v1.Pod) {
			p.Spec.ShareProcessNamespace = new(true)
			p.Spec.Containers[0].Command = []string{"sh", "-c", "echo before; sleep 3600"}
		})
		v1st := e.syncUntil(p, "running", 15*time.Second, running("c"))
		before := v1st.Containers["c"]
		// The earlier agent stops knowing the pod without touching its containers,
		// as a killed agent would; a new Manager on the same directories follows.
		e.m.mu.Lock()
		old := e.m.pods[p.UID]
		delete(e.m.pods, p.UID)
		e.m.mu.Unlock()
		old.mu.Lock()
		initPID := old.containers["c"].inst.initPID
		old.cancel()
		old.mu.Unlock()
		m2, err := New(e.m.cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Cleanup keeps what the API still binds to the node: every pod of the test.
		keep := map[types.UID]bool{p.UID: true}
		e.m.mu.Lock()
		for uid := range e.m.pods {
			keep[uid] = true
		}
		e.m.mu.Unlock()
		if err := m2.Cleanup(context.Background(), keep); err != nil {
			t.Fatal(err)
		}
		v, err := m2.SyncPod(context.Background(), p, map[string]string{"marks": e.marks})
		if err != nil {
			t.Fatal(err)
		}
		after := v.Containers["c"]
		if after.State.Running == nil || after.ID != before.ID || after.RestartCount != before.RestartCount {
			t.Fatalf("after adoption: %+v, want the same running instance %s (restarts %d)", after, before.ID, before.RestartCount)
		}
		if !after.State.Running.StartedAt.Equal(&before.State.Running.StartedAt) {
			t.Errorf("started at %v, want %v", after.State.Running.StartedAt, before.State.Running.StartedAt)
		}
		m2.mu.Lock()
		ps := m2.pods[p.UID]
		m2.mu.Unlock()
		ps.mu.Lock()
		gotPID := ps.containers["c"].inst.initPID
		ps.mu.Unlock()
		if gotPID != initPID {
			t.Errorf("adopted init pid %d, want %d", gotPID, initPID)
		}
		var out bytes.Buffer
		code, err := m2.Exec(context.Background(), p.UID, "c", []string{"cat", "/proc/1/cmdline"}, nil, &out, &out)
		if err != nil || code != 0 || !strings.HasPrefix(out.String(), "/pause") {
			t.Errorf("exec through the new agent: %d %q (%v), want the adopted sandbox's /pause as PID 1", code, out.String(), err)
		}
		path, err := m2.LogPath(p.UID, "c", false)
		if err != nil {
			t.Fatal(err)
		}
		if data, _ := os.ReadFile(path); !strings.Contains(string(data), "stdout F before") {
			t.Errorf("log %s: %q, want the line written before the restart", path, data)
		}
		if err := m2.KillPod(context.Background(), p, time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(initPID))); err == nil {
			t.Errorf("process %d still runs after the new agent killed the pod", initPID)
		}
	})

	t.Run("a new agent removes the containers of a pod deleted while it was away", func(t *testing.T) {
		p := makePod("orphan", nil)
		e.syncUntil(p, "running", 10*time.Second, running("c"))
		e.m.mu.Lock()
		old := e.m.pods[p.UID]
		delete(e.m.pods, p.UID)
		keep := map[types.UID]bool{}
		for uid := range e.m.pods {
			keep[uid] = true
		}
		e.m.mu.Unlock()
		old.mu.Lock()
		inst := old.containers["c"].inst
		old.cancel()
		old.mu.Unlock()
		m2, err := New(e.m.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := m2.Cleanup(context.Background(), keep); err != nil {
			t.Fatal(err)
		}
		if _, err := m2.runc.State(context.Background(), inst.id); !errors.Is(err, runc.ErrNotExist) {
			t.Errorf("runc state of the orphan's container: %v, want it deleted", err)
		}
		select {
		case <-inst.done:
		case <-time.After(10 * time.Second):
			t.Fatal("the orphan's container did not end")
		}
		if _, err := os.Stat(inst.dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the orphan's bundle %s is left (%v)", inst.dir, err)
		}
		if netns.Exists(old.netns) {
			t.Errorf("the orphan's network namespace %s is left", old.netns)
		}
	})

	t.Run("kill runs preStop then SIGTERM and removes everything", func(t *testing.T) {
		ns := e.m.pods[a.UID].netns
		if err := e.m.KillPod(context.Background(), a, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"prestop", "term"} {
			if _, err := os.Stat(filepath.Join(marks, f)); err != nil {
				t.Errorf("%s mark missing: %v", f, err)
			}
		}
		if netns.Exists(ns) {
			t.Errorf("namespace %s still exists", ns)
		}
		if _, err := os.Stat(filepath.Join(e.m.podDir(a.UID), "etc")); err == nil {
			t.Errorf("pod a's etc directory still exists")
		}
		if _, err := e.m.LogPath(a.UID, "c", false); err != nil {
			t.Errorf("logs of a killed pod are gone: %v", err)
		}
	})
}
