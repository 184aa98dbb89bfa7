package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tranche/tranche/internal/netns"
	"github.com/tranche/tranche/internal/testutil"
)

// An etcd cluster of Debian's etcd-server, one member per simulated machine, and API
// servers on machines of the same LAN: the store and control plane of issue 22's
// several machines, with nothing on the host's network (the test process reaches
// them by dialling from inside a machine's namespace).

// Members run with short raft timings so that faults resolve quickly: a heartbeat
// every 50 ms and an election after 500 ms of silence (etcd's defaults are 100 ms
// and 1 s). etcd's own request timeout is then 5 s + 2 × 500 ms.
const (
	etcdHeartbeatMillis = "50"
	etcdElectionMillis  = "500"
)

// etcdCluster is a running etcd cluster on simulated machines.
type etcdCluster struct {
	t       testing.TB
	members []*etcdMember
}

// etcdMember is one member: its machine, its data (kept across Stop and Start) and
// its process while it runs.
type etcdMember struct {
	name    string
	m       *machine
	dataDir string
	logPath string
	args    []string
	stop    func() // nil while stopped
}

// etcdMemberAddr is the LAN address of member i: .21, .22, ... of the LAN's subnet.
func etcdMemberAddr(l *lan, i int) netip.Addr {
	a := l.cidr.Masked().Addr().As4()
	a[3] += byte(21 + i)
	return netip.AddrFrom4(a)
}

// startEtcdCluster starts an n-member etcd cluster on l, member i on a machine of its
// own (namespace <lan namespace>-e<i>, address etcdMemberAddr(l, i)), with peer and
// client URLs on the LAN addresses, and waits until every member is healthy. Members
// and their data go away when t ends; a failed test logs the end of each member's log.
func startEtcdCluster(t testing.TB, l *lan, n int) *etcdCluster {
	t.Helper()
	if _, err := os.Stat(etcdBin); err != nil {
		t.Fatalf("%s is required (Debian package etcd-server; `make deps` installs it): %v", etcdBin, err)
	}
	dir := t.TempDir()
	c := &etcdCluster{t: t}
	var initial []string
	for i := range n {
		name := fmt.Sprintf("e%d", i)
		addr := etcdMemberAddr(l, i)
		initial = append(initial, name+"=http://"+netip.AddrPortFrom(addr, 2380).String())
		c.members = append(c.members, &etcdMember{name: name, m: l.addMachine(t, "etcd-"+name, l.ns+"-"+name, addr),
			dataDir: filepath.Join(dir, name), logPath: filepath.Join(dir, name+".log")})
	}
	for _, e := range c.members {
		client := "http://" + netip.AddrPortFrom(e.m.addr, 2379).String()
		peer := "http://" + netip.AddrPortFrom(e.m.addr, 2380).String()
		// On a restart the data directory holds the membership and the initial-cluster
		// flags are ignored, so one set of arguments serves both.
		e.args = []string{"--name", e.name, "--data-dir", e.dataDir,
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", l.ns, "--heartbeat-interval", etcdHeartbeatMillis, "--election-timeout", etcdElectionMillis}
	}
	for i := range c.members {
		c.Start(i)
	}
	for i := range c.members {
		c.waitHealthy(i)
	}
	return c
}

// Endpoints are the members' client URLs, for --etcd-servers.
func (c *etcdCluster) Endpoints() []string {
	var urls []string
	for _, e := range c.members {
		urls = append(urls, "http://"+netip.AddrPortFrom(e.m.addr, 2379).String())
	}
	return urls
}

// Start starts member i (again, on its data) without waiting for it.
func (c *etcdCluster) Start(i int) {
	c.t.Helper()
	e := c.members[i]
	if e.stop != nil {
		c.t.Fatalf("etcd member %s is already running", e.name)
	}
	e.stop = e.m.start(c.t, exec.Command(etcdBin, e.args...), e.logPath)
}

// Stop stops member i (SIGTERM, as a machine going down in order) and waits until it
// has exited.
func (c *etcdCluster) Stop(i int) {
	c.t.Helper()
	e := c.members[i]
	if e.stop == nil {
		c.t.Fatalf("etcd member %s is not running", e.name)
	}
	e.stop()
	e.stop = nil
}

// health is member i's answer to GET /health ("" when it does not answer); etcd says
// {"health":"true"} only when the cluster has a leader and the member can read.
func (c *etcdCluster) health(i int) string {
	e := c.members[i]
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			return netns.Dial(e.m.ns, network, addr, 2*time.Second)
		}}}
	resp, err := hc.Get("http://" + netip.AddrPortFrom(e.m.addr, 2379).String() + "/health")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// grpcHandled sums, over the running members, the requests each has answered by gRPC
// method (etcd's grpc_server_handled_total, from its /metrics): "Range", "Txn",
// "Put", "LeaseKeepAlive", ... and for the streams ("Watch") the streams ended.
// Messages sent on streams count under method+" sent" (grpc_server_msg_sent_total).
func (c *etcdCluster) grpcHandled() map[string]float64 {
	c.t.Helper()
	sum := map[string]float64{}
	for _, e := range c.members {
		if e.stop == nil {
			continue
		}
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
				return netns.Dial(e.m.ns, network, addr, 2*time.Second)
			}}}
		resp, err := hc.Get("http://" + netip.AddrPortFrom(e.m.addr, 2379).String() + "/metrics")
		if err != nil {
			c.t.Fatalf("etcd member %s metrics: %v", e.name, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			c.t.Fatalf("etcd member %s metrics: %v", e.name, err)
		}
		for _, m := range grpcMetric.FindAllStringSubmatch(string(body), -1) {
			var v float64
			if _, err := fmt.Sscan(m[3], &v); err != nil {
				continue
			}
			key := m[2]
			if m[1] == "msg_sent" {
				key += " sent"
			}
			sum[key] += v
		}
	}
	return sum
}

// grpcMetric is a line of grpc_server_handled_total or grpc_server_msg_sent_total:
// what, the method and the value.
var grpcMetric = regexp.MustCompile(`(?m)^grpc_server_(handled|msg_sent)_total\{[^}]*grpc_method="([^"]+)"[^}]*\} (\S+)$`)

// waitHealthy waits until member i answers healthy.
func (c *etcdCluster) waitHealthy(i int) {
	c.t.Helper()
	eventually(c.t, 60*time.Second, "etcd member "+c.members[i].name+" healthy", func() (bool, string) {
		h := c.health(i)
		return strings.Contains(h, `"health":"true"`), h
	})
}

// client is an etcd client of the whole cluster that dials from inside member 0's
// machine; the caller closes it.
func (c *etcdCluster) client() *clientv3.Client {
	c.t.Helper()
	ns := c.members[0].m.ns
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(_ context.Context, addr string) (net.Conn, error) {
			return netns.Dial(ns, "tcp", addr, 5*time.Second)
		})}})
	if err != nil {
		c.t.Fatal(err)
	}
	return cli
}

// stopLeader stops the member that leads and waits until the others are healthy; it
// returns the index of the stopped member and those of the members still up.
func (c *etcdCluster) stopLeader() (first int, up []int) {
	c.t.Helper()
	first = c.leader()
	c.Stop(first)
	c.t.Logf("stopped etcd member %s (the leader)", c.members[first].name)
	for i := range c.members {
		if i != first {
			up = append(up, i)
			c.waitHealthy(i)
		}
	}
	return first, up
}

// leader is the index of the member that leads, as member statuses say.
func (c *etcdCluster) leader() int {
	c.t.Helper()
	cli := c.client()
	defer cli.Close()
	for i, e := range c.members {
		if e.stop == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cli.Status(ctx, c.Endpoints()[i])
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return i
		}
	}
	c.t.Fatal("no etcd member leads")
	return -1
}

// machineServer is `tranche server` on a simulated machine, in a UTS namespace named
// after its host so that its leader election and API server identities are its own.
// kubectl and client-go reach it from inside its machine's namespace.
type machineServer struct {
	host       string
	m          *machine
	dataDir    string
	kubeconfig string
	url        string
	logPath    string
	args       []string // unshare's
	cmd        *exec.Cmd
	done       chan struct{}
}

// startMachineServer starts `tranche server` on m listening on m's address, port 6443,
// over the etcd endpoints, with extra arguments, and waits until it is ready; from,
// when not nil, is a running server whose PKI (sharedPKI) it shares. The server is
// killed when t ends.
func startMachineServer(t testing.TB, m *machine, host string, endpoints []string, from *machineServer, extra ...string) *machineServer {
	t.Helper()
	dir := t.TempDir()
	if from != nil {
		copySharedPKI(t, from.dataDir, dir)
	}
	listen := netip.AddrPortFrom(m.addr, 6443).String()
	s := &machineServer{host: host, m: m, dataDir: dir, kubeconfig: filepath.Join(dir, "kubeconfig"), url: "https://" + listen,
		logPath: filepath.Join(dir, "server.log")}
	s.args = append([]string{"--uts", "--", "sh", "-c", `hostname "$0" && exec "$@"`, host, trancheBin, "server",
		"--data-dir", dir, "--listen", listen, "--etcd-servers", strings.Join(endpoints, ","),
		"--advertise-address", m.addr.String(), "--loadbalancer-pool", "", "--log-level", "info"}, extra...)
	s.start(t)
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("--- server %s log (end) ---\n%s", host, tail(s.logText(), 4000))
		}
	})
	s.waitReady(t)
	return s
}

// startMachineServers starts a server for each of hosts over etcd with extra arguments,
// server i on a machine of its own on l named prefix+"s<i>", at the address .11+i of
// l's subnet; every server after the first shares the first's PKI.
func startMachineServers(t testing.TB, l *lan, prefix string, etcd *etcdCluster, hosts []string, extra ...string) []*machineServer {
	t.Helper()
	var servers []*machineServer
	for i, host := range hosts {
		a := l.cidr.Addr().As4()
		a[3] = byte(11 + i)
		m := l.addMachine(t, host, prefix+fmt.Sprintf("s%d", i), netip.AddrFrom4(a))
		var from *machineServer
		if i > 0 {
			from = servers[0]
		}
		servers = append(servers, startMachineServer(t, m, host, etcd.Endpoints(), from, extra...))
	}
	return servers
}

// start starts the server process (again, on its data directory) without waiting.
func (s *machineServer) start(t testing.TB) {
	t.Helper()
	s.cmd = exec.Command("unshare", s.args...)
	f, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s.cmd.Stdout, s.cmd.Stderr = f, f
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := netns.StartProcess(s.m.ns, s.cmd); err != nil {
		t.Fatalf("server %s: %v", s.host, err)
	}
	done := make(chan struct{})
	s.done = done
	cmd := s.cmd
	go func() { _ = cmd.Wait(); close(done) }()
}

// waitReady waits until the server answers /readyz.
func (s *machineServer) waitReady(t testing.TB) {
	t.Helper()
	eventually(t, 90*time.Second, "server "+s.host+" ready", func() (bool, string) {
		if !s.running() {
			t.Fatalf("server %s exited:\n%s", s.host, tail(s.logText(), 4000))
		}
		if _, err := os.Stat(s.kubeconfig); err != nil {
			return false, "no kubeconfig yet"
		}
		out, errOut, err := s.kubectl("", "get", "--raw", "/readyz")
		return err == nil && strings.TrimSpace(out) == "ok", out + errOut
	})
}

// running says whether the server process has not exited.
func (s *machineServer) running() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// kill stops the server at once, as a machine that dies; a stopped server stays so.
func (s *machineServer) kill() {
	if s.running() {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-s.done
}

func (s *machineServer) logText() string {
	data, _ := os.ReadFile(s.logPath)
	return string(data)
}

// kubectl runs kubectl with s's admin kubeconfig from inside s's machine.
func (s *machineServer) kubectl(stdin string, args ...string) (string, string, error) {
	return runKubectl(90*time.Second, []string{"nsenter", "--net=" + netns.Path(s.m.ns), "--"}, s.kubeconfig, stdin, args...)
}

// must runs kubectl and fails the test when it fails.
func (s *machineServer) must(t testing.TB, args ...string) string {
	t.Helper()
	out, errOut, err := s.kubectl("", args...)
	if err != nil {
		t.Fatalf("kubectl %s (server %s): %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), s.host, err, out, errOut)
	}
	return out
}

// mustStdin is must with stdin.
func (s *machineServer) mustStdin(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := s.kubectl(stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s (server %s): %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), s.host, err, out, errOut)
	}
	return out
}

// joinCommand runs `tranche token create --print-join-command` on s's machine, as an
// operator gets the join command, and returns the command it printed (checked to be
// kubeadm's shape) and the server URL in it.
func (s *machineServer) joinCommand(t testing.TB) (cmd, server string) {
	t.Helper()
	out, err := exec.Command("nsenter", "--net="+netns.Path(s.m.ns), "--", trancheBin, "token", "create",
		"--kubeconfig", s.kubeconfig, "--print-join-command").CombinedOutput()
	if err != nil {
		t.Fatalf("tranche token create: %v\n%s", err, out)
	}
	c := regexp.MustCompile(`^tranche agent --server (https://\S+) --token \S+ --ca-cert-hash sha256:[0-9a-f]{64}\n$`).FindStringSubmatch(string(out))
	if c == nil {
		t.Fatalf("tranche token create --print-join-command printed %q, want kubeadm's join command", out)
	}
	return strings.TrimSpace(string(out)), c[1]
}

// restConfig is s's admin client configuration, dialling from inside s's machine.
func (s *machineServer) restConfig(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := s.m.ns
	cfg.Dial = func(_ context.Context, network, addr string) (net.Conn, error) {
		return netns.Dial(ns, network, addr, 10*time.Second)
	}
	return cfg
}

func (s *machineServer) client(t testing.TB) kubernetes.Interface {
	t.Helper()
	return kubernetes.NewForConfigOrDie(s.restConfig(t))
}

// TestEtcdQuorum runs two servers over a 3-member etcd cluster on simulated machines and
// stops members under them. With one member down kubectl sees no error: creates, gets,
// lists and a watch started before. With two down (no quorum) a write fails with a 5xx
// Status within the request timeout rather than hanging, resourceVersion=0 reads (what
// kube-apiserver serves from its watch cache) still answer, and neither server exits.
// When the members return everything written before is there, writes work again and
// the elected controllers converge a Deployment scaled just before the outage.
func TestEtcdQuorum(t *testing.T) {
	t.Parallel()
	prefix := fmt.Sprintf("eq%d-", runID)
	l := newLAN(t, prefix+"lan", netip.MustParsePrefix("192.168.91.0/24"), netip.Addr{})
	etcd := startEtcdCluster(t, l, 3)
	// Requests are bounded by 8 s, beyond etcd's own 6 s request timeout; elections are
	// short so that the controllers come back quickly after the outage.
	serverArgs := []string{"--request-timeout", "8s", "--leader-elect-lease-duration", "4s",
		"--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "1s"}
	servers := startMachineServers(t, l, prefix, etcd, []string{"tre2e-eq-a", "tre2e-eq-b"}, serverArgs...)
	a, b := servers[0], servers[1]
	ns := "e2e-quorum"
	a.must(t, "create", "namespace", ns)
	a.must(t, "create", "configmap", "-n", ns, "before", "--from-literal=k=v")
	a.must(t, "create", "deployment", "-n", ns, "web", "--image=registry.k8s.io/e2e-test-images/agnhost:2.52", "--replicas=1")
	waitPods := func(s *machineServer, n int) {
		t.Helper()
		eventually(t, 60*time.Second, fmt.Sprintf("deployment web with %d replicas", n), func() (bool, string) {
			out, errOut, err := s.kubectl("", "get", "deployment", "-n", ns, "web", "-o", "jsonpath={.status.replicas}")
			return err == nil && out == fmt.Sprint(n), out + errOut
		})
	}
	waitPods(a, 1)

	// A watch through server b, started before any fault, sees every later change.
	var watchOut, watchErr testutil.Buffer
	watch := exec.Command("nsenter", "--net="+netns.Path(b.m.ns), "--", kubectlBin, "--kubeconfig", b.kubeconfig,
		"get", "configmaps", "-n", ns, "-w", "-o", "name")
	watch.Env = append(os.Environ(), "KUBECTL_KUBERC=false")
	watch.Stdout, watch.Stderr = &watchOut, &watchErr
	// No Pdeathsig: it fires when the forking OS thread exits, which Go's threads that
	// entered a namespace do; the cleanup kills the watch.
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	watchEnded := make(chan error, 1)
	go func() { watchEnded <- watch.Wait() }()
	t.Cleanup(func() { _ = watch.Process.Kill(); <-watchEnded })
	watchState := func() string {
		state := "running"
		select {
		case err := <-watchEnded:
			state = fmt.Sprintf("ended (%v)", err)
			watchEnded <- err
		default:
		}
		return fmt.Sprintf("kubectl watch %s, stdout %q, stderr %q", state, watchOut.String(), watchErr.String())
	}
	a.must(t, "create", "configmap", "-n", ns, "watched")
	eventually(t, 30*time.Second, "the watch seeing configmaps before and watched", func() (bool, string) {
		out := watchOut.String()
		return strings.Contains(out, "configmap/before") && strings.Contains(out, "configmap/watched"), watchState()
	})

	// One member down (the leader, the harder case): once the two others have elected
	// a leader, which takes about a second, kubectl sees no error through either server.
	first, up := etcd.stopLeader()
	for i, s := range servers {
		name := fmt.Sprintf("one-down-%d", i)
		s.must(t, "create", "configmap", "-n", ns, name, "--from-literal=k=v")
		if got := s.must(t, "get", "configmap", "-n", ns, name, "-o", "jsonpath={.data.k}"); got != "v" {
			t.Fatalf("kubectl get configmap %s through %s: %q", name, s.host, got)
		}
		if got := s.must(t, "get", "configmaps", "-n", ns, "-o", "name"); !strings.Contains(got, "configmap/"+name) {
			t.Fatalf("kubectl get configmaps through %s:\n%s", s.host, got)
		}
	}
	// Scaled just before the outage: the controllers may not be done when quorum goes.
	a.must(t, "scale", "deployment", "-n", ns, "web", "--replicas=3")
	eventually(t, 30*time.Second, "the watch seeing the configmaps made with a member down", func() (bool, string) {
		out := watchOut.String()
		return strings.Contains(out, "configmap/one-down-0") && strings.Contains(out, "configmap/one-down-1"), watchState()
	})

	// Two members down: no quorum.
	etcd.Stop(up[0])
	t.Logf("stopped etcd member %s: no quorum", etcd.members[up[0]].name)
	for i, s := range servers {
		start := time.Now()
		out, errOut, err := s.kubectl("", "create", "configmap", "-n", ns, fmt.Sprintf("no-quorum-%d", i))
		took := time.Since(start)
		t.Logf("create without quorum through %s: %.1fs: %s", s.host, took.Seconds(), strings.TrimSpace(errOut))
		if err == nil || !storeFailureSaid(errOut) {
			t.Fatalf("create through %s without quorum: err %v, want an error from the server naming etcd or the timeout:\n%s%s", s.host, err, out, errOut)
		}
		// Bounded by the request timeout (8 s); 60 s is a liveness bound, not a measure.
		if took > 60*time.Second {
			t.Fatalf("create through %s without quorum took %s", s.host, took)
		}
	}
	// The same through client-go: a 5xx Status.
	ctx := context.Background()
	_, err := a.client(t).CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "no-quorum-go"}}, metav1.CreateOptions{})
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Code < 500 {
		t.Fatalf("client-go create without quorum: %v, want a 5xx Status", err)
	}
	t.Logf("client-go create without quorum: %d %s %q", st.Status().Code, st.Status().Reason, st.Status().Message)
	// resourceVersion=0 reads answer, through either server.
	for _, s := range servers {
		if out := s.must(t, "get", "--raw", "/api/v1/namespaces/"+ns+"/configmaps/before?resourceVersion=0"); !strings.Contains(out, `"name":"before"`) {
			t.Fatalf("get with resourceVersion=0 through %s:\n%s", s.host, out)
		}
		l, err := s.client(t).CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatalf("list with resourceVersion=0 through %s: %v", s.host, err)
		}
		var names []string
		for _, cm := range l.Items {
			names = append(names, cm.Name)
		}
		if !slices.Contains(names, "before") || !slices.Contains(names, "one-down-0") || !slices.Contains(names, "one-down-1") {
			t.Fatalf("list with resourceVersion=0 through %s: %v", s.host, names)
		}
		if _, err := s.client(t).AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{ResourceVersion: "0"}); err != nil {
			t.Fatalf("get deployment with resourceVersion=0 through %s: %v", s.host, err)
		}
	}
	// A consistent read needs quorum: it ends with the request timeout's 504.
	if _, errOut, err := b.kubectl("", "get", "configmap", "-n", ns, "before"); err == nil || !strings.HasPrefix(errOut, "Error from server") {
		t.Fatalf("a consistent get without quorum: err %v, stderr %s", err, errOut)
	} else {
		t.Logf("consistent get without quorum: %s", strings.TrimSpace(errOut))
	}
	for _, s := range servers {
		if !s.running() {
			t.Fatalf("server %s exited without quorum:\n%s", s.host, tail(s.logText(), 4000))
		}
	}

	// The members return.
	etcd.Start(first)
	etcd.Start(up[0])
	for i := range etcd.members {
		etcd.waitHealthy(i)
	}
	eventually(t, 60*time.Second, "a write after quorum returned", func() (bool, string) {
		_, errOut, err := a.kubectl("", "create", "configmap", "-n", ns, "after")
		if err != nil && strings.Contains(errOut, "AlreadyExists") {
			return true, ""
		}
		return err == nil, errOut
	})
	for _, s := range servers {
		got := s.must(t, "get", "configmaps", "-n", ns, "-o", "name")
		for _, name := range []string{"before", "one-down-0", "one-down-1", "after"} {
			if !strings.Contains(got, "configmap/"+name+"\n") {
				t.Fatalf("configmap %s missing through %s after the outage:\n%s", name, s.host, got)
			}
		}
		if !s.running() {
			t.Fatalf("server %s exited:\n%s", s.host, tail(s.logText(), 4000))
		}
	}
	waitPods(b, 3)
	b.must(t, "scale", "deployment", "-n", ns, "web", "--replicas=2")
	waitPods(a, 2)
	if _, errOut, _ := a.kubectl("", "get", "--raw", "/readyz"); errOut != "" {
		t.Fatalf("server a not ready after the outage: %s", errOut)
	}
	if strings.Contains(watchErr.String(), "error") {
		t.Logf("the watch said: %s", watchErr.String())
	}
}

// storeFailureSaid says whether kubectl's stderr reports what kube-apiserver answers when
// etcd has no quorum: etcd's own error passed on as a 500 whose message is etcd's
// ("etcdserver: request timed out", "etcdserver: no leader", etcd 3.4's "rpc error: code =
// Unknown desc = context deadline exceeded" when its own deadline ran out first, or
// "raft proposal dropped" from a member campaigning alone), or the request timeout's 504.
func storeFailureSaid(stderr string) bool {
	for _, s := range []string{"etcdserver: ", "rpc error: code = ", "raft proposal dropped",
		"Timeout: request did not complete within requested timeout - context deadline exceeded"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}
