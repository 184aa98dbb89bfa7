package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests of this file are issue 14's acceptance on the shared `tranche up`: pods
// are containers, with their image's root file system, confined and limited as on any
// Kubernetes node.

// confinedPods are busybox pods that sleep: plain has no securityContext; the others
// have one setting each. nonroot asks for a non-root user of an image whose user is
// root, so it never starts.
const confinedPods = `apiVersion: v1
kind: Pod
metadata: {name: plain}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: busybox:1.37, command: ["sleep", "3600"]}
---
apiVersion: v1
kind: Pod
metadata: {name: readonly}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox:1.37
    command: ["sleep", "3600"]
    securityContext: {readOnlyRootFilesystem: true}
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes: [{name: scratch, emptyDir: {}}]
---
apiVersion: v1
kind: Pod
metadata: {name: nonewprivs}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox:1.37
    command: ["sleep", "3600"]
    securityContext: {allowPrivilegeEscalation: false}
---
apiVersion: v1
kind: Pod
metadata: {name: user1000}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {runAsUser: 1000}
  containers:
  - {name: c, image: busybox:1.37, command: ["sleep", "3600"]}
---
apiVersion: v1
kind: Pod
metadata: {name: nonroot}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {runAsNonRoot: true}
  containers:
  - {name: c, image: busybox:1.37, command: ["sleep", "3600"]}
`

// defaultCapEff is containerd's default capability set (CHOWN, DAC_OVERRIDE, FSETID,
// FOWNER, MKNOD, NET_RAW, SETGID, SETUID, SETFCAP, SETPCAP, NET_BIND_SERVICE,
// SYS_CHROOT, KILL, AUDIT_WRITE) as /proc/<pid>/status prints it.
const defaultCapEff = "00000000a80425fb"

// busyboxUsers are the users of the busybox image's /etc/passwd.
var busyboxUsers = []string{"root", "daemon", "bin", "sys", "sync", "mail", "www-data", "operator", "nobody"}

// imageDirs are top-level directories an image's root file system may have; any other
// entry of the host's / is the host's own.
var imageDirs = []string{"bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "media", "mnt", "opt",
	"proc", "root", "run", "sbin", "srv", "sys", "tmp", "usr", "var"}

// TestContainerConfinement: a busybox pod without securityContext sees its image's /
// (none of the host's own files, no DATA, no etcd socket, no network namespace files),
// only its own processes, containerd's default capabilities, and can neither mount nor
// make or enter namespaces; readOnlyRootFilesystem, allowPrivilegeEscalation: false and
// runAsUser do what they say; runAsNonRoot with a root image is kubelet's
// CreateContainerConfigError.
func TestContainerConfinement(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, confinedPods)
	for _, p := range []string{"plain", "readonly", "nonewprivs", "user1000"} {
		c.waitReady(t, ns, p)
	}
	// run execs argv in pod and returns its stdout, stderr and exit code.
	run := func(t *testing.T, pod string, argv ...string) (string, string, int) {
		t.Helper()
		return kubectlEnv(t, s, nil, "", append([]string{"exec", pod, "-n", ns, "--"}, argv...)...)
	}
	// must execs argv in pod and fails the test unless it exits 0.
	must := func(t *testing.T, pod string, argv ...string) string {
		t.Helper()
		out, errOut, code := run(t, pod, argv...)
		if code != 0 {
			t.Fatalf("%s: %v exited %d: %s%s", pod, argv, code, out, errOut)
		}
		return out
	}

	t.Run("root file system is the image's", func(t *testing.T) {
		sock := filepath.Join(c.dataDir, "etcd", "etcd.sock")
		if st, err := os.Stat(sock); err != nil || st.Mode()&os.ModeSocket == 0 {
			t.Fatalf("the cluster's etcd socket is not at %s on the host (%v): fix the path this test checks", sock, err)
		}
		node := s.must(t, "get", "pod", "plain", "-n", ns, "-o", "jsonpath={.spec.nodeName}")
		hostPaths := []string{c.dataDir, sock, c.podDir(t, ns, "plain"), "/run/netns/" + c.prefix + node, "/var/run/netns/" + c.prefix + node}
		top, err := os.ReadDir("/")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range top {
			if !slices.Contains(imageDirs, e.Name()) {
				hostPaths = append(hostPaths, "/"+e.Name())
			}
		}
		for _, dir := range []string{"/root", "/home"} {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if !strings.HasPrefix(e.Name(), ".") {
					hostPaths = append(hostPaths, filepath.Join(dir, e.Name()))
				}
			}
		}
		script := `for p in "$@"; do if [ -e "$p" ] || [ -L "$p" ]; then echo "$p"; fi; done`
		if seen := must(t, "plain", append([]string{"sh", "-c", script, "sh"}, hostPaths...)...); seen != "" {
			t.Errorf("the container sees the host's %q (checked %q)", strings.Fields(seen), hostPaths)
		}
		if out, errOut, code := run(t, "plain", "stat", sock); code == 0 || !strings.Contains(errOut, "No such file or directory") {
			t.Errorf("stat %s in the container: exit %d, %s%s; want no such file", sock, code, out, errOut)
		}

		hostUsers := map[string]bool{}
		hostPasswd, err := os.ReadFile("/etc/passwd")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(hostPasswd)), "\n") {
			if name, _, _ := strings.Cut(line, ":"); !slices.Contains(busyboxUsers, name) {
				hostUsers[name] = true
			}
		}
		passwd := must(t, "plain", "cat", "/etc/passwd")
		if !regexp.MustCompile(`(?m)^root:[^:]*:0:0:`).MatchString(passwd) || passwd == string(hostPasswd) {
			t.Errorf("the container's /etc/passwd is not the image's:\n%s", passwd)
		}
		shadow, _, _ := run(t, "plain", "cat", "/etc/shadow")
		for _, file := range []struct{ name, text string }{{"passwd", passwd}, {"shadow", shadow}} {
			for _, line := range strings.Split(file.text, "\n") {
				if name, _, _ := strings.Cut(line, ":"); hostUsers[name] {
					t.Errorf("the container's /etc/%s has the host's user %s", file.name, name)
				}
			}
		}
	})

	t.Run("only its own processes", func(t *testing.T) {
		out := must(t, "plain", "ps", "-o", "pid,args")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var procs []string
		for _, l := range lines[1:] {
			procs = append(procs, strings.Join(strings.Fields(l), " "))
		}
		slices.Sort(procs)
		if len(procs) != 2 || procs[0] != "1 sleep 3600" || !regexp.MustCompile(`^\d+ ps -o pid,args$`).MatchString(procs[1]) {
			t.Errorf("ps in the container shows %q; want pid 1 the container's sleep and ps itself", procs)
		}
	})

	t.Run("containerd's default capabilities", func(t *testing.T) {
		out := must(t, "plain", "grep", "-E", "^Cap(Eff|Bnd):", "/proc/1/status", "/proc/self/status")
		want := fmt.Sprintf("/proc/1/status:CapEff:\t%[1]s\n/proc/1/status:CapBnd:\t%[1]s\n/proc/self/status:CapEff:\t%[1]s\n/proc/self/status:CapBnd:\t%[1]s\n", defaultCapEff)
		if out != want {
			t.Errorf("capabilities:\n%s\nwant:\n%s", out, want)
		}
	})

	t.Run("no mount, unshare or setns", func(t *testing.T) {
		for _, tc := range []struct {
			argv []string
			want string
		}{
			{[]string{"mount", "-t", "tmpfs", "t", "/tmp"}, "permission denied"},
			{[]string{"unshare", "-n", "true"}, "operation not permitted"},
			{[]string{"unshare", "-m", "true"}, "operation not permitted"},
			{[]string{"nsenter", "--net=/proc/1/ns/net", "true"}, "operation not permitted"},
		} {
			out, errOut, code := run(t, "plain", tc.argv...)
			if code == 0 || !strings.Contains(strings.ToLower(out+errOut), tc.want) {
				t.Errorf("%v: exit %d, %q; want a failure with %q", tc.argv, code, out+errOut, tc.want)
			}
		}
	})

	t.Run("readOnlyRootFilesystem", func(t *testing.T) {
		out, errOut, code := run(t, "readonly", "touch", "/x")
		if code == 0 || !strings.Contains(errOut, "Read-only file system") {
			t.Errorf("touch /x: exit %d, %s%s; want Read-only file system", code, out, errOut)
		}
		must(t, "readonly", "touch", "/scratch/x")
	})

	t.Run("allowPrivilegeEscalation false", func(t *testing.T) {
		for pod, want := range map[string]string{"nonewprivs": "1", "plain": "0"} {
			out := must(t, pod, "grep", "NoNewPrivs", "/proc/1/status", "/proc/self/status")
			if exp := fmt.Sprintf("/proc/1/status:NoNewPrivs:\t%[1]s\n/proc/self/status:NoNewPrivs:\t%[1]s\n", want); out != exp {
				t.Errorf("%s: %q, want %q", pod, out, exp)
			}
		}
	})

	t.Run("runAsUser", func(t *testing.T) {
		if out := must(t, "user1000", "id", "-u"); out != "1000\n" {
			t.Errorf("id -u: %q, want 1000", out)
		}
		if out := must(t, "user1000", "grep", "^Uid:", "/proc/1/status"); out != "Uid:\t1000\t1000\t1000\t1000\n" {
			t.Errorf("the container's process: %q, want uid 1000", out)
		}
	})

	t.Run("runAsNonRoot with a root image", func(t *testing.T) {
		c.waitRow(t, 30*time.Second, ns, "pod/nonroot", regexp.MustCompile(`^nonroot\s+0/1\s+CreateContainerConfigError\s+0\s`))
		msg := s.must(t, "get", "pod", "nonroot", "-n", ns, "-o", "jsonpath={.status.containerStatuses[0].state.waiting.message}")
		if !strings.Contains(msg, "container has runAsNonRoot and image will run as root") {
			t.Errorf("waiting message %q, want kubelet's", msg)
		}
	})
}

// limitedPods: hog allocates 100 MB under a 20 MiB limit; spin loops under a tenth of
// a CPU.
const limitedPods = `apiVersion: v1
kind: Pod
metadata: {name: hog}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: busybox:1.37
    command: ["sh", "-c", "a=$(head -c 100000000 /dev/zero | tr '\\0' x); sleep 1"]
    resources: {limits: {memory: 20Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: spin}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox:1.37
    command: ["sh", "-c", "while :; do :; done"]
    resources: {limits: {cpu: 100m}}
`

// TestContainerResources: a container past its memory limit ends OOMKilled with exit
// code 137; a busy loop under limits.cpu is throttled, as the cgroup's own counters
// read from inside the container show.
func TestContainerResources(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, limitedPods)

	t.Run("memory", func(t *testing.T) {
		eventually(t, 60*time.Second, "hog OOMKilled", func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "get", "pod", "hog", "-n", ns, "-o",
				"jsonpath={.status.phase} {.status.containerStatuses[0].state.terminated.reason} {.status.containerStatuses[0].state.terminated.exitCode}")
			return out == "Failed OOMKilled 137", out
		})
		if out := s.must(t, "get", "pod", "hog", "-n", ns, "--no-headers"); !regexp.MustCompile(`^hog\s+0/1\s+OOMKilled\s+0\s`).MatchString(out) {
			t.Errorf("kubectl get pod: %q, want STATUS OOMKilled", out)
		}
	})

	t.Run("cpu", func(t *testing.T) {
		c.waitReady(t, ns, "spin")
		t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "pod", "spin", "-n", ns, "--wait=false") })
		// cgroup v1 mounts the container's own cpu cgroup at /sys/fs/cgroup/cpu, v2 its
		// cgroup at /sys/fs/cgroup.
		read := func(v1, v2 string) string {
			out, errOut, code := kubectlEnv(t, s, nil, "", "exec", "spin", "-n", ns, "--", "sh", "-c",
				"cat /sys/fs/cgroup/cpu/"+v1+" 2>/dev/null || cat /sys/fs/cgroup/"+v2)
			if code != 0 {
				t.Fatalf("reading the container's cgroup: exit %d: %s%s", code, out, errOut)
			}
			return out
		}
		if quota := strings.TrimSpace(read("cpu.cfs_quota_us", "cpu.max")); quota != "10000" && quota != "10000 100000" {
			t.Errorf("the container's cpu quota: %q, want 10 ms per 100 ms", quota)
		}
		throttled := regexp.MustCompile(`(?m)^nr_throttled (\d+)$`)
		eventually(t, 20*time.Second, "the busy loop throttled", func() (bool, string) {
			out := read("cpu.stat", "cpu.stat")
			m := throttled.FindStringSubmatch(out)
			if m == nil {
				return false, out
			}
			n, _ := strconv.Atoi(m[1])
			return n > 0, out
		})
	})
}

// storeSet is the seeds' StatefulSet pattern: a headless Service and a StatefulSet
// whose volumeClaimTemplate is mounted at /data, a path the image does not have.
const storeSet = `apiVersion: v1
kind: Service
metadata: {name: store}
spec:
  clusterIP: None
  selector: {app: store}
  ports: [{port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: store}
spec:
  serviceName: store
  replicas: 1
  selector: {matchLabels: {app: store}}
  template:
    metadata: {labels: {app: store}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: busybox:1.37
        command: ["sleep", "3600"]
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: ["ReadWriteOnce"]
      resources: {requests: {storage: 1Gi}}
`

// TestContainerStatefulSetKeepsData: a file written at /data (the claim) is there in
// the store-0 that replaces the deleted one, and one written to the container's own
// layer is not.
func TestContainerStatefulSetKeepsData(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, storeSet)
	c.waitReady(t, ns, "store-0")
	s.must(t, "exec", "store-0", "-n", ns, "--", "sh", "-c", "echo kept-$(hostname) > /data/x; echo gone > /layer")
	uid := s.must(t, "get", "pod", "store-0", "-n", ns, "-o", "jsonpath={.metadata.uid}")
	s.must(t, "delete", "pod", "store-0", "-n", ns, "--timeout=30s")
	eventually(t, 60*time.Second, "a new store-0 Running and Ready", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "store-0", "-n", ns, "-o",
			`jsonpath={.metadata.uid} {.status.phase} {.status.conditions[?(@.type=="Ready")].status}`)
		return !strings.HasPrefix(out, uid) && strings.HasSuffix(out, " Running True"), out
	})
	out := s.must(t, "exec", "store-0", "-n", ns, "--", "sh", "-c", "cat /data/x; [ -e /layer ] || echo fresh")
	if out != "kept-store-0\nfresh\n" {
		t.Fatalf("the new store-0 reads %q, want the claim's file and a fresh layer", out)
	}
}

// signalements is an nginx Deployment and its Service, named as the seeds' diagnostic
// calls it.
const signalements = `apiVersion: apps/v1
kind: Deployment
metadata: {name: signalements}
spec:
  replicas: 1
  selector: {matchLabels: {app: signalements}}
  template:
    metadata: {labels: {app: signalements}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: nginx
        image: nginx:1.27
        ports: [{containerPort: 80}]
        readinessProbe:
          tcpSocket: {port: 80}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: signalements}
spec:
  selector: {app: signalements}
  ports: [{port: 80, targetPort: 80}]
`

// unpullable are pods whose image no node can have: one not in the catalog (no
// registry), one whose name does not parse.
const unpullable = `apiVersion: v1
kind: Pod
metadata: {name: nopull}
spec:
  containers:
  - {name: c, image: example.com/echo:1}
---
apiVersion: v1
kind: Pod
metadata: {name: badname}
spec:
  containers:
  - {name: c, image: "example.com/Shop/API:1"}
`

// TestContainerImages: the seeds' diagnostic, `kubectl run --rm -i --image=busybox --
// wget -qO- http://signalements/`, prints nginx's page; an image that is not there is
// ErrImagePull then ImagePullBackOff, with kubelet's event, and a name that does not
// parse is InvalidImageName.
func TestContainerImages(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, signalements+"---\n"+unpullable)

	t.Run("seed diagnostic", func(t *testing.T) {
		s.must(t, "rollout", "status", "deployment/signalements", "-n", ns, "--timeout=60s")
		attempt := 0
		eventually(t, 30*time.Second, "the welcome page through kubectl run", func() (bool, string) {
			attempt++
			out, errOut, _ := s.kubectl(t, "", "run", fmt.Sprintf("diag-%d", attempt), "-n", ns, "--rm", "-i", "--restart=Never",
				"--image=busybox", "--", "wget", "-qO-", "http://signalements/")
			if strings.Contains(out+errOut, "Segmentation fault") {
				t.Fatalf("busybox wget crashed:\n%s%s", out, errOut)
			}
			return strings.Contains(out, "<title>Welcome to nginx!</title>"), out + errOut
		})
	})

	t.Run("image not present", func(t *testing.T) {
		c.waitRow(t, 30*time.Second, ns, "pod/nopull", regexp.MustCompile(`^nopull\s+0/1\s+(ErrImagePull|ImagePullBackOff)\s+0\s`))
		eventually(t, 30*time.Second, "kubelet's Failed event", func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "get", "events", "-n", ns, "--field-selector", "involvedObject.name=nopull,reason=Failed", "-o", "jsonpath={.items[*].message}")
			return strings.Contains(out, `Failed to pull image "example.com/echo:1"`), out
		})
		c.waitRow(t, 30*time.Second, ns, "pod/nopull", regexp.MustCompile(`^nopull\s+0/1\s+ImagePullBackOff\s+0\s`))
	})

	t.Run("invalid image name", func(t *testing.T) {
		c.waitRow(t, 30*time.Second, ns, "pod/badname", regexp.MustCompile(`^badname\s+0/1\s+InvalidImageName\s+0\s`))
		msg := s.must(t, "get", "pod", "badname", "-n", ns, "-o", "jsonpath={.status.containerStatuses[0].state.waiting.message}")
		if want := `Failed to apply default image tag "example.com/Shop/API:1": couldn't parse image name "example.com/Shop/API:1"`; !strings.HasPrefix(msg, want) {
			t.Errorf("waiting message %q, want kubelet's %q...", msg, want)
		}
	})
}
