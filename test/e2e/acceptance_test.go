package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAcceptanceSeveralMachines is issue 22's acceptance test: 3 etcd members, 2
// servers and 3 agent machines on one simulated LAN; each agent machine runs the join
// command `tranche token create --print-join-command` printed, as printed (a bootstrap
// token, nothing else: node name, pod subnet and the pod network's identity come from
// the machine and the cluster); the seeds' Deployment and Service (000-api.yaml) answer through their ClusterIP
// from every machine, through the cluster DNS and on a NodePort of every machine's
// address; then the faults: the elected server is killed (the other takes over, kubectl
// through it works, no duplicated EndpointSlices or ClusterIPs), one agent machine's
// link is cut and returns (testLinkCut), one etcd member is
// stopped (no error), then two (writes fail with a 5xx, resourceVersion=0 reads
// answer), and when they return nothing is lost and the Service still answers.
func TestAcceptanceSeveralMachines(t *testing.T) {
	t.Parallel()
	start := time.Now()
	defer func() { t.Logf("wall time %.0fs", time.Since(start).Seconds()) }()
	prefix := fmt.Sprintf("ac%d-", runID)
	l := newLAN(t, prefix+"lan", netip.MustParsePrefix("192.168.92.0/24"), netip.Addr{})
	etcd := startEtcdCluster(t, l, 3)
	serverArgs := []string{"--request-timeout", "8s", "--node-monitor-grace-period", "30s", "--leader-elect-lease-duration", "6s",
		"--leader-elect-renew-deadline", "4s", "--leader-elect-retry-period", "1s"}
	servers := startMachineServers(t, l, prefix, etcd, []string{"tre2e-ac-a", "tre2e-ac-b"}, serverArgs...)
	a := servers[0]

	// The join command, as an operator gets it.
	joinCmd, joinURL := a.joinCommand(t)
	if joinURL != a.url && joinURL != servers[1].url {
		t.Fatalf("tranche token create --print-join-command printed %q, want a join command for %s or %s", joinCmd, a.url, servers[1].url)
	}

	// Three agent machines run it as printed, each with its own host name (the agent's
	// node name), its own /var/lib/tranche (the agent's root directory) and its own
	// /run/netns: nothing but the token says which cluster to join, the pod subnet comes
	// from node IPAM and the pod network's certificate from a CSR, as on real machines.
	type agentSpec struct {
		name string
		addr netip.Addr
	}
	var agents []agentSpec
	machines := map[string]*machine{}
	// Made before the machines, removed after them (cleanups run in reverse order).
	home := t.TempDir()
	useMachineMounts(t)
	logs := t.TempDir()
	for i := range 3 {
		sp := agentSpec{fmt.Sprintf("m%d", i+1), netip.MustParseAddr(fmt.Sprintf("192.168.92.%d", 31+i))}
		agents = append(agents, sp)
		m := addReadmeMachine(t, l, sp.name, prefix+sp.name, sp.addr, home)
		machines[sp.name] = m.machine
		m.start(t, m.command(context.Background(), joinCmd), filepath.Join(logs, sp.name+"-agent.log"))
	}
	eventually(t, 120*time.Second, "three joined nodes Ready", func() (bool, string) {
		out, _, _ := a.kubectl("", "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		return out == "m1 True\nm2 True\nm3 True\n", out
	})
	if got := a.must(t, "get", "csr", "-o", "jsonpath={range .items[*]}{.spec.signerName} {.status.conditions[0].type}{\"\\n\"}{end}"); strings.Count(got, "kubernetes.io/kube-apiserver-client-kubelet Approved\n") != 3 ||
		strings.Count(got, "kubernetes.io/kube-apiserver-client Approved\n") != 3 {
		// Each agent's node identity, and its pod network's (bootstrap.NetworkIdentity).
		t.Fatalf("the agents' CSRs:\n%s", got)
	}

	// The seeds' Deployment and Service, its Service also on a NodePort.
	ns := "e2e-acceptance"
	a.must(t, "create", "namespace", ns)
	a.mustStdin(t, acceptanceAPI, "apply", "-n", ns, "-f", "-")
	a.must(t, "patch", "svc", "api-svc", "-n", ns, "--type=merge", "-p", `{"spec":{"type":"NodePort"}}`)
	eventually(t, 150*time.Second, "deployment api available", func() (bool, string) {
		out, _, _ := a.kubectl("", "get", "deployment", "api", "-n", ns, "-o", "jsonpath={.status.availableReplicas}")
		return out == "3", out
	})
	clusterIP := a.must(t, "get", "svc", "api-svc", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
	nodePort := a.must(t, "get", "svc", "api-svc", "-n", ns, "-o", "jsonpath={.spec.ports[0].nodePort}")
	pods := strings.Fields(a.must(t, "get", "pods", "-n", ns, "-l", "app=api", "-o", "jsonpath={.items[*].metadata.name}"))
	if len(pods) != 3 {
		t.Fatalf("api pods: %v", pods)
	}
	// reaches says whether every api pod answers at url from machine m.
	reaches := func(m *machine, url string) (bool, string) {
		seen := hits(m.ns, url, 9)
		for _, p := range pods {
			if seen[p] == 0 {
				return false, fmt.Sprint(seen)
			}
		}
		return true, ""
	}
	for _, from := range agents {
		m := machines[from.name]
		eventually(t, 30*time.Second, "every api pod through the ClusterIP from "+from.name, func() (bool, string) {
			return reaches(m, "http://"+clusterIP+"/")
		})
		for _, to := range agents {
			eventually(t, 30*time.Second, fmt.Sprintf("every api pod through NodePort %s of %s from %s", nodePort, to.name, from.name), func() (bool, string) {
				return reaches(m, "http://"+to.addr.String()+":"+nodePort+"/")
			})
		}
		eventually(t, 60*time.Second, "api-svc through the cluster DNS from "+from.name, func() (bool, string) {
			out, _ := exec.Command("ip", "netns", "exec", m.ns, "dig", "+short", "+time=2", "+tries=1", "@10.96.0.10",
				"api-svc."+ns+".svc.cluster.local").CombinedOutput()
			return strings.TrimSpace(string(out)) == clusterIP, string(out)
		})
	}

	t.Logf("%.0fs: the api Service answers through its ClusterIP and DNS from m1..m3 and on NodePort %s of each", time.Since(start).Seconds(), nodePort)

	// Fault 1: kill the elected server.
	c0, c1 := servers[0].client(t), servers[1].client(t)
	var leader, survivor *machineServer
	eventually(t, 30*time.Second, "one holder of the controller manager's lease", func() (bool, string) {
		h := leaseHolder(c0, "kube-controller-manager")
		for i, s := range servers {
			if strings.HasPrefix(h, s.host+"_") {
				leader, survivor = s, servers[1-i]
			}
		}
		return leader != nil && h == leaseHolder(c1, "kube-controller-manager"), h
	})
	sc := survivor.client(t)
	killed := time.Now()
	leader.kill()
	t.Logf("killed %s, the elected server", leader.host)
	eventually(t, 60*time.Second, survivor.host+" taking the controller manager's lease", func() (bool, string) {
		h := leaseHolder(sc, "kube-controller-manager")
		return strings.HasPrefix(h, survivor.host+"_"), h
	})
	t.Logf("%s took the lease over %.1fs after the kill (lease duration 6s)", survivor.host, time.Since(killed).Seconds())
	survivor.mustStdin(t, "apiVersion: v1\nkind: Service\nmetadata: {name: after-failover}\nspec:\n  selector: {app: api}\n  ports: [{port: 81, targetPort: 8080}]\n",
		"apply", "-n", ns, "-f", "-")
	eventually(t, 60*time.Second, "one EndpointSlice per Service, no ClusterIP twice, after the failover", func() (bool, string) {
		return checkOneSliceEach(t, sc, ns)
	})
	if out := survivor.must(t, "get", "pods", "-n", ns, "-l", "app=api", "-o", "name"); strings.Count(out, "pod/") != 3 {
		t.Fatalf("kubectl get pods through %s after the failover:\n%s", survivor.host, out)
	}
	// The killed server's machine comes back (the agents joined through it).
	leader.start(t)
	leader.waitReady(t)

	// Fault 2: m3's link is cut and returns (testLinkCut: NotReady after the grace
	// period, its endpoints out of the slices, eviction after a toleration, the node and
	// its routes converging without restarts), through the surviving server.
	testLinkCut(t, machineKubectl{survivor}, machines["m3"], machines["m1"])
	t.Logf("%.0fs: m3's link cut and back", time.Since(start).Seconds())

	// Fault 3: etcd members stop, one then two. The api pods are read again first: the
	// link cut may have evicted m3's and replaced it.
	eventually(t, 90*time.Second, "three api pods ready after the link cut", func() (bool, string) {
		out, _, _ := survivor.kubectl("", "get", "deployment", "api", "-n", ns, "-o", "jsonpath={.status.readyReplicas} {.status.replicas}")
		return out == "3 3", out
	})
	pods = nil
	list, err := sc.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=api"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p.Name)
		}
	}
	first, up := etcd.stopLeader()
	for i, s := range servers {
		s.must(t, "create", "configmap", "-n", ns, fmt.Sprintf("one-down-%d", i))
		if out := s.must(t, "get", "pods", "-n", ns, "-l", "app=api", "-o", "name"); strings.Count(out, "pod/") != 3 {
			t.Fatalf("kubectl get pods through %s with one etcd member down:\n%s", s.host, out)
		}
	}
	etcd.Stop(up[0])
	t.Logf("stopped etcd member %s: no quorum", etcd.members[up[0]].name)
	for _, s := range servers {
		_, errOut, err := s.kubectl("", "create", "configmap", "-n", ns, "no-quorum")
		if err == nil || !storeFailureSaid(errOut) {
			t.Fatalf("a write through %s without etcd quorum: err %v, stderr %q, want a 5xx from the server", s.host, err, errOut)
		}
		if out := s.must(t, "get", "--raw", "/api/v1/namespaces/"+ns+"/services/api-svc?resourceVersion=0"); !strings.Contains(out, clusterIP) {
			t.Fatalf("get with resourceVersion=0 through %s without quorum:\n%s", s.host, out)
		}
		if !s.running() {
			t.Fatalf("server %s exited without etcd quorum", s.host)
		}
	}
	// The data path does not need the control plane. (Nine requests spread at random
	// miss one of three pods 8% of the time: a few rounds, as above.)
	eventually(t, 20*time.Second, "every api pod through the ClusterIP from m1 without etcd quorum", func() (bool, string) {
		return reaches(machines["m1"], "http://"+clusterIP+"/")
	})
	etcd.Start(first)
	etcd.Start(up[0])
	for i := range etcd.members {
		etcd.waitHealthy(i)
	}
	t.Logf("etcd members back")
	eventually(t, 60*time.Second, "a write after quorum returned", func() (bool, string) {
		_, errOut, err := survivor.kubectl("", "create", "configmap", "-n", ns, "after")
		return err == nil || strings.Contains(errOut, "AlreadyExists"), errOut
	})
	got := survivor.must(t, "get", "configmaps", "-n", ns, "-o", "name")
	for _, name := range []string{"one-down-0", "one-down-1", "after"} {
		if !strings.Contains(got, "configmap/"+name+"\n") {
			t.Fatalf("configmap %s missing after the outage:\n%s", name, got)
		}
	}
	a.must(t, "scale", "deployment", "api", "-n", ns, "--replicas=2")
	eventually(t, 60*time.Second, "deployment api scaled to 2 after the outage", func() (bool, string) {
		out, _, _ := survivor.kubectl("", "get", "deployment", "api", "-n", ns, "-o", "jsonpath={.status.replicas} {.status.availableReplicas}")
		return out == "2 2", out
	})
	eventually(t, 30*time.Second, "the ClusterIP from m2 after the outage", func() (bool, string) {
		body, err := fetch(machines["m2"].ns, "http://"+clusterIP+"/")
		return err == nil && strings.HasPrefix(body, "api-"), fmt.Sprint(body, err)
	})
	eventually(t, 30*time.Second, "one EndpointSlice per Service after the outage", func() (bool, string) {
		return checkOneSliceEach(t, sc, ns)
	})
}

// acceptanceAPI is seed 000 as TestServiceProxy runs it (busybox's httpd instead of
// the seed's image, which no node can pull; the probe every second), with the probe's
// default failure threshold.
const acceptanceAPI = seedAPIHead + seedAPITail

// machineKubectl runs kubectl against a server on a machine for the fault tests shared
// with `tranche up` clusters (kubectlRunner).
type machineKubectl struct{ s *machineServer }

func (k machineKubectl) kubectl(_ testing.TB, stdin string, args ...string) (string, string, error) {
	return k.s.kubectl(stdin, args...)
}

func (k machineKubectl) must(t testing.TB, args ...string) string { return k.s.must(t, args...) }

// namespace makes a namespace named after the test, as server.namespace does.
func (k machineKubectl) namespace(t testing.TB) string {
	t.Helper()
	name := "e2e-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	k.s.must(t, "create", "namespace", name)
	return name
}
