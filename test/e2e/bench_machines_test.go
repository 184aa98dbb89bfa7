package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/bench/benchcluster"
	"github.com/tranche/tranche/bench/netprog"
	"github.com/tranche/tranche/internal/netns"
)

// The issue-22 benchmarks on simulated machines (bench/machines/README.md says what they
// measure and against what). As root:
//
//	TRANCHE_BIN=$PWD/bin/tranche go test -run '^$' -bench Machines -benchtime 1x ./test/e2e/
const (
	// benchMachines is how many machines run an agent (--backend vxlan).
	benchMachines = 5
	// npChanges is how many times the network programming benchmark turns its pod
	// Ready (and unready again).
	npChanges = 200
	// p2pGoal is the goal for across machines / within one machine requests/s.
	p2pGoal = 0.85
	// p2pRounds, p2pRunFor, p2pThreads and p2pConns are the wrk runs of the pod-to-pod
	// benchmark (as bench/datapath's).
	p2pRounds  = 5
	p2pRunFor  = "4s"
	p2pThreads = "2"
	p2pConns   = "32"
)

// fiveMachines starts a one-node `tranche up` cluster (its API server and control
// plane; tag names its namespaces) and benchMachines machines on its underlay LAN, m1..m5
// at 10.240.0.111.. with pod subnets 10.244.21.0/24.., each running `tranche agent
// --backend vxlan`, and waits until every machine is Ready and routes every other
// machine's pod subnet through flannel.1.
func fiveMachines(b *testing.B, tag string) (*localCluster, []*machine) {
	b.Helper()
	c := upOwn(b, tag, 1)
	l := underlayLAN(c)
	var ms []*machine
	var names []string
	for i := 1; i <= benchMachines; i++ {
		name := fmt.Sprintf("m%d", i)
		m := l.addMachine(b, name, c.prefix+name, netip.AddrFrom4([4]byte{10, 240, 0, byte(110 + i)}))
		m.startAgent(b, c, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(20 + i), 0}), 24), "vxlan")
		ms = append(ms, m)
		names = append(names, name)
	}
	waitNodesReady(b, c.srv, 120*time.Second, names...)
	for i, m := range ms {
		eventually(b, 60*time.Second, m.name+" routing every other machine's pod subnet over VXLAN", func() (bool, string) {
			out, _ := exec.Command("ip", "-n", m.ns, "route").CombinedOutput()
			for j := 1; j <= benchMachines; j++ {
				if j != i+1 && !strings.Contains(string(out), fmt.Sprintf("10.244.%d.0/24 via 10.244.%d.0 dev flannel.1", 20+j, 20+j)) {
					return false, string(out)
				}
			}
			return true, ""
		})
	}
	return c, ms
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// BenchmarkMachinesNetworkProgramming measures network programming latency on five
// simulated machines with the VXLAN overlay, with bench/netprog's method: a Service
// whose only endpoint is one pod on m1, turned Ready and unready npChanges times through
// a readiness gate; for each change, from the moment a watch sees the pod Ready until
// a TCP connection to the ClusterIP is accepted from every machine's namespace (m2..m5
// reach the pod across the overlay), and from Ready=False until every machine is
// refused. It prints p50/p99 beside the goal.
func BenchmarkMachinesNetworkProgramming(b *testing.B) {
	c, ms := fiveMachines(b, "bmn")
	load := loadAvg()
	client := c.srv.client(b)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ns := c.srv.namespace(b)
	target := netprog.StartTarget(b, ctx, client, ns, ms[0].name)

	var pollers []*netprog.Poller
	for _, m := range ms {
		p, err := netprog.NewPoller("machine "+m.name, m.ns, target.Addr)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		pollers = append(pollers, p)
	}
	if _, err := netprog.UntilAll(pollers, false); err != nil {
		b.Fatal(err)
	}
	before, err := netprog.Counters(ctx, client, netprog.ControllerSeries)
	if err != nil {
		b.Fatal(err)
	}
	nodeCounters := func() []map[string]float64 {
		var out []map[string]float64
		for _, m := range ms {
			c, err := netprog.NodeCounters(m.ns, netprog.NodeSeries)
			if err != nil {
				b.Fatal(err)
			}
			out = append(out, c)
		}
		return out
	}
	nodesBefore := nodeCounters()
	busyBefore, idleBefore, err := benchcluster.MachineCPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	got := target.Measure(b, ctx, pollers, npChanges)
	b.StopTimer()
	busyAfter, idleAfter, err := benchcluster.MachineCPU()
	if err != nil {
		b.Fatal(err)
	}
	after, err := netprog.Counters(ctx, client, netprog.ControllerSeries)
	if err != nil {
		b.Fatal(err)
	}
	nodesAfter := nodeCounters()
	toReady, toUnready := got.ToReady, got.ToUnready
	local, remote := got.ReadyFrom(0, 1), got.ReadyFrom(1, len(pollers))
	b.ReportMetric(netprog.Percentile(toReady, 50).Seconds()*1000, "p50-ms")
	b.ReportMetric(netprog.Percentile(toReady, 99).Seconds()*1000, "p99-ms")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "network programming, %d changes, %d machines (VXLAN)\tp50\tp99\tmax\tgoal p99\tp99 / goal\n", npChanges, benchMachines)
	netprog.Row(tw, "pod Ready -> ClusterIP reaches it from every machine", toReady, netprog.GoalP99)
	netprog.Row(tw, "  the same, the pod's own machine (m1)", local, netprog.GoalP99)
	netprog.Row(tw, "  the same, each other machine on its own (across VXLAN)", remote, netprog.GoalP99)
	netprog.Row(tw, "pod unready -> every machine refused", toUnready, netprog.GoalP99)
	tw.Flush()
	var names []string
	for _, m := range ms {
		names = append(names, m.name)
	}
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	netprog.Slowest(tw, got, names, 8)
	tw.Flush()
	for _, s := range netprog.ControllerSeries {
		fmt.Printf("  %s: %.0f during the changes\n", s, after[s]-before[s])
	}
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	netprog.NodeBreakdown(tw, names, nodesBefore, nodesAfter)
	tw.Flush()
	busy, idle := busyAfter-busyBefore, idleAfter-idleBefore
	fmt.Printf("  the machine's CPUs were busy %.0f%% of the time during the changes\n", 100*busy.Seconds()/(busy+idle).Seconds())
	if got.Early > 0 {
		fmt.Printf("  %d changes reached every machine before the benchmark's watch saw the pod change (counted as 0).\n", got.Early)
	}
	fmt.Printf("  load average before: %s, after: %s\n\n", load, loadAvg())
}

// BenchmarkMachinesPodToPod measures pod-to-pod requests/s on five simulated machines:
// wrk (Debian's) in a client pod's network namespace against the built-in netexec of a
// server pod on m2, by pod IP, once from a client pod on m1 (across machines, over
// VXLAN) and once from a client pod on m2 (within one machine), in the same run, after a
// one-second warm-up of each, p2pRounds rounds in alternating order; it prints each side's median and the median of the
// rounds' ratios beside the goal. In the same rounds it measures the peer, the same two
// paths built with `ip` alone (startRawVXLAN): the ratio the kernel's path allows here.
func BenchmarkMachinesPodToPod(b *testing.B) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Fatal("BenchmarkMachinesPodToPod needs wrk (Debian package wrk; make deps installs it)")
	}
	c, ms := fiveMachines(b, "bmp")
	client := c.srv.client(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns := c.srv.namespace(b)
	pod := func(name, node string, ctr v1.Container) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: new(int64), Containers: []v1.Container{ctr}}}
	}
	pods := []*v1.Pod{
		// netexec's /healthz answers 200 once its UDP server runs: it keeps its default
		// UDP port (as bench/datapath).
		pod("server", ms[1].name, v1.Container{Name: "s", Image: "registry.k8s.io/e2e-test-images/agnhost:2.52", Args: []string{"netexec", "--http-port=8080"}}),
		pod("client-across", ms[0].name, v1.Container{Name: "c", Image: "busybox", Command: []string{"sleep", "3600"}}),
		pod("client-within", ms[1].name, v1.Container{Name: "c", Image: "busybox", Command: []string{"sleep", "3600"}}),
	}
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		for _, p := range pods {
			_ = client.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}
	})
	for _, p := range pods {
		c.waitReady(b, ns, p.Name)
	}
	server, err := client.CoreV1().Pods(ns).Get(ctx, "server", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	url := "http://" + net.JoinHostPort(server.Status.PodIP, "8080") + "/healthz"
	raw := startRawVXLAN(b, fmt.Sprintf("bpr%d-", runID))
	// sides[0:2] are tranche's, sides[2:4] the raw kernel path's (the peer).
	serverNS := c.podNS(b, ns, "server")
	sides := []struct{ name, ns, url, serverNS string }{
		{"across machines (m1 -> m2, VXLAN)", c.podNS(b, ns, "client-across"), url, serverNS},
		{"within one machine (m2 -> m2)", c.podNS(b, ns, "client-within"), url, serverNS},
		{"  across (a -> b, VXLAN)", raw.across, raw.url, raw.server},
		{"  within (b -> b)", raw.within, raw.url, raw.server},
	}
	for _, s := range sides[:2] {
		eventually(b, 30*time.Second, s.name+": the server answering", func() (bool, string) {
			conn, err := netns.Dial(s.ns, "tcp", net.JoinHostPort(server.Status.PodIP, "8080"), 2*time.Second)
			if err != nil {
				return false, err.Error()
			}
			conn.Close()
			return true, ""
		})
	}
	// A short run on each side first, not counted: the first connections of a path
	// resolve neighbours and fill caches.
	for _, s := range sides {
		if _, _, err := (benchcluster.Wrk{Bin: wrk, NS: s.ns, Threads: p2pThreads, Conns: p2pConns, Duration: "1s"}).Run(s.url); err != nil {
			b.Fatalf("%s (warm-up): %v", s.name, err)
		}
	}
	runFor, err := time.ParseDuration(p2pRunFor)
	if err != nil {
		b.Fatal(err)
	}
	load := loadAvg()
	var rps, cpu [4][]float64
	var ratios, rawRatios, cpuRatios, rawCPURatios []float64
	var errs []string
	b.ResetTimer()
	for r := range p2pRounds {
		order := []int{0, 1, 2, 3}
		if r%2 == 1 {
			order = []int{3, 2, 1, 0}
		}
		var round, roundCPU [4]float64
		for _, i := range order {
			meter := cpuMeter{serverNS: sides[i].serverNS}
			c0, s0 := meter.read()
			got, e, err := benchcluster.Wrk{Bin: wrk, NS: sides[i].ns, Threads: p2pThreads, Conns: p2pConns, Duration: p2pRunFor}.Run(sides[i].url)
			if err != nil {
				b.Fatalf("%s: %v", sides[i].name, err)
			}
			c1, s1 := meter.read()
			if e != "" {
				errs = append(errs, sides[i].name+": "+e)
			}
			round[i] = got
			rps[i] = append(rps[i], got)
			// CPU µs per request of wrk and the server (requests: req/s times the run's length).
			roundCPU[i] = (c1 - c0 + s1 - s0) / (got * runFor.Seconds()) * 1e6
			cpu[i] = append(cpu[i], roundCPU[i])
		}
		ratios = append(ratios, round[0]/round[1])
		rawRatios = append(rawRatios, round[2]/round[3])
		// Requests per CPU second, across / within: the inverse ratio of the costs.
		cpuRatios = append(cpuRatios, roundCPU[1]/roundCPU[0])
		rawCPURatios = append(rawCPURatios, roundCPU[3]/roundCPU[2])
	}
	b.StopTimer()
	ratio, rawRatio := benchcluster.Median(ratios), benchcluster.Median(rawRatios)
	cpuRatio, rawCPURatio := benchcluster.Median(cpuRatios), benchcluster.Median(rawCPURatios)
	b.ReportMetric(benchcluster.Median(rps[0]), "across-req/s")
	b.ReportMetric(benchcluster.Median(rps[1]), "within-req/s")
	b.ReportMetric(ratio, "across/within")
	b.ReportMetric(rawRatio, "raw-across/within")
	b.ReportMetric(cpuRatio, "cpu-across/within")
	b.ReportMetric(rawCPURatio, "raw-cpu-across/within")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "pod to pod by pod IP, wrk -t%s -c%s -d%s keep-alive, median of %d rounds\treq/s\tCPU us/req\truns (req/s)\tCPU us/req (wrk + server)\n", p2pThreads, p2pConns, p2pRunFor, p2pRounds)
	row := func(name string, i int) {
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%s\t%s\n", name, benchcluster.Median(rps[i]), benchcluster.Median(cpu[i]), fmtRuns(rps[i], "%.0f"), fmtRuns(cpu[i], "%.1f"))
	}
	ratioRow := func(name string, rps, cpu float64, rpsRuns, cpuRuns []float64) {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%s\t%s\n", name, rps, cpu, fmtRuns(rpsRuns, "%.3f"), fmtRuns(cpuRuns, "%.3f"))
	}
	row(sides[0].name, 0)
	row(sides[1].name, 1)
	ratioRow("across / within (median of the rounds' ratios; CPU: within's / across's)", ratio, cpuRatio, ratios, cpuRatios)
	fmt.Fprintf(tw, "goal\t>= %.2f\t\t\t\n", p2pGoal)
	fmt.Fprintf(tw, "peer: the same paths built with ip alone, no netfilter\t\t\t\t\n")
	row(sides[2].name, 2)
	row(sides[3].name, 3)
	ratioRow("  across / within", rawRatio, rawCPURatio, rawRatios, rawCPURatios)
	ratioRow("tranche's ratio / the kernel path's", ratio/rawRatio, cpuRatio/rawCPURatio, nil, nil)
	tw.Flush()
	for _, e := range errs {
		fmt.Printf("  wrk reported %s\n", e)
	}
	fmt.Printf("  load average before: %s, after: %s\n\n", load, loadAvg())
}

func fmtRuns(v []float64, format string) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf(format, x))
	}
	return strings.Join(s, " ")
}

// BenchmarkMachinesFailover measures how long the controllers are away when the elected
// server goes: two `tranche server` over one etcd (as TestElectedControlPlane), the
// controller manager's leader stopped, and a Service created through the other at once;
// from the stop until the kube-controller-manager Lease names the other server, and
// until that Service's EndpointSlice (the new leader's first controller write) exists.
// Twice: SIGKILL (the lease must expire: the figure to read beside the lease duration),
// then, after the killed server came back, SIGTERM of the leader (it releases its lease).
func BenchmarkMachinesFailover(b *testing.B) {
	servers, clients := twoHAServers(b, "bf", 31)
	ns := "bench-failover"
	if _, err := clients[0].CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	// The controllers run: a first Service gets its EndpointSlice.
	if _, err := clients[0].CoreV1().Services(ns).Create(context.Background(), makeService("before"), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	eventually(b, 60*time.Second, "the first Service's EndpointSlice", func() (bool, string) { return failoverSlice(clients[0], ns, "before") })

	type result struct {
		how               string
		takeover, written time.Duration
	}
	var results []result
	load := loadAvg()
	b.ResetTimer()
	for _, how := range []string{"SIGKILL", "SIGTERM"} {
		var li int
		eventually(b, 60*time.Second, "a controller-manager leader", func() (bool, string) {
			h := leaseHolder(clients[0], "kube-controller-manager")
			for i, s := range servers {
				if strings.HasPrefix(h, s.host+"_") {
					li = i
					return true, h
				}
			}
			return false, h
		})
		leader, survivor, sc := servers[li], servers[1-li], clients[1-li]
		svc := "after-" + strings.ToLower(how)
		stopped := time.Now()
		if how == "SIGKILL" {
			leader.kill()
		} else if err := leader.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			b.Fatal(err)
		}
		if _, err := sc.CoreV1().Services(ns).Create(context.Background(), makeService(svc), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		var r result
		r.how = how
		deadline := time.Now().Add(90 * time.Second)
		for r.takeover == 0 || r.written == 0 {
			if time.Now().After(deadline) {
				b.Fatalf("%s of %s: no takeover and first write by %s within 90s", how, leader.host, survivor.host)
			}
			if r.takeover == 0 && strings.HasPrefix(leaseHolder(sc, "kube-controller-manager"), survivor.host+"_") {
				r.takeover = time.Since(stopped)
			}
			if ok, _ := failoverSlice(sc, ns, svc); ok && r.written == 0 {
				r.written = time.Since(stopped)
			}
			time.Sleep(20 * time.Millisecond)
		}
		results = append(results, r)
		if how == "SIGKILL" {
			// Back to two servers for the next round.
			b.StopTimer()
			if err := leader.startWithHostname(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		} else {
			<-leader.done
		}
	}
	b.StopTimer()
	b.ReportMetric(results[0].written.Seconds(), "kill-write-s")
	b.ReportMetric(results[1].written.Seconds(), "term-write-s")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "elected server stopped, 2 servers, 1 etcd\tlease taken over\tfirst controller write\tlease duration\n")
	for _, r := range results {
		what := "SIGKILL (the lease expires)"
		if r.how == "SIGTERM" {
			what = "SIGTERM (the lease is released)"
		}
		fmt.Fprintf(tw, "%s\t%.2f s\t%.2f s\t15 s (renew deadline 10 s, retry 2 s)\n", what, r.takeover.Seconds(), r.written.Seconds())
	}
	tw.Flush()
	fmt.Printf("  goal (issue 22): takeover within the lease duration + 2 s after a kill.\n  load average before: %s, after: %s\n\n", load, loadAvg())
}

// failoverSlice says whether the Service name has its EndpointSlice.
func failoverSlice(c kubernetes.Interface, ns, name string) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sl, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return false, err.Error()
	}
	return len(sl.Items) == 1, fmt.Sprintf("%d slices", len(sl.Items))
}
