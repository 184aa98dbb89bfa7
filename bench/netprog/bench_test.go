package netprog

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/bench/benchcluster"
)

const (
	// nodes is the cluster's size; changes is how many times the pod turns Ready.
	nodes      = 3
	changes    = 200
	metricName = "kubeproxy_network_programming_duration_seconds"
)

// BenchmarkNetworkProgramming measures network programming latency on a fresh
// `tranche up --nodes 3`: a Service whose only endpoint is one pod, turned Ready and
// unready 200 times through a readiness gate. For each change it times, from the moment
// a watch sees the pod Ready, until a TCP connection to the ClusterIP from every node's
// namespace is accepted by the pod (and, the other way, from Ready=False until every
// node is refused). It prints p50/p99 beside the goal, and beside them the proxies' own
// kubeproxy_network_programming_duration_seconds over the same changes.
func BenchmarkNetworkProgramming(b *testing.B) {
	bin := benchcluster.NeedRoot(b, "bench/netprog")
	c := benchcluster.Start(b, bin, "bn", nodes)
	client := c.Client(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	ns := "netprog"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	target := StartTarget(b, ctx, client, ns, "")

	var pollers []*Poller
	for i := 1; i <= nodes; i++ {
		nsName := c.NodeNS(fmt.Sprintf("tranche-%d", i))
		p, err := NewPoller(nsName, nsName, target.Addr)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		pollers = append(pollers, p)
	}
	// Nothing answers yet: every node refuses.
	if _, err := UntilAll(pollers, false); err != nil {
		b.Fatal(err)
	}
	before := scrapeAll(b, c)

	b.ResetTimer()
	got := target.Measure(b, ctx, pollers, changes)
	b.StopTimer()
	toReady, toUnready, perNode := got.ToReady, got.ToUnready, got.ReadyFrom(0, nodes)
	after := scrapeAll(b, c)
	var metric histogram
	for i := range after {
		metric = metric.add(after[i].sub(before[i]))
	}

	p50, p99 := Percentile(toReady, 50), Percentile(toReady, 99)
	b.ReportMetric(p50.Seconds()*1000, "p50-ms")
	b.ReportMetric(p99.Seconds()*1000, "p99-ms")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "network programming, %d changes on %d nodes\tp50\tp99\tmax\tgoal p99\tp99 / goal\n", changes, nodes)
	Row(tw, "pod Ready -> ClusterIP reaches it from every node", toReady, GoalP99)
	Row(tw, "  the same, each node on its own", perNode, GoalP99)
	Row(tw, "pod unready -> every node refused", toUnready, GoalP99)
	fmt.Fprintf(tw, "kubeproxy_network_programming_duration_seconds (%d nodes, %.0f observations)\t%s\t%s\t-\t-\t-\n",
		nodes, metric.count, sec(metric.quantile(0.5)), sec(metric.quantile(0.99)))
	tw.Flush()
	fmt.Printf("  metric mean %s; its p50/p99 are interpolated inside its buckets (1 ms x 2^k). It is measured from the\n"+
		"  slices' last-change-trigger-time, the pod's Ready transition time, which the API keeps to the second:\n"+
		"  it includes up to 1 s of that rounding, and a change in the same second as the pod's previous one gets\n"+
		"  no trigger time (so no observation). It is shown for reference, not comparable with the rows above.\n", sec(metric.sum/metric.count))
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	var names []string
	for i := 1; i <= nodes; i++ {
		names = append(names, fmt.Sprintf("tranche-%d", i))
	}
	Slowest(tw, got, names, 5)
	tw.Flush()
	if got.Early > 0 {
		fmt.Printf("  %d changes reached every node before the benchmark's watch saw the pod change (counted as 0).\n", got.Early)
	}
	fmt.Println()
}

// scrapeAll reads the programming-latency histogram of every node's proxy.
func scrapeAll(b *testing.B, c *benchcluster.Cluster) []histogram {
	b.Helper()
	var hs []histogram
	for i := 1; i <= nodes; i++ {
		h, err := scrapeHistogram(c.NodeNS(fmt.Sprintf("tranche-%d", i)), metricName)
		if err != nil {
			b.Fatalf("tranche-%d: %v", i, err)
		}
		hs = append(hs, h)
	}
	return hs
}

func sec(s float64) string {
	if math.IsNaN(s) {
		return "-"
	}
	return Ms(time.Duration(s * float64(time.Second)))
}

func nan() float64 { return math.NaN() }
