package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// localCluster is one `tranche up --detach` with its own data dir, listen address and
// network namespace prefix, so it can run beside a developer's cluster and the other
// test clusters. up gives the shared one; upOwn one that belongs to a single test.
type localCluster struct {
	dataDir, prefix, listen string
	srv                     *server // kubectl helpers bound to the cluster's kubeconfig
}

var (
	clusterOnce sync.Once
	theCluster  *localCluster
	clusterErr  error

	// liveClusters are the clusters started and not yet taken down (the shared one,
	// upOwn's, one starting when a signal came), for TestMain and its signal handler.
	ownMu        sync.Mutex
	liveClusters = map[*localCluster]bool{}
	// stopping is set once stopLocalCluster began: no cluster starts after it. starts
	// counts the `tranche up` commands running, which it waits for.
	stopping bool
	starts   sync.WaitGroup
)

// startLocalCluster runs `tranche up --nodes N [--zones Z] --detach` on a fresh data dir
// with the netns prefix <tag><pid%1000>-. It returns the cluster also when up failed, so
// that the caller can take down whatever was started.
func startLocalCluster(tag string, nodes int, zones string, extra ...string) (*localCluster, error) {
	ownMu.Lock()
	if stopping {
		ownMu.Unlock()
		return nil, errors.New("the e2e tests are stopping: no new cluster")
	}
	starts.Add(1)
	ownMu.Unlock()
	defer starts.Done()
	dir, err := os.MkdirTemp("", "trup-")
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	c := &localCluster{dataDir: dir, prefix: fmt.Sprintf("%s%d-", tag, runID), listen: addr}
	ownMu.Lock()
	liveClusters[c] = true
	ownMu.Unlock()
	upstream, err := fakeUpstreamDNS() // never the host's resolvers (dns_test.go)
	if err != nil {
		return c, err
	}
	// HPAs sync every 5 s instead of 15 s so that autoscaling tests take less time.
	args := []string{"up", "--nodes", strconv.Itoa(nodes), "--detach", "--data-dir", dir, "--listen", addr,
		"--netns-prefix", c.prefix, "--upstream-dns", upstream, "--horizontal-pod-autoscaler-sync-period", "5s"}
	if zones != "" {
		args = append(args, "--zones", zones)
	}
	args = append(args, extra...)
	out, err := exec.Command(trancheBin, args...).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "tranche.log"))
		return c, fmt.Errorf("tranche up: %v\n%s\n%s", err, out, tail(string(log), 4000))
	}
	if !strings.Contains(string(out), "export KUBECONFIG="+filepath.Join(dir, "kubeconfig")) {
		return c, fmt.Errorf("tranche up did not print the export line:\n%s", out)
	}
	c.srv = &server{dataDir: dir, listen: addr, kubeconfig: filepath.Join(dir, "kubeconfig")}
	return c, nil
}

// down runs `tranche down --purge` on c and returns what it printed.
func (c *localCluster) down() string {
	out, _ := exec.Command(trancheBin, "down", "--data-dir", c.dataDir, "--purge").CombinedOutput()
	return string(out)
}

// up is the shared `tranche up --nodes 3 --zones a,b` of this file, started on first use;
// TestMain stops it.
func up(t *testing.T) *localCluster {
	t.Helper()
	clusterOnce.Do(func() { theCluster, clusterErr = startLocalCluster("te", 3, "a,b") })
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	return theCluster
}

// upOwn starts a cluster of nodes nodes for t alone (netns prefix <tag><pid>-), with
// extra flags of `tranche up` if any, and takes it down when t ends, also on failure, after logging the end of its log if t failed.
func upOwn(t testing.TB, tag string, nodes int, extra ...string) *localCluster {
	t.Helper()
	c, err := startLocalCluster(tag, nodes, "", extra...)
	if c != nil {
		t.Cleanup(func() {
			if t.Failed() {
				log, _ := os.ReadFile(filepath.Join(c.dataDir, "tranche.log"))
				t.Logf("tranche.log of %s (end):\n%s", c.dataDir, tail(string(log), 6000))
			}
			if out := c.down(); t.Failed() {
				t.Logf("tranche down:\n%s", out)
			}
			ownMu.Lock()
			delete(liveClusters, c)
			ownMu.Unlock()
			if left := netnsWithPrefix(c.prefix); len(left) > 0 {
				t.Errorf("tranche down left network namespaces: %v", left)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// stopLocalCluster takes down the shared cluster and any other still running (TestMain,
// its signal handler, and the leftovers test) and returns what down printed.
func stopLocalCluster() string {
	var out strings.Builder
	// Tests go on while the signal handler runs: a cluster starting now is waited for
	// (a signal to the test binary's process group stops its `tranche up --detach`
	// with the cluster, one begun after it finishes starting), and none starts after.
	ownMu.Lock()
	stopping = true
	ownMu.Unlock()
	starts.Wait()
	ownMu.Lock()
	for c := range liveClusters {
		out.WriteString(c.down())
		delete(liveClusters, c)
	}
	ownMu.Unlock()
	return out.String()
}

// netnsWithPrefix lists network namespaces starting with prefix.
func netnsWithPrefix(prefix string) []string {
	out, _ := exec.Command("ip", "netns", "list").Output()
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			names = append(names, f[0])
		}
	}
	return names
}

// podNS is the network namespace of a pod (the agent names it <prefix>p-<uid[:12]>).
func (c *localCluster) podNS(t testing.TB, ns, pod string) string {
	uid := c.srv.must(t, "get", "pod", pod, "-n", ns, "-o", "jsonpath={.metadata.uid}")
	return c.prefix + "p-" + strings.ReplaceAll(uid, "-", "")[:12]
}

// podDir is the pod's directory on its node (volumes, /etc files, logs).
func (c *localCluster) podDir(t *testing.T, ns, pod string) string {
	out := c.srv.must(t, "get", "pod", pod, "-n", ns, "-o", "jsonpath={.spec.nodeName} {.metadata.uid}")
	node, uid, _ := strings.Cut(out, " ")
	return filepath.Join(c.dataDir, "nodes", node, "pods", uid)
}

// podLog reads the current log of a container from its node's files (kubectl logs
// comes with the streaming issue).
func (c *localCluster) podLog(t *testing.T, ns, pod, container string) string {
	matches, _ := filepath.Glob(filepath.Join(c.podDir(t, ns, pod), "containers", container, "logs", "*.log"))
	var b strings.Builder
	for _, m := range matches {
		data, _ := os.ReadFile(m)
		b.Write(data)
	}
	return b.String()
}

func (c *localCluster) waitReady(t testing.TB, ns, pod string) {
	t.Helper()
	eventually(t, 60*time.Second, "pod "+pod+" Running and Ready", func() (bool, string) {
		out, _, _ := c.srv.kubectl(t, "", "get", "pod", pod, "-n", ns, "-o", `jsonpath={.status.phase} {.status.conditions[?(@.type=="Ready")].status}`)
		return out == "Running True", out
	})
}

const apiLikePod = `apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {app: api}
spec:
  containers:
  - name: api
    image: registry.k8s.io/e2e-test-images/agnhost:2.52
    args: ["netexec", "--http-port=8080"]
    ports:
    - containerPort: 8080
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
`

// TestPodsAcrossNodes: three pods shaped like the seed's api template land on the
// three nodes, Running and Ready with addresses from their nodes' subnets, and reach
// each other across nodes.
func TestPodsAcrossNodes(t *testing.T) {
	c := up(t)
	s := c.srv
	out := s.must(t, "get", "nodes", "-L", "topology.kubernetes.io/zone")
	if n := len(regexp.MustCompile(`(?m)^tranche-\d\s+Ready\s+`).FindAllString(out, -1)); n != 3 {
		t.Fatalf("want 3 Ready nodes:\n%s", out)
	}
	ns := s.namespace(t)
	for i := 0; i < 3; i++ {
		if _, errOut, err := s.kubectl(t, fmt.Sprintf(apiLikePod, fmt.Sprintf("api-%d", i)), "apply", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("apply: %v %s", err, errOut)
		}
	}
	ips := map[string]string{}
	nodes := map[string]bool{}
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("api-%d", i)
		c.waitReady(t, ns, name)
		out := s.must(t, "get", "pod", name, "-n", ns, "-o", "jsonpath={.status.podIP} {.spec.nodeName}")
		ip, node, _ := strings.Cut(out, " ")
		ips[name], nodes[node] = ip, true
	}
	if len(nodes) != 3 {
		t.Fatalf("pods not spread over the 3 nodes: %v", nodes)
	}
	subnets := map[string]bool{}
	for _, ip := range ips {
		if !strings.HasPrefix(ip, "10.244.") {
			t.Fatalf("pod IP %s outside the cluster CIDR", ip)
		}
		subnets[strings.Join(strings.Split(ip, ".")[:3], ".")] = true
	}
	if len(subnets) != 3 {
		t.Fatalf("pod IPs not from three node subnets: %v", ips)
	}
	out = s.must(t, "get", "pods", "-n", ns, "-o", "wide")
	if !regexp.MustCompile(`(?m)^api-0\s+1/1\s+Running\s+0\s+\S+\s+10\.244\.\d+\.\d+\s+tranche-\d`).MatchString(out) {
		t.Fatalf("kubectl get pods -o wide:\n%s", out)
	}
	from := c.podNS(t, ns, "api-0")
	for _, target := range []string{"api-1", "api-2"} {
		// (Debian's busybox wget crashes with -T; the context bounds the request.)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, err := exec.CommandContext(ctx, "ip", "netns", "exec", from, "busybox", "wget", "-qO-", "http://"+ips[target]+":8080/hostname").CombinedOutput()
		cancel()
		if err != nil || strings.TrimSpace(string(got)) != target {
			t.Fatalf("api-0 -> %s (%s): %v %q", target, ips[target], err, got)
		}
	}
}

const probePod = `apiVersion: v1
kind: Pod
metadata:
  name: probed
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: web
    image: busybox
    command: ["sh", "-c", "echo up > /tmp/ready; echo up > /tmp/alive; exec busybox httpd -f -p 8080 -h /tmp"]
    volumeMounts:
    - {name: www, mountPath: /tmp}
    readinessProbe:
      httpGet: {path: /ready, port: 8080}
      periodSeconds: 1
      failureThreshold: 1
    livenessProbe:
      httpGet: {path: /alive, port: 8080}
      periodSeconds: 1
      failureThreshold: 2
  volumes:
  - name: www
    emptyDir: {}
`

// TestProbesReallyProbe: removing the file the readiness probe fetches flips Ready to
// False and back; removing the liveness file restarts the container.
func TestProbesReallyProbe(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	if _, errOut, err := s.kubectl(t, probePod, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitReady(t, ns, "probed")
	www := filepath.Join(c.podDir(t, ns, "probed"), "volumes", "kubernetes.io~empty-dir", "www")
	if err := os.Remove(filepath.Join(www, "ready")); err != nil {
		t.Fatal(err)
	}
	ready := func() string {
		out, _, _ := s.kubectl(t, "", "get", "pod", "probed", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out
	}
	eventually(t, 20*time.Second, "Ready=False after the readiness file went", func() (bool, string) { r := ready(); return r == "False", r })
	if err := os.WriteFile(filepath.Join(www, "ready"), []byte("up\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "Ready=True again", func() (bool, string) { r := ready(); return r == "True", r })
	if err := os.Remove(filepath.Join(www, "alive")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a liveness failure restarts the container", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "probed", "-n", ns, "-o", "jsonpath={.status.containerStatuses[0].restartCount}")
		n, _ := strconv.Atoi(out)
		return n >= 1, out
	})
	out := s.must(t, "get", "pod", "probed", "-n", ns)
	if !regexp.MustCompile(`(?m)^probed\s+\d/1\s+\S+\s+[1-9]`).MatchString(out) {
		t.Fatalf("RESTARTS not counted:\n%s", out)
	}
}

const filesPod = `apiVersion: v1
kind: Pod
metadata:
  name: files
spec:
  hostname: web-0
  subdomain: web
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "hostname; cat /etc/hosts /etc/resolv.conf; echo KSH=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT WEB=$WEB_SERVICE_HOST:$WEB_SERVICE_PORT_HTTP; sleep 3600"]
`

// webService exists before the files pod, whose environment then names it as kubelet's does.
const webService = `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ports: [{name: http, port: 80}]
`

// TestPodFiles: hostname, /etc/hosts and /etc/resolv.conf as kubelet writes them, and
// the Service variables of its environment.
func TestPodFiles(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	if _, errOut, err := s.kubectl(t, webService, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	webIP := s.must(t, "get", "service", "web", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
	if _, errOut, err := s.kubectl(t, filesPod, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitReady(t, ns, "files")
	ip := s.must(t, "get", "pod", "files", "-n", ns, "-o", "jsonpath={.status.podIP}")
	var log string
	eventually(t, 20*time.Second, "the pod's output", func() (bool, string) {
		log = c.podLog(t, ns, "files", "c")
		return strings.Contains(log, "ndots"), log
	})
	for _, want := range []string{
		"stdout F web-0",
		"stdout F # Kubernetes-managed hosts file.",
		"stdout F " + ip + "\tweb-0.web." + ns + ".svc.cluster.local\tweb-0",
		"stdout F search " + ns + ".svc.cluster.local svc.cluster.local cluster.local",
		"stdout F nameserver 10.96.0.10",
		"stdout F options ndots:5",
		"stdout F KSH=10.96.0.1:443 WEB=" + webIP + ":80",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("pod output lacks %q:\n%s", want, log)
		}
	}
}

const pvcPods = `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "%s; sleep 3600"]
    volumeMounts:
    - {name: data, mountPath: /mnt}
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: data}
`

// TestPVCOutlivesPod: what one pod writes to a PVC, its replacement reads.
func TestPVCOutlivesPod(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	if _, errOut, err := s.kubectl(t, fmt.Sprintf(pvcPods, "writer", "echo kept-$(hostname) > /mnt/row"), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitReady(t, ns, "writer")
	out := s.must(t, "get", "pvc", "data", "-n", ns)
	if !regexp.MustCompile(`(?m)^data\s+Bound\s+pvc-\S+\s+1Gi\s+RWO\s+local\s`).MatchString(out) {
		t.Fatalf("pvc table:\n%s", out)
	}
	s.must(t, "delete", "pod", "writer", "-n", ns)
	reader := strings.Replace(fmt.Sprintf(pvcPods, "reader", "cat /mnt/row"), "---", "---\n# the claim exists already", 1)
	if _, errOut, err := s.kubectl(t, reader, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitReady(t, ns, "reader")
	eventually(t, 20*time.Second, "the replacement reads the row", func() (bool, string) {
		log := c.podLog(t, ns, "reader", "c")
		return strings.Contains(log, "stdout F kept-writer"), log
	})
}

const gracefulPod = `apiVersion: v1
kind: Pod
metadata:
  name: graceful
spec:
  terminationGracePeriodSeconds: 20
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "trap 'echo term >> /tmp/seen; exit 0' TERM; while true; do sleep 0.2; done"]
    lifecycle:
      preStop:
        exec: {command: ["sh", "-c", "echo prestop >> /tmp/seen"]}
    volumeMounts:
    - {name: w, mountPath: /tmp}
  volumes:
  - name: w
    hostPath: {path: %s, type: Directory}
`

// TestGracefulDeletion: deleting a pod runs preStop, then SIGTERM, and the object goes
// once the process has exited.
func TestGracefulDeletion(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	dir := t.TempDir()
	if _, errOut, err := s.kubectl(t, fmt.Sprintf(gracefulPod, dir), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitReady(t, ns, "graceful")
	seen := filepath.Join(dir, "seen")
	start := time.Now()
	s.must(t, "delete", "pod", "graceful", "-n", ns, "--wait=true", "--timeout=30s")
	if time.Since(start) > 15*time.Second {
		t.Fatalf("deletion waited the whole grace period (%s): SIGTERM was not delivered or not noticed", time.Since(start))
	}
	data, err := os.ReadFile(seen)
	if err != nil || string(data) != "prestop\nterm\n" {
		t.Fatalf("want preStop then SIGTERM, got %q (%v)", data, err)
	}
	if _, errOut, err := s.kubectl(t, "", "get", "pod", "graceful", "-n", ns); err == nil || !strings.Contains(errOut, "NotFound") {
		t.Fatalf("pod still there: %s", errOut)
	}
}

// TestNodeLifecycle: a node whose agent stops turns NotReady (Unknown) and its pods
// Ready=False; `tranche node add` brings a new node Ready.
func TestNodeLifecycle(t *testing.T) {
	c := up(t)
	s := c.srv
	out, err := exec.Command(trancheBin, "node", "add", "extra", "--zone", "b", "--data-dir", c.dataDir).CombinedOutput()
	if err != nil {
		t.Fatalf("node add: %v\n%s", err, out)
	}
	eventually(t, 30*time.Second, "node extra Ready", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "node", "extra", "--no-headers")
		return regexp.MustCompile(`^extra\s+Ready\s`).MatchString(out), out
	})
	ns := s.namespace(t)
	pod := strings.Replace(fmt.Sprintf(apiLikePod, "onextra"), "spec:\n", "spec:\n  nodeName: extra\n", 1)
	if _, errOut, err := s.kubectl(t, pod, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitReady(t, ns, "onextra")
	// Stop the agent as a crash would: its heartbeats stop.
	pidData, err := os.ReadFile(filepath.Join(c.dataDir, "nodes", "extra", "agent.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.Fields(string(pidData))[0])
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }()
	eventually(t, 90*time.Second, "node extra NotReady", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "node", "extra", "--no-headers")
		return regexp.MustCompile(`^extra\s+NotReady\s`).MatchString(out), out
	})
	eventually(t, 30*time.Second, "its pod Ready=False", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "onextra", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "False", out
	})
	_ = syscall.Kill(pid, syscall.SIGCONT)
	out, err = exec.Command(trancheBin, "node", "remove", "extra", "--data-dir", c.dataDir).CombinedOutput()
	if err != nil {
		t.Fatalf("node remove: %v\n%s", err, out)
	}
}

// TestZZDownAndUpAgain runs last in this file: `tranche down` leaves no namespace or
// process of the cluster behind, and `tranche up` on the same data dir brings the same
// nodes and objects back.
func TestZZDownAndUpAgain(t *testing.T) {
	c := up(t)
	s := c.srv
	s.must(t, "create", "configmap", "survivor", "-n", "default", "--from-literal=k=v")
	ip := s.must(t, "get", "svc", "kubernetes", "-o", "jsonpath={.spec.clusterIP}")
	out, err := exec.Command(trancheBin, "down", "--data-dir", c.dataDir).CombinedOutput()
	if err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if left := netnsWithPrefix(c.prefix); len(left) > 0 {
		t.Fatalf("down left network namespaces: %v", left)
	}
	procs, _ := exec.Command("pgrep", "-f", c.dataDir).Output()
	if len(strings.TrimSpace(string(procs))) > 0 {
		t.Fatalf("down left processes: %s", procs)
	}
	mounts, _ := os.ReadFile("/proc/mounts")
	if strings.Contains(string(mounts), c.dataDir) {
		t.Fatalf("down left mounts under %s", c.dataDir)
	}
	upstream, _ := fakeUpstreamDNS()
	out, err = exec.Command(trancheBin, "up", "--detach", "--data-dir", c.dataDir, "--listen", c.listen, "--upstream-dns", upstream).CombinedOutput()
	if err != nil {
		t.Fatalf("up again: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(c.dataDir, "tranche.log"))
			t.Logf("up again said:\n%s\ntranche.log:\n%s", out, tail(string(log), 3000))
		}
	})
	if got := s.must(t, "get", "configmap", "survivor", "-o", "jsonpath={.data.k}"); got != "v" {
		t.Fatalf("configmap after restart: %q", got)
	}
	if got := s.must(t, "get", "svc", "kubernetes", "-o", "jsonpath={.spec.clusterIP}"); got != ip {
		t.Fatalf("kubernetes Service IP %s, was %s", got, ip)
	}
	eventually(t, 30*time.Second, "the same three nodes Ready", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "nodes", "--no-headers")
		return len(regexp.MustCompile(`(?m)^tranche-[123]\s+Ready\s`).FindAllString(out, -1)) == 3, out
	})
}
