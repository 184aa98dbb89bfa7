package netpol

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tranche/tranche/bench/benchcluster"
)

const (
	// wrkRounds is how many wrk runs each step makes (the median counts); wrkFor is one
	// run, wrkThreads and wrkConns its load.
	wrkRounds  = 3
	wrkFor     = "4s"
	wrkThreads = "2"
	wrkConns   = "32"
	// selecting is how many policies select the server pod at every step but the first.
	selecting = 10
	// goalRatio is the goal at 100 policies.
	goalRatio = 0.95
)

// BenchmarkPolicyDataPath measures requests/s with wrk from a client pod to a server
// pod on the other node of a fresh `tranche up --nodes 2`, with 0, 100 and 1,000
// NetworkPolicies in the cluster: from 100 on, 10 select the server and admit the
// client (each on its own port list), the rest select pods of another namespace that
// has none, as a cluster's unrelated policies. Keep-alive connections are judged once
// (conntrack lets established flows through); a connection per request pays the
// policy on every request. It prints each step's ratio to the no-policy figure.
func BenchmarkPolicyDataPath(b *testing.B) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Fatal("bench/netpol needs wrk (Debian package wrk; make deps installs it)")
	}
	// The no-policy figure is measured first and again last (every policy deleted), so
	// that a machine that got slower or faster during the run shows.
	most := envInt(b, "NETPOL_BENCH_POLICIES", 1000)
	steps := []int{0, 100, most, 0}
	names := []string{"0 policies", "100 policies", fmt.Sprintf("%d policies", most), "0 again"}
	e := start(b, "bnd", 2, "netpol")
	e.namespace(b, "others")
	server := e.pod(b, "server", "tranche-2", map[string]string{"app": "srv"}, true)
	client := e.pod(b, "client", "tranche-1", map[string]string{"role": "client"}, false)
	stranger := e.pod(b, "stranger", "tranche-1", map[string]string{"role": "stranger"}, false)
	target := hostPort(server.Status.PodIP, 8080)
	clientNS := e.podNS(client)
	waitReach(b, clientNS, target, true)
	// wrk closes each connection of a connection-per-request run first, so its ports
	// stay in TIME_WAIT for 60 s, and 28,000 of them (the whole ephemeral range) after
	// one 4 s run: the next runs' connect() then spends its time searching for a free
	// port (wrk at 170% CPU, mostly system) and fell to 500-2,000 req/s whatever the
	// policies. Reusing TIME_WAIT ports for new connections (the client pod's own
	// namespace, which the benchmark made) keeps every run alike.
	if out, err := exec.Command("ip", "netns", "exec", clientNS, "sysctl", "-qw", "net.ipv4.tcp_tw_reuse=1").CombinedOutput(); err != nil {
		b.Fatalf("tcp_tw_reuse in %s: %v: %s", clientNS, err, out)
	}

	scenarios := []struct{ name, header string }{
		{"keep-alive", ""},
		{"a connection per request", "Connection: close"},
	}
	rps := make([][][]float64, len(steps)) // step, scenario, runs
	var notes []string
	created := 0
	b.ResetTimer()
	for si, n := range steps {
		b.StopTimer()
		for ; created < n; created++ {
			e.createPolicy(b, fillerPolicy(e.ns, created))
		}
		if n < created {
			for _, ns := range []string{e.ns, "others"} {
				if err := e.client.NetworkingV1().NetworkPolicies(ns).DeleteCollection(e.ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
					b.Fatalf("deleting the policies of %s: %v", ns, err)
				}
			}
			created = 0
			waitReach(b, e.podNS(stranger), target, true)
		}
		// The engines have written every policy: their sync count stays put.
		waitQuiet(b, e, []string{"tranche-1", "tranche-2"})
		if n > 0 {
			// The 10 selecting policies hold: the client still reaches the server, a
			// pod without the client label no longer does.
			waitReach(b, e.podNS(stranger), target, false)
			waitReach(b, clientNS, target, true)
		}
		b.StartTimer()
		rps[si] = make([][]float64, len(scenarios))
		for r := range wrkRounds {
			for sc := range scenarios {
				// Each run starts from empty conntrack tables, as bench/datapath's: a
				// run opening a connection per request otherwise reuses client ports
				// whose entries from the previous run linger (TIME_WAIT, 120 s), and
				// resolving those clashes, not the policies, sets the pace.
				if err := benchcluster.FlushConntrack(clientNS, e.c.NodeNS("tranche-1"), e.c.NodeNS("tranche-2")); err != nil {
					b.Fatal(err)
				}
				w := benchcluster.Wrk{Bin: wrk, NS: clientNS, Threads: wrkThreads, Conns: wrkConns, Duration: wrkFor, Header: scenarios[sc].header}
				got, errs, err := w.Run("http://" + target + "/hostname")
				if err != nil {
					b.Fatalf("%s, %s: %v", names[si], scenarios[sc].name, err)
				}
				rps[si][sc] = append(rps[si][sc], got)
				if errs != "" {
					notes = append(notes, fmt.Sprintf("%s, %s, run %d: wrk reported %s", names[si], scenarios[sc].name, r+1, errs))
				}
			}
		}
	}
	b.StopTimer()

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "wrk -t%s -c%s -d%s pod to pod across nodes, median of %d\t", wrkThreads, wrkConns, wrkFor, wrkRounds)
	for _, name := range names {
		fmt.Fprintf(tw, "%s\t", name)
	}
	fmt.Fprintf(tw, "100 / 0\t%d / 0\tgoal at 100\n", most)
	for sc, s := range scenarios {
		fmt.Fprintf(tw, "%s req/s\t", s.name)
		for si := range steps {
			fmt.Fprintf(tw, "%.0f\t", benchcluster.Median(rps[si][sc]))
		}
		base := (benchcluster.Median(rps[0][sc]) + benchcluster.Median(rps[3][sc])) / 2
		for si := 1; si <= 2; si++ {
			ratio := benchcluster.Median(rps[si][sc]) / base
			fmt.Fprintf(tw, "%.3f\t", ratio)
			if si == 1 && sc == 1 {
				b.ReportMetric(ratio, "100/0")
			}
		}
		fmt.Fprintf(tw, ">= %.2f\n", goalRatio)
	}
	tw.Flush()
	fmt.Println("  the ratios divide by the mean of the two no-policy figures; every run:")
	for si, name := range names {
		for sc, s := range scenarios {
			fmt.Printf("  %s, %s: %s\n", name, s.name, fmtAll(rps[si][sc]))
		}
	}
	for _, note := range notes {
		fmt.Println("  " + note)
	}
	fmt.Println()
}

// waitQuiet waits until the NetworkPolicy engines of nodes have not synced for a second
// (tranche_networkpolicy_sync_duration_seconds_count unchanged), for up to a minute, so
// that wrk does not share the CPU with a sync of the policies just created.
func waitQuiet(b *testing.B, e *env, nodes []string) {
	b.Helper()
	counts := func() (c []float64) {
		for _, n := range nodes {
			c = append(c, scrapeSumCount(e.c.NodeNS(n), syncMetric)[1])
		}
		return c
	}
	last, since := counts(), time.Now()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		now := counts()
		if !slices.Equal(now, last) {
			last, since = now, time.Now()
		} else if time.Since(since) >= time.Second {
			return
		}
	}
	b.Logf("the engines kept syncing for a minute (sync counts %v)", last)
}

// fillerPolicy is the i-th policy of the cluster: the first `selecting` select the
// server and admit role=client on 8080 (and a port of their own, so that each is a
// distinct rule); the others select app=other-<i> in namespace others, which has no
// pod, with a rule of the same shape.
func fillerPolicy(ns string, i int) *networkingv1.NetworkPolicy {
	if i < selecting {
		np := ingressFrom(ns, fmt.Sprintf("srv-%d", i), map[string]string{"app": "srv"}, map[string]string{"role": "client"}, 8080)
		extra := intstr.FromInt32(int32(9000 + i))
		np.Spec.Ingress[0].Ports = append(np.Spec.Ingress[0].Ports, networkingv1.NetworkPolicyPort{Protocol: np.Spec.Ingress[0].Ports[0].Protocol, Port: &extra})
		return np
	}
	return ingressFrom("others", fmt.Sprintf("other-%d", i), map[string]string{"app": "other-" + strconv.Itoa(i)},
		map[string]string{"role": "client"}, 8080)
}

func fmtAll(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, ", ")
}
