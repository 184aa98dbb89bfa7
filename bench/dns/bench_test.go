// Package dns benchmarks tranche's cluster DNS with dnsperf (Debian package dnsperf)
// on loopback: a server over a fake cache of 1,000 Services answers cluster names and
// external names from its forwarding cache. It prints queries per second per core
// (queries answered / the server's CPU seconds, so the figure holds on a busy machine)
// beside the goal of 17,000, latency, and memory beside the goal of
// (pods + services)/1000 + 20 MB. Run: go test -run '^$' -bench . -benchtime 1x ./bench/dns/
package dns

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trdns "github.com/tranche/tranche/internal/dns"
)

const (
	services      = 1000
	headlessEvery = 10 // one Service in ten is headless with endpointsEach endpoints
	endpointsEach = 3
	namespaces    = 50
	pods          = 3000
	externalNames = 1000
	runSeconds    = 5
	goalQPSCore   = 17000.0
)

func BenchmarkDNS(b *testing.B) {
	perf, err := exec.LookPath("dnsperf")
	if err != nil {
		b.Fatal("dnsperf is required (Debian package dnsperf; make deps installs it)")
	}
	for range b.N {
		run(b, perf)
	}
}

func run(b *testing.B, perf string) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	cache := fakeCache(b)
	up := fakeUpstream(b)
	h, err := trdns.NewHandler(trdns.Config{Zone: "cluster.local", Upstreams: []string{up}, Logger: nil}, cache)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)

	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = trdns.Serve(ctx, h, pc, nil); close(done) }()
	defer func() { cancel(); <-done }()
	addr := pc.LocalAddr().(*net.UDPAddr)

	dir := b.TempDir()
	var cluster, external []string
	for i := range services {
		cluster = append(cluster, fmt.Sprintf("svc-%d.ns-%d.svc.cluster.local A", i, i%namespaces))
	}
	for i := range externalNames {
		external = append(external, fmt.Sprintf("host-%d.example.com A", i))
	}
	// Every external name is in the cache before the run: the figure is the cache's.
	c := &dns.Client{Timeout: 2 * time.Second}
	for _, q := range external {
		name, _, _ := strings.Cut(q, " ")
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), dns.TypeA)
		if _, _, err := c.Exchange(m, addr.String()); err != nil {
			b.Fatal(err)
		}
	}
	type figure struct {
		name                       string
		qps, perCore, latency, cpu float64
		lost                       string
	}
	var figs []figure
	for _, sc := range []struct {
		name  string
		lines []string
	}{{"cluster names (A, 1,000 Services)", cluster}, {"external names (forwarding cache)", external}} {
		file := filepath.Join(dir, strconv.Itoa(len(figs))+".txt")
		if err := os.WriteFile(file, []byte(strings.Join(sc.lines, "\n")+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		cpu0 := cpuSeconds()
		out, err := exec.Command(perf, "-s", "127.0.0.1", "-p", strconv.Itoa(addr.Port), "-d", file,
			"-l", strconv.Itoa(runSeconds), "-c", "8", "-T", "1", "-q", "256").CombinedOutput()
		cpu := cpuSeconds() - cpu0
		if err != nil {
			b.Fatalf("dnsperf: %v\n%s", err, out)
		}
		completed := field(b, out, `Queries completed:\s+(\d+)`)
		figs = append(figs, figure{name: sc.name, qps: field(b, out, `Queries per second:\s+([\d.]+)`),
			perCore: completed / cpu, latency: field(b, out, `Average Latency \(s\):\s+([\d.]+)`) * 1e3, cpu: cpu,
			lost: strings.TrimSpace(regexp.MustCompile(`Queries lost:\s+(.*)`).FindStringSubmatch(string(out))[1])})
	}
	heap := float64(after.HeapInuse) / 1e6
	cacheHeap := float64(after.HeapInuse-min(before.HeapInuse, after.HeapInuse)) / 1e6
	limit := float64(pods+services)/1000 + 20
	anon, file := rssMB("RssAnon"), rssMB("RssFile")

	var t strings.Builder
	fmt.Fprintf(&t, "\ntranche dns, dnsperf %ds per scenario on loopback, %d CPUs (machine load: %s)\n", runSeconds, runtime.NumCPU(), loadavg())
	fmt.Fprintf(&t, "%-36s %12s %14s %10s %10s %12s %s\n", "scenario", "QPS (wall)", "QPS per core", "goal", "ratio", "avg latency", "lost")
	for _, f := range figs {
		fmt.Fprintf(&t, "%-36s %12.0f %14.0f %10.0f %9.2fx %10.3fms %s\n", f.name, f.qps, f.perCore, goalQPSCore, f.perCore/goalQPSCore, f.latency, f.lost)
	}
	fmt.Fprintf(&t, "%-36s %12s %14s %10s %10s\n", "memory", "", "", "limit", "ratio")
	fmt.Fprintf(&t, "%-36s %12s %12.1fMB %8.1fMB %9.2fx\n", "  Go heap in use (whole process)", "", heap, limit, heap/limit)
	fmt.Fprintf(&t, "%-36s %12s %12.1fMB %8.1fMB %9.2fx\n", "  of which the cache and handler", "", cacheHeap, limit, cacheHeap/limit)
	fmt.Fprintf(&t, "%-36s %12s %12.1fMB %8.1fMB %9.2fx\n", "  RSS, anonymous (own memory)", "", anon, limit, anon/limit)
	fmt.Fprintf(&t, "%-36s %12s %12.1fMB %10s\n", "  RSS, file (binary, shared)", "", file, "")
	fmt.Fprintf(&t, "(%d Services in %d namespaces, one in %d headless with %d endpoints, %d pods; limit = (pods + services)/1000 + 20 MB)\n",
		services, namespaces, headlessEvery, endpointsEach, pods)
	fmt.Print(t.String())
	b.ReportMetric(figs[0].perCore, "cluster-qps/core")
	b.ReportMetric(figs[1].perCore, "external-qps/core")
	b.ReportMetric(anon, "rss-anon-MB")
}

func field(b *testing.B, out []byte, re string) float64 {
	m := regexp.MustCompile(re).FindSubmatch(out)
	if m == nil {
		b.Fatalf("dnsperf output has no %s:\n%s", re, out)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// cpuSeconds is the user and system CPU time of this process (the server; dnsperf
// is another process).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// rssMB is a line of /proc/self/status in MB: RssAnon is the process's own memory,
// RssFile the pages of the binary it touched (shared with every tranche process).
func rssMB(field string) float64 {
	data, _ := os.ReadFile("/proc/self/status")
	m := regexp.MustCompile(field + `:\s+(\d+) kB`).FindSubmatch(data)
	if m == nil {
		return 0
	}
	kb, _ := strconv.ParseFloat(string(m[1]), 64)
	return kb / 1000
}

func loadavg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func fakeCache(b *testing.B) *trdns.Fake {
	f := trdns.NewFake()
	for n := range namespaces {
		if err := f.Add(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns-%d", n)}}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range services {
		ns := fmt.Sprintf("ns-%d", i%namespaces)
		svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("svc-%d", i)},
			Spec: v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}}}
		ip := fmt.Sprintf("10.96.%d.%d", 1+i/250, 1+i%250)
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = ip, []string{ip}
		slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc.Name + "-a",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}}, AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080)), Protocol: ptr.To(v1.ProtocolTCP)}}}
		if i%headlessEvery == 0 {
			svc.Spec.ClusterIP, svc.Spec.ClusterIPs = v1.ClusterIPNone, []string{v1.ClusterIPNone}
		}
		for e := range endpointsEach {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.244.%d.%d", (i*endpointsEach+e)/250, 1+(i*endpointsEach+e)%250)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		if err := f.Add(svc, slice); err != nil {
			b.Fatal(err)
		}
	}
	for p := range pods {
		ip := fmt.Sprintf("10.244.%d.%d", p/250, 1+p%250)
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", p%namespaces), Name: fmt.Sprintf("pod-%d", p)},
			Status: v1.PodStatus{PodIP: ip, PodIPs: []v1.PodIP{{IP: ip}}}}
		if err := f.Add(pod); err != nil {
			b.Fatal(err)
		}
	}
	return f
}

// fakeUpstream answers host-N.example.com with an address and a one-hour TTL.
func fakeUpstream(b *testing.B) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		rr, _ := dns.NewRR(r.Question[0].Name + " 3600 IN A 192.0.2.1")
		m.Answer = []dns.RR{rr}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = s.ActivateAndServe() }()
	b.Cleanup(func() { _ = s.Shutdown() })
	return pc.LocalAddr().String()
}
