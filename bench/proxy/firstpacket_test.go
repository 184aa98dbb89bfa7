package proxy

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tranche/tranche/internal/netns"
	"github.com/tranche/tranche/internal/proxy"
)

// Shape of BenchmarkFirstPacket.
const (
	// connects is how many connections each point opens (after fpWarmup unrecorded).
	connects = 2000
	fpWarmup = 50
	// fpPort is where the pod namespace's one listener answers, on every endpoint address.
	fpPort = "8080"
)

// The three namespaces' addresses: client ↔ node on one veth, node ↔ pod on another.
// The endpoint addresses (10.128.0.0/9, config's cluster CIDR) are all local to the pod
// namespace through one local route on its lo.
const (
	fpClientAddr = "192.168.200.1/24"
	fpNodeCAddr  = "192.168.200.2/24"
	fpNodePAddr  = "192.168.201.1/24"
	fpPodAddr    = "192.168.201.2/24"
)

// fpRow is one point of the first-packet table: connect latencies to a ClusterIP.
type fpRow struct {
	mode     string
	services int
	target   string // "worst-placed ..." or "random"
	p50, p99 time.Duration
	samples  int
	// tracked is the node's conntrack entry count after the point: about fpWarmup +
	// samples when every connect was a new connection through the nat hooks.
	tracked string
}

// BenchmarkFirstPacket measures what a new connection to a ClusterIP pays in each mode
// as the number of services grows (-first-packet-sizes, default 100, 1,000, 10,000): a
// client namespace routed through a "node" namespace, whose rules the real proxier of the
// mode programs, to a "pod" namespace answering on every endpoint address. Each connect
// is a new connection (fresh source port, conntrack flushed before each point), so its
// SYN walks the node's nat prerouting rules: the seeds' claim is that iptables' walk grows
// with the services while nftables' verdict map does not. It connects 2,000 times to the
// worst-placed ClusterIP (last in the mode's rules) and 2,000 times to random ones, and
// prints p50 and p99. ipvs cannot run on this kernel (see ipvsEvidence).
func BenchmarkFirstPacket(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("the first-packet benchmark needs root: it creates network namespaces, veths and rules inside them")
	}
	sizes := parseSizes(b, *firstPacketSize)
	var rows []fpRow
	for _, mode := range []string{proxy.ModeNFTables, proxy.ModeIPTables} {
		b.Run(mode, func(b *testing.B) {
			rows = append(rows, firstPacketMode(b, mode, sizes)...)
		})
	}
	printFirstPacket(os.Stdout, rows, ipvsEvidence())
}

// firstPacketMode builds the three namespaces for mode, grows the services through sizes
// and measures each point.
func firstPacketMode(b *testing.B, mode string, sizes []int) []fpRow {
	tag := map[string]string{proxy.ModeNFTables: "fn", proxy.ModeIPTables: "fi"}[mode]
	client, node := fpTopology(b, tag)
	var p proxy.ModeProxier
	var err error
	inNS(b, node, func() error {
		cfg := proxy.ProxierConfig{Config: config(), Registerer: prometheus.NewRegistry()}
		switch mode {
		case proxy.ModeNFTables:
			nft, kerr := proxy.NewKernel()
			if kerr != nil {
				return kerr
			}
			p, err = proxy.NewProxier(nft, cfg)
		case proxy.ModeIPTables:
			ipt, kerr := proxy.NewIPTablesKernel()
			if kerr != nil {
				return kerr
			}
			p, err = proxy.NewIPTablesProxier(ipt, cfg)
		}
		return err
	})
	var rows []fpRow
	have := 0
	for _, n := range sizes {
		if n <= have {
			b.Fatalf("first-packet sizes must grow: %d after %d", n, have)
		}
		feed(p, have, n)
		have = n
		timedSync(b, node, p)
		worst := worstPlaced(b, mode, node, n)
		random := func(r *rand.Rand) string { return clusterIP(r.IntN(n)) }
		for _, t := range []struct {
			name string
			pick func(*rand.Rand) string
		}{
			{fmt.Sprintf("worst-placed (%s)", worst), func(*rand.Rand) string { return worst }},
			{"random", random},
		} {
			lat := connectLatencies(b, client, node, t.pick)
			tracked, err := exec.Command("ip", "netns", "exec", node, "conntrack", "-C").Output()
			if err != nil {
				b.Fatalf("conntrack -C in %s: %v", node, err)
			}
			rows = append(rows, fpRow{mode: mode, services: n, target: t.name, p50: percentile(lat, 0.50), p99: percentile(lat, 0.99),
				samples: len(lat), tracked: strings.TrimSpace(string(tracked))})
			b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, fmt.Sprintf("p99-ms-%d-%s", n, strings.Fields(t.name)[0]))
		}
	}
	return rows
}

// fpTopology creates the client, node and pod namespaces of one mode (removed when the
// benchmark ends, also on failure), wires them and starts the pod's listener.
func fpTopology(b *testing.B, tag string) (client, node string) {
	client, node, pod := newNS(b, tag+"-c"), newNS(b, tag+"-n"), newNS(b, tag+"-p")
	steps := [][]string{
		{"-n", node, "link", "add", "toc", "type", "veth", "peer", "name", "eth0", "netns", client},
		{"-n", node, "link", "add", "top", "type", "veth", "peer", "name", "eth0", "netns", pod},
		{"-n", node, "addr", "add", fpNodeCAddr, "dev", "toc"},
		{"-n", node, "addr", "add", fpNodePAddr, "dev", "top"},
		{"-n", client, "addr", "add", fpClientAddr, "dev", "eth0"},
		{"-n", pod, "addr", "add", fpPodAddr, "dev", "eth0"},
	}
	for _, ns := range []string{client, node, pod} {
		steps = append(steps, []string{"-n", ns, "link", "set", "lo", "up"})
	}
	steps = append(steps,
		[]string{"-n", node, "link", "set", "toc", "up"},
		[]string{"-n", node, "link", "set", "top", "up"},
		[]string{"-n", client, "link", "set", "eth0", "up"},
		[]string{"-n", pod, "link", "set", "eth0", "up"},
		[]string{"-n", client, "route", "add", "default", "via", addrOf(fpNodeCAddr)},
		[]string{"-n", pod, "route", "add", "default", "via", addrOf(fpNodePAddr)},
		[]string{"-n", pod, "route", "add", "local", config().ClusterCIDR.String(), "dev", "lo"},
		[]string{"-n", node, "route", "add", config().ClusterCIDR.String(), "via", addrOf(fpPodAddr)},
	)
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			b.Fatalf("ip %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	if err := netns.SetSysctl(node, "net.ipv4.ip_forward", "1"); err != nil {
		b.Fatal(err)
	}
	ln, err := netns.Listen(pod, "tcp", ":"+fpPort)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err == nil {
				c.Close()
			}
		}
	}()
	return client, node
}

func addrOf(prefix string) string { return strings.Split(prefix, "/")[0] }

// iptServiceRule matches a ClusterIP's rule in KUBE-SERVICES of `iptables-save -t nat`.
var iptServiceRule = regexp.MustCompile(`(?m)^-A KUBE-SERVICES -d ([0-9.]+)/32 .*cluster IP`)

// worstPlaced returns the ClusterIP the mode's rules reach last: for iptables the last
// service rule of KUBE-SERVICES (a linear walk), for nftables the newest service (its
// verdict map is a hash lookup: no place is worse than another).
func worstPlaced(b *testing.B, mode, node string, n int) string {
	if mode != proxy.ModeIPTables {
		return clusterIP(n - 1)
	}
	var out []byte
	inNS(b, node, func() error {
		var err error
		out, err = exec.Command("iptables-save", "-t", "nat").Output()
		return err
	})
	m := iptServiceRule.FindAllSubmatch(out, -1)
	if len(m) == 0 {
		b.Fatalf("no ClusterIP rule in KUBE-SERVICES of iptables-save -t nat:\n%s", tail(string(out)))
	}
	return string(m[len(m)-1][1])
}

// connectLatencies flushes node's conntrack table, then from client opens fpWarmup
// unrecorded and connects recorded TCP connections to pick(r):80, each closed at once
// with a reset (no TIME_WAIT holding the port), and returns the connect times sorted.
func connectLatencies(b *testing.B, client, node string, pick func(*rand.Rand) string) []time.Duration {
	b.Helper()
	if out, err := exec.Command("ip", "netns", "exec", node, "conntrack", "-F").CombinedOutput(); err != nil {
		b.Fatalf("conntrack -F in %s: %v: %s", node, err, out)
	}
	r := rand.New(rand.NewPCG(1, 2))
	lat := make([]time.Duration, 0, connects)
	inNS(b, client, func() error {
		d := net.Dialer{Timeout: 2 * time.Second}
		for i := range fpWarmup + connects {
			addr := net.JoinHostPort(pick(r), "80")
			t0 := time.Now()
			c, err := d.Dial("tcp", addr)
			took := time.Since(t0)
			if err != nil {
				return fmt.Errorf("connect %d to %s: %w", i, addr, err)
			}
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
			if i >= fpWarmup {
				lat = append(lat, took)
			}
		}
		return nil
	})
	slices.Sort(lat)
	return lat
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func printFirstPacket(w io.Writer, rows []fpRow, ipvsWhy string) {
	fmt.Fprintf(w, "\nfirst-packet cost: TCP connect to a ClusterIP through the node's nat rules, client routed through the node (prerouting), %d connects per point\n", connects)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\tservices\ttarget\tconnect p50\tconnect p99\tsamples\tnode conntrack entries after")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%v\t%v\t%d\t%s\n", r.mode, r.services, r.target, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.samples, r.tracked)
	}
	fmt.Fprintf(tw, "%s\t-\t-\tnot measurable here\t-\t0\t-\n", proxy.ModeIPVS)
	_ = tw.Flush()
	fmt.Fprintln(w, "upstream anchor: iptables p99 0.15 ms at 5,000 services, 0.72 ms at 30,000; nftables flat")
	if ipvsWhy != "" {
		fmt.Fprintf(w, "ipvs: %s\n", ipvsWhy)
	}
}
