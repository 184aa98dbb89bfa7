package datapath

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/internal/netns"
	"github.com/tranche/tranche/internal/proxy"

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

// dpModes are the proxy modes the data path is measured in; ipvs cannot run on a kernel
// without IP_VS (see bench/proxy's README), which the table says.
var dpModes = []string{proxy.ModeNFTables, proxy.ModeIPTables}

// modeResult is one proxy mode's figures: per scenario, the requests/s of each round to
// the pod IP ([0]) and the ClusterIP ([1]), and what wrk reported as errors.
type modeResult struct {
	mode   string
	rps    [][2][]float64
	errors [][]string
}

var scenarios = []scenario{
	{name: "client on the other node, keep-alive", client: "client-far"},
	{name: "client on the server's node, keep-alive", client: "client-near"},
	{name: "client on the other node, a connection per request", client: "client-far", header: "Connection: close"},
}

// BenchmarkDataPath measures requests/s with wrk (Debian's) from one pod's network
// namespace to the built-in netexec server of another pod, straight to its pod IP and
// through its Service's ClusterIP (the proxy's DNAT), in the same run, on a fresh
// `tranche up --nodes 2 --proxy-mode M` for each mode M of dpModes in turn: client on the
// other node or on the same node, keep-alive connections or a new connection per request.
// It prints each mode's ClusterIP / pod IP ratio side by side, beside the goal.
func BenchmarkDataPath(b *testing.B) {
	bin := benchcluster.NeedRoot(b, "bench/datapath")
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Fatal("bench/datapath needs wrk (Debian package wrk; make deps installs it)")
	}
	var results []modeResult
	for _, mode := range dpModes {
		b.Run(mode, func(b *testing.B) {
			r := measureMode(b, bin, wrk, mode)
			results = append(results, r)
			b.ReportMetric(benchcluster.Median(ratios(r.rps[0])), "clusterip/podip")
		})
	}
	printResults(os.Stdout, results)
}

// measureMode starts a cluster whose proxies run mode, checks that its node holds that
// mode's rules, and runs every scenario's rounds.
func measureMode(b *testing.B, bin, wrk, mode string) modeResult {
	tag := map[string]string{proxy.ModeNFTables: "bdn", proxy.ModeIPTables: "bdi"}[mode]
	c := benchcluster.Start(b, bin, tag, 2, "--proxy-mode", mode)
	client := c.Client(b)
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
		// netexec's /healthz answers 200 only once its UDP server runs (412 with
		// --udp-port=-1), so the UDP server keeps its default port.
		makePod("server", "tranche-2", map[string]string{"app": "dp"}, v1.Container{Name: "s",
			Image: "registry.k8s.io/e2e-test-images/agnhost:2.52", Args: []string{"netexec", "--http-port=8080"}}),
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
	nodeNS := []string{c.NodeNS("tranche-1"), c.NodeNS("tranche-2")}
	checkMode(b, mode, nodeNS[0], svc.Spec.ClusterIP)

	res := modeResult{mode: mode, rps: make([][2][]float64, len(scenarios)), errors: make([][]string, len(scenarios))}
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
				if err := benchcluster.FlushConntrack(append([]string{podNS[sc.client]}, nodeNS...)...); err != nil {
					b.Fatal(err)
				}
				rps, errs, err := benchcluster.Wrk{Bin: wrk, NS: podNS[sc.client], Threads: threads, Conns: conns, Duration: runFor, Header: sc.header}.Run("http://" + targets[ti].addr + "/healthz")
				if err != nil {
					b.Fatalf("%s, %s, %s: %v", mode, sc.name, targets[ti].name, err)
				}
				res.rps[i][ti] = append(res.rps[i][ti], rps)
				if errs != "" {
					res.errors[i] = append(res.errors[i], targets[ti].name+": "+errs)
				}
			}
		}
	}
	b.StopTimer()
	return res
}

// checkMode fails unless node's kernel holds the ClusterIP's rules of mode and none of the
// other mode's: the figures must be the mode they are labelled with.
func checkMode(b *testing.B, mode, node, clusterIP string) {
	b.Helper()
	nft, nftErr := exec.Command("ip", "netns", "exec", node, "nft", "list", "table", "ip", proxy.TableName).CombinedOutput()
	ipt, err := exec.Command("ip", "netns", "exec", node, "iptables-save", "-t", "nat").CombinedOutput()
	if err != nil {
		b.Fatalf("iptables-save -t nat in %s: %v: %s", node, err, ipt)
	}
	hasNFT := nftErr == nil && strings.Contains(string(nft), clusterIP)
	hasIPT := strings.Contains(string(ipt), "-d "+clusterIP+"/32")
	if (mode == proxy.ModeNFTables) != hasNFT || (mode == proxy.ModeIPTables) != hasIPT {
		b.Fatalf("node %s of a --proxy-mode %s cluster: ClusterIP %s in table ip %s: %v, in iptables' KUBE-SERVICES: %v", node, mode, clusterIP, proxy.TableName, hasNFT, hasIPT)
	}
}

// printResults prints, per scenario, each mode's pod IP and ClusterIP requests/s and
// their ratio side by side, then every run.
func printResults(w io.Writer, results []modeResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw)
	head := fmt.Sprintf("wrk -t%s -c%s -d%s, median of %d rounds", threads, conns, runFor, rounds)
	for _, r := range results {
		head += fmt.Sprintf("\t%s pod IP req/s\t%s ClusterIP req/s\t%s ClusterIP / pod IP", r.mode, r.mode, r.mode)
	}
	fmt.Fprintf(tw, "%s\tipvs\tgoal\n", head)
	for i, sc := range scenarios {
		line := sc.name
		for _, r := range results {
			line += fmt.Sprintf("\t%.0f\t%.0f\t%.3f", benchcluster.Median(r.rps[i][0]), benchcluster.Median(r.rps[i][1]), benchcluster.Median(ratios(r.rps[i])))
		}
		fmt.Fprintf(tw, "%s\tnot run: no IP_VS\t>= %.2f\n", line, goalRatio)
	}
	tw.Flush()
	for _, r := range results {
		for i, sc := range scenarios {
			fmt.Fprintf(w, "  %s, %s: pod IP %s, ClusterIP %s, ratios %s\n", r.mode, sc.name, fmtAll(r.rps[i][0], "%.0f"), fmtAll(r.rps[i][1], "%.0f"),
				fmtAll(ratios(r.rps[i]), "%.3f"))
			for _, e := range r.errors[i] {
				fmt.Fprintf(w, "  %s, %s: wrk reported %s\n", r.mode, sc.name, e)
			}
		}
	}
	fmt.Fprintln(w)
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
