package datapath

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tranche/tranche/internal/netns"

	"github.com/tranche/tranche/bench/benchcluster"
)

const (
	// rounds is how many times each pair (pod IP, ClusterIP) is measured, the order
	// alternating so that a slow phase of the machine falls on both; the median counts.
	rounds = 3
	// runFor is one wrk run; threads and conns its load.
	runFor  = "4s"
	threads = "2"
	conns   = "32"
	// goalRatio is the goal for ClusterIP / pod IP requests per second.
	goalRatio = 0.95
)

// scenario is one line of the table: where the client runs and how it connects.
type scenario struct {
	name   string
	client string // client pod
	header string // extra wrk header, "" for none
}

// BenchmarkDataPath measures requests/s with wrk (Debian's) from one pod's network
// namespace to the built-in netexec server of another pod, straight to its pod IP and
// through its Service's ClusterIP (the proxy's DNAT), in the same run, on a fresh
// `tranche up --nodes 2`: client on the other node or on the same node, keep-alive
// connections or a new connection per request. It prints each ClusterIP / pod IP ratio
// beside the goal.
func BenchmarkDataPath(b *testing.B) {
	bin := benchcluster.NeedRoot(b, "bench/datapath")
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Fatal("bench/datapath needs wrk (Debian package wrk; make deps installs it)")
	}
	c := benchcluster.Start(b, bin, "bd", 2)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		b.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ns := "datapath"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	svc, err := client.CoreV1().Services(ns).Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "dp"},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": "dp"},
			Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	pods := []*v1.Pod{
		makePod("server", "tranche-2", map[string]string{"app": "dp"}, v1.Container{Name: "s",
			Image: "registry.k8s.io/e2e-test-images/agnhost:2.52", Args: []string{"netexec", "--http-port=8080", "--udp-port=-1"}}),
		makePod("client-far", "tranche-1", nil, v1.Container{Name: "c", Image: "busybox", Command: []string{"sleep", "3600"}}),
		makePod("client-near", "tranche-2", nil, v1.Container{Name: "c", Image: "busybox", Command: []string{"sleep", "3600"}}),
	}
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	podNS, podIP := map[string]string{}, map[string]string{}
	for _, p := range pods {
		got := waitReady(b, ctx, client, ns, p.Name)
		podNS[p.Name] = c.Prefix + "p-" + strings.ReplaceAll(string(got.UID), "-", "")[:12]
		podIP[p.Name] = got.Status.PodIP
	}
	targets := []struct{ name, addr string }{
		{"pod IP", net.JoinHostPort(podIP["server"], "8080")},
		{"ClusterIP", net.JoinHostPort(svc.Spec.ClusterIP, "80")},
	}
	for _, client := range []string{"client-far", "client-near"} {
		for _, t := range targets {
			waitAnswer(b, podNS[client], t.addr)
		}
	}

	scenarios := []scenario{
		{name: "client on the other node, keep-alive", client: "client-far"},
		{name: "client on the server's node, keep-alive", client: "client-near"},
		{name: "client on the other node, a connection per request", client: "client-far", header: "Connection: close"},
	}
	type result struct {
		rps    [2][]float64
		errors []string
	}
	results := make([]result, len(scenarios))
	nodeNS := []string{c.NodeNS("tranche-1"), c.NodeNS("tranche-2")}
	b.ResetTimer()
	for i, sc := range scenarios {
		for r := range rounds {
			order := []int{0, 1}
			if r%2 == 1 {
				order = []int{1, 0}
			}
			for _, ti := range order {
				// Each run starts from empty conntrack tables: a run opening a
				// connection per request otherwise reuses client ports whose
				// entries from the previous run still linger (TIME_WAIT, 120 s),
				// and the DNAT path pays for resolving those clashes.
				if err := flushConntrack(append([]string{podNS[sc.client]}, nodeNS...)); err != nil {
					b.Fatal(err)
				}
				rps, errs, err := runWrk(wrk, podNS[sc.client], "http://"+targets[ti].addr+"/healthz", sc.header)
				if err != nil {
					b.Fatalf("%s, %s: %v", sc.name, targets[ti].name, err)
				}
				results[i].rps[ti] = append(results[i].rps[ti], rps)
				if errs != "" {
					results[i].errors = append(results[i].errors, targets[ti].name+": "+errs)
				}
			}
		}
	}
	b.StopTimer()

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "wrk -t%s -c%s -d%s, median of %d rounds\tpod IP req/s\tClusterIP req/s\tClusterIP / pod IP\tgoal\n", threads, conns, runFor, rounds)
	for i, sc := range scenarios {
		pod, cip := median(results[i].rps[0]), median(results[i].rps[1])
		r := median(ratios(results[i].rps))
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.3f\t>= %.2f\n", sc.name, pod, cip, r, goalRatio)
		if i == 0 {
			b.ReportMetric(r, "clusterip/podip")
		}
	}
	tw.Flush()
	for i, sc := range scenarios {
		fmt.Printf("  %s: pod IP %s, ClusterIP %s, ratios %s\n", sc.name, fmtAll(results[i].rps[0], "%.0f"), fmtAll(results[i].rps[1], "%.0f"),
			fmtAll(ratios(results[i].rps), "%.3f"))
		for _, e := range results[i].errors {
			fmt.Printf("  %s: wrk reported %s\n", sc.name, e)
		}
	}
	fmt.Println()
}

func makePod(name, node string, labels map[string]string, ctr v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: new(int64),
			Containers: []v1.Container{ctr}},
	}
}

// waitReady polls the pod until it is Ready and returns it.
func waitReady(b *testing.B, ctx context.Context, client kubernetes.Interface, ns, name string) *v1.Pod {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.PodIP != "" {
			for _, cond := range p.Status.Conditions {
				if cond.Type == v1.PodReady && cond.Status == v1.ConditionTrue {
					return p
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatalf("pod %s/%s not Ready after a minute", ns, name)
	return nil
}

// waitAnswer polls until a TCP connection from nsName to addr is accepted.
func waitAnswer(b *testing.B, nsName, addr string) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		var conn net.Conn
		if conn, err = netns.Dial(nsName, "tcp4", addr, time.Second); err == nil {
			conn.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("%s not answering from %s: %v", addr, nsName, err)
}

// flushConntrack empties the conntrack table of each of the cluster's namespaces given.
func flushConntrack(names []string) error {
	for _, n := range names {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", n, "conntrack", "-F").CombinedOutput()
		cancel()
		// conntrack -F says so on stderr and exits 0 when it flushed; it fails only
		// when the tool or the namespace is missing.
		if err != nil {
			return fmt.Errorf("conntrack -F in %s: %v: %s", n, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

var (
	reqPerSec    = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	socketErrors = regexp.MustCompile(`(?m)^\s*(Socket errors:.*|Non-2xx or 3xx responses:.*)$`)
)

// runWrk runs wrk in the namespace and returns its requests/s and the error lines it
// printed, if any.
func runWrk(wrk, nsName, url, header string) (float64, string, error) {
	args := []string{"netns", "exec", nsName, wrk, "-t" + threads, "-c" + conns, "-d" + runFor}
	if header != "" {
		args = append(args, "-H", header)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", append(args, url)...).CombinedOutput()
	if err != nil {
		return 0, "", fmt.Errorf("wrk %s in %s: %v\n%s", url, nsName, err, out)
	}
	m := reqPerSec.FindSubmatch(out)
	if m == nil {
		return 0, "", fmt.Errorf("wrk %s in %s printed no Requests/sec:\n%s", url, nsName, out)
	}
	rps, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return 0, "", err
	}
	var errs []string
	for _, e := range socketErrors.FindAllSubmatch(out, -1) {
		errs = append(errs, strings.TrimSpace(string(e[1])))
	}
	return rps, strings.Join(errs, "; "), nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// ratios pairs the runs of each round (made back to back): ClusterIP / pod IP.
func ratios(rps [2][]float64) []float64 {
	out := make([]float64, min(len(rps[0]), len(rps[1])))
	for i := range out {
		out[i] = rps[1][i] / rps[0][i]
	}
	return out
}

func fmtAll(v []float64, format string) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, ", ")
}
