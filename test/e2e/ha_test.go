package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// haServer is a `tranche server` over the external etcd, run in a UTS namespace of
// its own so that it has its own hostname, as a server on its own machine: the
// hostname names its leader election identity and its API server identity lease.
type haServer struct {
	*server
	host      string
	advertise string
}

// sharedPKI are the files every server of a cluster shares (kubeadm's
// --upload-certs set): the CAs and the service account signing key. Each server makes
// its own serving and client certificates from them.
var sharedPKI = []string{"ca.crt", "ca.key", "front-proxy-ca.crt", "front-proxy-ca.key", "sa.key"}

// copySharedPKI copies the sharedPKI files of the server whose data directory is from
// into the data directory dir of a server that joins it.
func copySharedPKI(t testing.TB, from, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "pki"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range sharedPKI {
		data, err := os.ReadFile(filepath.Join(from, "pki", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "pki", f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// startHAServer starts one server; from, when not nil, is a running server whose PKI
// it shares.
func startHAServer(t testing.TB, host, listen, advertise, etcdURL string, from *haServer) *haServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "tre2e-ha-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if from != nil {
		copySharedPKI(t, from.dataDir, dir)
	}
	s := &haServer{server: &server{dataDir: dir, listen: listen, kubeconfig: filepath.Join(dir, "kubeconfig")}, host: host, advertise: advertise}
	s.args = []string{"server", "--data-dir", dir, "--listen", listen, "--etcd-servers", etcdURL,
		"--advertise-address", advertise, "--loadbalancer-pool", "", "--log-level", "info"}
	if err := s.startWithHostname(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("--- %s log (last 3 KiB) ---\n%s", host, tail(s.logText(), 3072))
		}
	})
	return s
}

// twoHAServers starts an etcd and two servers over it, tre2e-<tag>-a and tre2e-<tag>-b,
// listening at one port on 127.0.0.<n> and 127.0.0.<n+1> and advertising 10.240.0.<n>
// and 10.240.0.<n+1>; the second shares the first's PKI. It returns them and a client
// of each.
func twoHAServers(t testing.TB, tag string, n byte) ([]*haServer, []kubernetes.Interface) {
	t.Helper()
	etcdURL := startEtcd(t)
	port := portFreeOn(t, fmt.Sprintf("127.0.0.%d", n), fmt.Sprintf("127.0.0.%d", n+1))
	var servers []*haServer
	var clients []kubernetes.Interface
	for i, suffix := range []string{"a", "b"} {
		var from *haServer
		if i > 0 {
			from = servers[0]
		}
		s := startHAServer(t, "tre2e-"+tag+"-"+suffix, fmt.Sprintf("127.0.0.%d:%s", n+byte(i), port), fmt.Sprintf("10.240.0.%d", n+byte(i)), etcdURL, from)
		servers = append(servers, s)
		clients = append(clients, s.client(t))
	}
	return servers, clients
}

// startWithHostname starts the server in a new UTS namespace named s.host (unshare
// execs sh, which execs tranche: the process is the server itself) and waits until
// it is ready.
func (s *haServer) startWithHostname() error {
	args := append([]string{"--uts", "--", "sh", "-c", `hostname "$0" && exec "$@"`, s.host, trancheBin}, s.args...)
	return s.run(exec.Command("unshare", args...), "tranche server "+s.host, 90*time.Second)
}

func (s *haServer) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
	}
}

// portFreeOn returns a port nobody listens on at any of hosts, so that servers on
// different loopback addresses share one port, as servers on different machines do.
func portFreeOn(t testing.TB, hosts ...string) string {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", net.JoinHostPort(hosts[0], "0"))
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		free := true
		for _, h := range hosts[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(h, port))
			if err != nil {
				free = false
				break
			}
			_ = l.Close()
		}
		_ = ln.Close()
		if free {
			return port
		}
	}
	t.Fatal("no port free on all of", hosts)
	return ""
}

// leaseHolder is the holderIdentity of kube-system/name as c reads it.
func leaseHolder(c kubernetes.Interface, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := c.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// apiEndpointIPs lists the addresses of the kubernetes Endpoints and EndpointSlice.
func apiEndpointIPs(c kubernetes.Interface) (ep, slice []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if e, err := c.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil {
		for _, s := range e.Subsets {
			for _, a := range s.Addresses {
				ep = append(ep, a.IP)
			}
		}
	}
	if s, err := c.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil {
		for _, e := range s.Endpoints {
			slice = append(slice, e.Addresses...)
		}
	}
	return ep, slice
}

// checkOneSliceEach: every Service in ns has exactly one EndpointSlice and no two
// Services share a ClusterIP; it returns the number of Services seen.
func checkOneSliceEach(t *testing.T, c kubernetes.Interface, ns string) (bool, string) {
	t.Helper()
	ctx := context.Background()
	svcs, err := c.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	ips := map[string]string{}
	for _, s := range svcs.Items {
		if other, dup := ips[s.Spec.ClusterIP]; dup {
			t.Fatalf("ClusterIP %s given twice: services %s and %s", s.Spec.ClusterIP, other, s.Name)
		}
		ips[s.Spec.ClusterIP] = s.Name
		sl, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + s.Name})
		if err != nil {
			return false, err.Error()
		}
		if len(sl.Items) > 1 {
			t.Fatalf("service %s has %d EndpointSlices, want one: duplicated controller writes", s.Name, len(sl.Items))
		}
		if len(sl.Items) == 0 {
			return false, "service " + s.Name + " has no EndpointSlice yet"
		}
	}
	return true, ""
}

func makeService(name string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}}}
}

// TestElectedControlPlane runs two servers over one external etcd: every API server
// serves and is listed in the kubernetes endpoints and by an identity lease, the
// controller manager and scheduler run on one of them (one holder per lease, one
// EndpointSlice per Service, no ClusterIP given twice), and when the elected server is
// killed the other takes over within the lease duration + 2s, its controllers write,
// kubectl keeps working against it and the dead server leaves the endpoints.
func TestElectedControlPlane(t *testing.T) {
	servers, clients := twoHAServers(t, "ha", 11)

	// One holder per lease, named <hostname>_<uuid>, the same as seen through either server.
	holders := map[string]string{}
	for _, lease := range []string{"kube-controller-manager", "kube-scheduler"} {
		eventually(t, 60*time.Second, "lease kube-system/"+lease+" held", func() (bool, string) {
			h := leaseHolder(clients[0], lease)
			return (strings.HasPrefix(h, "tre2e-ha-a_") || strings.HasPrefix(h, "tre2e-ha-b_")) && h == leaseHolder(clients[1], lease), h
		})
		holders[lease] = leaseHolder(clients[0], lease)
	}
	t.Logf("leases: %v", holders)
	leaderIdx := 0
	if strings.HasPrefix(holders["kube-controller-manager"], "tre2e-ha-b_") {
		leaderIdx = 1
	}
	leader, survivor := servers[leaderIdx], servers[1-leaderIdx]
	sc := clients[1-leaderIdx]
	for i, s := range servers {
		n := 0
		for _, line := range strings.Split(s.logText(), "\n") {
			if strings.Contains(line, `msg="became leader"`) && strings.Contains(line, "lease=kube-system/kube-controller-manager") {
				n++
			}
		}
		if want := map[bool]int{true: 1, false: 0}[i == leaderIdx]; n != want {
			t.Fatalf("%s became controller-manager leader %d times, want %d", s.host, n, want)
		}
	}

	// Every API server has its identity lease and is in the kubernetes endpoints.
	eventually(t, 30*time.Second, "two identity leases", func() (bool, string) {
		l, err := sc.CoordinationV1().Leases("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "apiserver.kubernetes.io/identity=kube-apiserver"})
		if err != nil {
			return false, err.Error()
		}
		var hosts []string
		for _, x := range l.Items {
			if !strings.HasPrefix(x.Name, "apiserver-") || !strings.HasPrefix(ptr.Deref(x.Spec.HolderIdentity, ""), x.Name+"_") {
				return false, fmt.Sprintf("lease %s held by %q", x.Name, ptr.Deref(x.Spec.HolderIdentity, ""))
			}
			hosts = append(hosts, x.Labels["kubernetes.io/hostname"])
		}
		slices.Sort(hosts)
		return slices.Equal(hosts, []string{"tre2e-ha-a", "tre2e-ha-b"}), fmt.Sprint(hosts)
	})
	eventually(t, 30*time.Second, "both servers in the kubernetes endpoints", func() (bool, string) {
		ep, slice := apiEndpointIPs(sc)
		want := []string{"10.240.0.11", "10.240.0.12"}
		return slices.Equal(ep, want) && slices.Equal(slice, want), fmt.Sprintf("endpoints %v, slice %v", ep, slice)
	})

	// Services created through both servers at once: one ClusterIP each, one slice each.
	ns := "e2e-elected"
	if _, err := sc.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			if _, err := clients[i%2].CoreV1().Services(ns).Create(context.Background(), makeService(fmt.Sprintf("svc-%d", i)), metav1.CreateOptions{}); err != nil {
				t.Errorf("creating svc-%d through %s: %v", i, servers[i%2].host, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	eventually(t, 60*time.Second, "one EndpointSlice per Service", func() (bool, string) { return checkOneSliceEach(t, sc, ns) })

	// Kill the elected server.
	killed := time.Now()
	leader.kill()
	t.Logf("killed %s (the controller manager's leader)", leader.host)
	var takeover time.Duration
	eventually(t, 60*time.Second, survivor.host+" taking the controller manager's lease", func() (bool, string) {
		h := leaseHolder(sc, "kube-controller-manager")
		takeover = time.Since(killed)
		return strings.HasPrefix(h, survivor.host+"_"), h
	})
	// The first controller write after the failover: a new Service's EndpointSlice.
	if _, err := sc.CoreV1().Services(ns).Create(context.Background(), makeService("after"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var firstWrite time.Duration
	eventually(t, 60*time.Second, "the EndpointSlice of a Service created after the failover", func() (bool, string) {
		sl, err := sc.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=after"})
		firstWrite = time.Since(killed)
		return err == nil && len(sl.Items) == 1, fmt.Sprint(err)
	})
	t.Logf("failover: lease taken over %.1fs after the kill, first controller write %.1fs after it (lease duration 15s, renew deadline 10s, retry period 2s)",
		takeover.Seconds(), firstWrite.Seconds())
	// Generous: the bound is lease duration + 2s; a loaded machine gets as much again.
	if limit := 2 * (15*time.Second + 2*time.Second); takeover > limit {
		t.Fatalf("takeover took %s, beyond %s", takeover, limit)
	}
	// The new leader says so in an event on the lease, as upstream's components do.
	eventually(t, 30*time.Second, "a LeaderElection event naming "+survivor.host, func() (bool, string) {
		evs, err := sc.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Reason == "LeaderElection" && e.InvolvedObject.Kind == "Lease" && e.InvolvedObject.Name == "kube-controller-manager" {
				if strings.HasPrefix(e.Message, survivor.host+"_") && strings.HasSuffix(e.Message, " became leader") {
					return true, ""
				}
				seen = append(seen, e.Message)
			}
		}
		return false, fmt.Sprint(seen)
	})
	eventually(t, 60*time.Second, "the scheduler's lease taken over", func() (bool, string) {
		h := leaseHolder(sc, "kube-scheduler")
		return strings.HasPrefix(h, survivor.host+"_"), h
	})
	eventually(t, 30*time.Second, "one EndpointSlice per Service after the failover", func() (bool, string) { return checkOneSliceEach(t, sc, ns) })

	// kubectl against the live server keeps working.
	if out := survivor.must(t, "get", "services", "-n", ns, "-o", "name"); strings.Count(out, "service/") != 11 {
		t.Fatalf("kubectl get services through %s:\n%s", survivor.host, out)
	}
	// The dead server leaves the kubernetes endpoints once its lease expired.
	want := []string{survivor.advertise}
	eventually(t, 60*time.Second, "the killed server leaving the kubernetes endpoints", func() (bool, string) {
		ep, slice := apiEndpointIPs(sc)
		return slices.Equal(ep, want) && slices.Equal(slice, want), fmt.Sprintf("endpoints %v, slice %v", ep, slice)
	})
	t.Logf("the kubernetes endpoints dropped %s %.1fs after the kill", leader.advertise, time.Since(killed).Seconds())
}
