package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/tranche/tranche/internal/netns"
	"github.com/tranche/tranche/internal/proxy"
	"github.com/tranche/tranche/internal/testutil"
)

const (
	// endpointsPerService is the shape: every service has 10 endpoints, one per
	// node, so this node has one local endpoint per service.
	endpointsPerService = 10
	// adds is how many services are added one by one on top of the largest table.
	adds = 20
)

// Goals (issue 7).
const (
	goalRatio     = 1.5
	goalFull10k   = 3 * time.Second
	goalAddOne10k = 30 * time.Millisecond
)

// sizes are the service counts of the full-sync comparison.
var sizes = []int{1000, 10000}

// nsPrefix keeps this run's namespaces apart from any other's.
var nsPrefix = fmt.Sprintf("bp%03d-", os.Getpid()%1000)

// row is one size's figures: wall-clock times, and the CPU times (user and system, of
// this process and of the nft it runs) that a loaded machine disturbs less.
type row struct {
	services                  int
	sync, nftLoad, kubeProxy  time.Duration
	syncCPU, nftLoadCPU       time.Duration
	ourChains, kubeProxyChain int
}

// cpuTime returns the CPU time used so far by this process and by its children that
// have been waited for.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			b.Fatal(err)
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}

// BenchmarkProxy programs N services × 10 endpoints from scratch into a fresh network
// namespace through the Proxier and real nft, and compares that sync with the time
// `nft -f` alone takes to load the very ruleset it produced (dumped from the kernel),
// and with the time `nft -f` takes to load a kube-proxy-shaped ruleset (a chain per
// service and one per endpoint) for the same services. Then it adds one service at a
// time to the largest table. Run it as root with -benchtime 1x (see README.md).
func BenchmarkProxy(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("the proxy benchmark needs root: it creates network namespaces and runs nft")
	}
	var rows []row
	var addTimes []time.Duration
	var resync row
	for _, n := range sizes {
		b.Run(fmt.Sprintf("full-sync/services=%d", n), func(b *testing.B) {
			r, p, ns := fullSync(b, n)
			rows = append(rows, r)
			b.ReportMetric(r.sync.Seconds(), "sync-s")
			b.ReportMetric(r.sync.Seconds()/r.nftLoad.Seconds(), "x-nft-load")
			b.ReportMetric(r.syncCPU.Seconds()/r.nftLoadCPU.Seconds(), "x-nft-load-cpu")
			b.ReportMetric(r.sync.Seconds()/r.kubeProxy.Seconds(), "x-kube-proxy-shape")
			if n == sizes[len(sizes)-1] {
				b.Run("add-one-service", func(b *testing.B) {
					addTimes = addOneTimes(b, ns, p, n)
					b.ReportMetric(float64(median(addTimes).Microseconds())/1000, "median-ms")
				})
				b.Run("full-resync", func(b *testing.B) {
					resync = fullResync(b, ns, n+adds)
					b.ReportMetric(resync.sync.Seconds(), "sync-s")
				})
			}
		})
	}
	printReport(os.Stdout, rows, addTimes, resync)
}

// inNS runs fn on a thread inside ns, so that the nft processes it starts are there.
func inNS(b *testing.B, ns string, fn func() error) {
	b.Helper()
	if err := netns.Do(ns, fn); err != nil {
		b.Fatal(err)
	}
}

// newNS creates a namespace removed when the benchmark ends.
func newNS(b *testing.B, name string) string {
	b.Helper()
	return testutil.NetnsNamed(b, nsPrefix+name)
}

// nftIn runs `nft args...` inside ns with stdin and returns its output, duration and
// CPU time.
func nftIn(b *testing.B, ns string, stdin io.Reader, args ...string) (string, time.Duration, time.Duration) {
	b.Helper()
	var out, errb bytes.Buffer
	var took, cpu time.Duration
	inNS(b, ns, func() error {
		cmd := exec.Command("nft", args...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
		start := time.Now()
		err := cmd.Run()
		took = time.Since(start)
		if cmd.ProcessState != nil {
			cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		if err != nil {
			return fmt.Errorf("nft %s: %v: %s", strings.Join(args, " "), err, tail(errb.String()))
		}
		return nil
	})
	return out.String(), took, cpu
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}

// config is the node the benchmark programs: node-0 of a cluster whose endpoints come
// from a pod range large enough for 100,000 of them.
func config() proxy.Config {
	return proxy.Config{
		NodeName:    "node-0",
		ClusterCIDR: netip.MustParsePrefix("10.128.0.0/9"),
		ServiceCIDR: netip.MustParsePrefix("10.96.0.0/12"),
	}
}

// clusterIP and endpointIP number services and endpoints without collisions.
func clusterIP(i int) string { return fmt.Sprintf("10.96.%d.%d", 1+i/250, 1+i%250) }
func endpointIP(i, j int) netip.Addr {
	v := 10<<24 | 128<<16 | uint32(i*endpointsPerService+j+1)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func service(i int) (*v1.Service, *discoveryv1.EndpointSlice) {
	name := fmt.Sprintf("s%d", i)
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP(i),
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "bench", Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for j := range endpointsPerService {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{endpointIP(i, j).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(fmt.Sprintf("node-%d", j)),
		})
	}
	return svc, slice
}

// fullSync measures one size and returns its row with the proxier and namespace, whose
// table the add-one-service benchmark builds on.
func fullSync(b *testing.B, n int) (row, *proxy.Proxier, string) {
	p, ns := nftProxier(b, fmt.Sprintf("ours-%d", n))
	feed(p, 0, n)
	r := row{services: n}
	r.sync, r.syncCPU = timedSync(b, ns, p)

	// The kernel's limit: nft alone loading the same final ruleset into an empty namespace.
	dump, _, _ := nftIn(b, ns, nil, "list", "table", "ip", proxy.TableName)
	r.ourChains = strings.Count(dump, "\n\tchain ")
	empty := newNS(b, fmt.Sprintf("load-%d", n))
	_, r.nftLoad, r.nftLoadCPU = nftIn(b, empty, strings.NewReader(dump), "-f", "-")

	// The peer: kube-proxy's shape, a chain per service and a chain per endpoint.
	kp := newNS(b, fmt.Sprintf("kp-%d", n))
	ruleset, chains := kubeProxyShape(n)
	r.kubeProxyChain = chains
	_, r.kubeProxy, _ = nftIn(b, kp, strings.NewReader(ruleset), "-f", "-")
	if err := netns.Delete(kp); err != nil {
		b.Error(err)
	}
	if err := netns.Delete(empty); err != nil {
		b.Error(err)
	}
	return r, p, ns
}

// kubeProxyShape writes a ruleset shaped like kube-proxy's nftables mode for n services
// of endpointsPerService endpoints: a verdict map from ClusterIP to a per-service chain
// that picks a per-endpoint chain at random, which masquerades hairpin traffic and
// DNATs. It returns the ruleset and its chain count.
func kubeProxyShape(n int) (string, int) {
	var sb strings.Builder
	sb.WriteString("table ip kube-proxy {\n")
	sb.WriteString("\tmap service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }\n")
	sb.WriteString("\tchain mark-for-masquerade { meta mark set meta mark or 0x4000 ; }\n")
	sb.WriteString("\tchain services { ip daddr . meta l4proto . th dport vmap @service-ips ; }\n")
	sb.WriteString("\tchain nat-prerouting { type nat hook prerouting priority dstnat ; jump services ; }\n")
	chains := 4
	for i := range n {
		svc := fmt.Sprintf("service-%d-bench/s%d/tcp/http", i, i)
		var targets []string
		for j := range endpointsPerService {
			ep := fmt.Sprintf("endpoint-%d-%d-bench/s%d/tcp/http__%s/8080", i, j, i, endpointIP(i, j))
			fmt.Fprintf(&sb, "\tchain %s {\n\t\tip saddr %s jump mark-for-masquerade\n\t\tmeta l4proto tcp dnat to %s:8080\n\t}\n", ep, endpointIP(i, j), endpointIP(i, j))
			targets = append(targets, fmt.Sprintf("%d : goto %s", j, ep))
			chains++
		}
		fmt.Fprintf(&sb, "\tchain %s {\n\t\tip daddr %s tcp dport 80 ip saddr != 10.128.0.0/9 jump mark-for-masquerade\n\t\tnumgen random mod %d vmap { %s }\n\t}\n",
			svc, clusterIP(i), endpointsPerService, strings.Join(targets, ", "))
		chains++
	}
	sb.WriteString("}\n")
	for i := range n {
		fmt.Fprintf(&sb, "add element ip kube-proxy service-ips { %s . tcp . 80 : goto service-%d-bench/s%d/tcp/http }\n", clusterIP(i), i, i)
	}
	return sb.String(), chains
}

// fullResync starts a new proxier over the table of ns, which holds n services, and
// times its first sync: a full sync over an existing table, as after an agent restart
// or the hourly resync.
func fullResync(b *testing.B, ns string, n int) row {
	var nft knftables.Interface
	inNS(b, ns, func() error {
		var err error
		nft, err = proxy.NewKernel()
		return err
	})
	p, err := proxy.NewProxier(nft, proxy.ProxierConfig{Config: config(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	feed(p, 0, n)
	r := row{services: n}
	r.sync, r.syncCPU = timedSync(b, ns, p)
	return r
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func printReport(w io.Writer, rows []row, addTimes []time.Duration, resync row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "services×%d\tour full sync\tnft -f of its ruleset (limit)\tratio (goal <= %.1f)\tsync CPU\tnft -f CPU\tCPU ratio\tkube-proxy shape nft -f\tours / kube-proxy shape\tour chains\tkube-proxy shape chains\t\n", endpointsPerService, goalRatio)
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.2f\t%s\t%s\t%.2f\t%s\t%.3f\t%d\t%d\t\n", r.services, r.sync.Round(time.Millisecond), r.nftLoad.Round(time.Millisecond),
			r.sync.Seconds()/r.nftLoad.Seconds(), r.syncCPU.Round(time.Millisecond), r.nftLoadCPU.Round(time.Millisecond), r.syncCPU.Seconds()/r.nftLoadCPU.Seconds(),
			r.kubeProxy.Round(time.Millisecond), r.sync.Seconds()/r.kubeProxy.Seconds(), r.ourChains, r.kubeProxyChain)
	}
	_ = tw.Flush()
	if len(rows) > 0 {
		last := rows[len(rows)-1]
		fmt.Fprintf(w, "full sync of %d services: %s, goal %s (ratio to goal %.2f)\n", last.services, last.sync.Round(time.Millisecond), goalFull10k, last.sync.Seconds()/goalFull10k.Seconds())
		if resync.services > 0 {
			fmt.Fprintf(w, "full resync of %d services over the existing table (restart, hourly): %s, CPU %s; ratio to the nft -f load above %.2f, CPU %.2f\n",
				resync.services, resync.sync.Round(time.Millisecond), resync.syncCPU.Round(time.Millisecond),
				resync.sync.Seconds()/last.nftLoad.Seconds(), resync.syncCPU.Seconds()/last.nftLoadCPU.Seconds())
		}
	}
	if len(addTimes) > 0 {
		s := slices.Clone(addTimes)
		slices.Sort(s)
		fmt.Fprintf(w, "add one service to %d: median %s, max %s over %d adds; goal %s (median / goal %.2f)\n", sizes[len(sizes)-1],
			median(s).Round(10*time.Microsecond), s[len(s)-1].Round(10*time.Microsecond), len(s), goalAddOne10k, median(s).Seconds()/goalAddOne10k.Seconds())
	}
}
