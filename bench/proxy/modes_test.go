package proxy

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/moby/ipvs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tranche/tranche/internal/proxy"
)

// modeSizes are the service counts of BenchmarkProxyModes and BenchmarkFirstPacket
// (`-args -modes-sizes 100,500` for a quick run while developing).
var (
	modeSizes       = flag.String("modes-sizes", "1000,10000", "service counts of BenchmarkProxyModes, comma separated")
	firstPacketSize = flag.String("first-packet-sizes", "100,1000,10000", "service counts of BenchmarkFirstPacket, comma separated")
	iptNFTMax       = flag.Int("iptables-nft-max", 2000, "largest service count BenchmarkProxyModes syncs through iptables' nf_tables backend (see README.md)")
)

// parseSizes reads a comma-separated list of service counts.
func parseSizes(b *testing.B, s string) []int {
	b.Helper()
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("service count %q: want a positive integer", f)
		}
		out = append(out, n)
	}
	return out
}

// modeRow is one mode at one size: its full sync from empty, its kernel interface alone
// loading the final state, and the add-one-service syncs on top.
type modeRow struct {
	mode     string
	services int
	// full and alone are wall-clock times; fullCPU and aloneCPU user + system time
	// of this process and the tools it ran.
	full, fullCPU, alone, aloneCPU time.Duration
	// kernel names what alone measures.
	kernel string
	// noflush and noflushCPU (iptables only) are the same dump restored with
	// --noflush into an empty namespace: how any proxy sharing the nat and filter
	// tables with other software must call iptables-restore (kube-proxy does), which the
	// nf_tables backend makes several times slower than a plain restore.
	noflush, noflushCPU time.Duration
	adds                []time.Duration
	// skipped says why the row was not measured ("" when it was).
	skipped string
}

// BenchmarkProxyModes runs the three proxy modes side by side at each size of
// -modes-sizes (services × 10 endpoints): the real proxier's full sync from empty, the
// mode's kernel interface alone loading the final state into an empty network namespace
// (nft -f of the dumped table; iptables-restore of the iptables-save dump; for ipvs,
// whose kernel module this machine lacks, the fake handle), and adding one service at a
// time, 20 times. Run it as root with -benchtime 1x (see README.md).
func BenchmarkProxyModes(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("the proxy modes benchmark needs root: it creates network namespaces and runs nft and iptables-restore")
	}
	modes := []struct {
		name string
		run  func(*testing.B, int) modeRow
	}{
		{proxy.ModeNFTables, nftablesMode},
		{proxy.ModeIPTables + " (nft backend)", func(b *testing.B, n int) modeRow { return iptablesMode(b, n, iptNFT) }},
		{proxy.ModeIPTables + " (legacy backend)", func(b *testing.B, n int) modeRow { return iptablesMode(b, n, iptLegacy) }},
		{proxy.ModeIPVS, ipvsMode},
	}
	var rows []modeRow
	for _, n := range parseSizes(b, *modeSizes) {
		for _, m := range modes {
			b.Run(fmt.Sprintf("%s/services=%d", strings.ReplaceAll(m.name, " ", "-"), n), func(b *testing.B) {
				r := m.run(b, n)
				r.mode, r.services = m.name, n
				rows = append(rows, r)
				if r.skipped != "" {
					return
				}
				b.ReportMetric(r.full.Seconds(), "full-sync-s")
				b.ReportMetric(r.full.Seconds()/r.alone.Seconds(), "x-kernel-alone")
				b.ReportMetric(float64(median(r.adds).Microseconds())/1000, "add-one-p50-ms")
			})
		}
	}
	printModes(os.Stdout, rows, ipvsEvidence())
}

// nftablesMode: Proxier over real nft; the kernel alone is `nft -f` of `nft list table`.
func nftablesMode(b *testing.B, n int) modeRow {
	p, ns := nftProxier(b, fmt.Sprintf("m-nft-%d", n))
	feed(p, 0, n)
	r := modeRow{kernel: "nft -f of the dumped table"}
	r.full, r.fullCPU = timedSync(b, ns, p)
	dump, _, _ := nftIn(b, ns, nil, "list", "table", "ip", proxy.TableName)
	empty := newNS(b, fmt.Sprintf("m-nft-%d-load", n))
	r.alone, r.aloneCPU = restoreIn(b, empty, "nft", []byte(dump), "-f", "-")
	r.adds = addOneTimes(b, ns, p, n)
	return r
}

// iptBackend is one of the two iptables backends Debian's iptables package installs.
type iptBackend struct {
	save, restore string
	// legacyFirst seeds the namespace with one legacy rule, so that
	// NewIPTablesKernel, which picks the backend already holding rules, picks legacy.
	legacyFirst bool
}

var (
	iptNFT    = iptBackend{save: "iptables-nft-save", restore: "iptables-nft-restore"}
	iptLegacy = iptBackend{save: "iptables-legacy-save", restore: "iptables-legacy-restore", legacyFirst: true}
)

// iptablesMode: IPTablesProxier over the real iptables-restore of backend; the kernel
// alone is that backend's iptables-restore of the namespace's iptables-save dump. Through
// the nf_tables backend, sizes above -iptables-nft-max are not run (README.md: its restore
// grows about with the cube of the rules here).
func iptablesMode(b *testing.B, n int, backend iptBackend) modeRow {
	r := modeRow{kernel: backend.restore + " of " + backend.save}
	if !backend.legacyFirst && n > *iptNFTMax {
		r.skipped = fmt.Sprintf("not run above -iptables-nft-max %d: iptables-nft-restore took 11 s for 2,000 services and 86 s for 4,000 here", *iptNFTMax)
		return r
	}
	ns := newNS(b, fmt.Sprintf("m-ipt-%d", n))
	var k *proxy.IPTablesKernel
	inNS(b, ns, func() error {
		if backend.legacyFirst {
			for _, args := range [][]string{{"-t", "filter", "-N", "TRANCHE-BENCH-LEGACY"}, {"-t", "filter", "-A", "TRANCHE-BENCH-LEGACY", "-j", "RETURN"}} {
				if out, err := exec.Command("iptables-legacy", args...).CombinedOutput(); err != nil {
					return fmt.Errorf("iptables-legacy %s: %v: %s", strings.Join(args, " "), err, out)
				}
			}
		}
		var err error
		k, err = proxy.NewIPTablesKernel()
		return err
	})
	p, err := proxy.NewIPTablesProxier(k, proxy.ProxierConfig{Config: config(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	feed(p, 0, n)
	r.full, r.fullCPU = timedSync(b, ns, p)
	var dump []byte
	inNS(b, ns, func() error {
		var err error
		dump, err = exec.Command(backend.save).Output()
		return err
	})
	if !bytes.Contains(dump, []byte("-A KUBE-SERVICES -d "+clusterIP(n-1)+"/32")) {
		b.Fatalf("%s in %s holds no rule for %s: the proxier wrote through the other backend", backend.save, ns, clusterIP(n-1))
	}
	empty := newNS(b, fmt.Sprintf("m-ipt-%d-load", n))
	r.alone, r.aloneCPU = restoreIn(b, empty, backend.restore, dump, "-w", "5")
	r.noflush, r.noflushCPU = restoreIn(b, newNS(b, fmt.Sprintf("m-ipt-%d-noflush", n)), backend.restore, dump, "--noflush", "-w", "5")
	r.adds = addOneTimes(b, ns, p, n)
	return r
}

// ipvsMode: IPVSProxier over the fakes (this kernel has no IP_VS, see ipvsEvidence); the
// "kernel alone" is the fake handle taking the final virtual and real servers, one
// call each, as the netlink batch would.
func ipvsMode(b *testing.B, n int) modeRow {
	h := proxy.NewFakeIPVS()
	p, err := proxy.NewIPVSProxier(h, proxy.ProxierConfig{Config: config(), Registerer: prometheus.NewRegistry()}, proxy.IPVSOptions{
		NodeAddresses: []netip.Addr{netip.MustParseAddr("10.240.0.2")},
		Device:        proxy.NewFakeIPVSDevice(),
		Rules:         &proxy.FakeIPVSRules{},
	})
	if err != nil {
		b.Fatal(err)
	}
	feed(p, 0, n)
	r := modeRow{kernel: "FakeIPVS taking the final state (no IP_VS here)"}
	r.full, r.fullCPU = timedSync(b, "", p)
	svcs, err := h.GetServices()
	if err != nil {
		b.Fatal(err)
	}
	dests := make([][]*ipvs.Destination, len(svcs))
	for i, s := range svcs {
		ds, err := h.GetDestinations(s)
		if err != nil {
			b.Fatal(err)
		}
		dests[i] = ds
	}
	load := proxy.NewFakeIPVS()
	c0, t0 := cpuTime(b), time.Now()
	for i, s := range svcs {
		if err := load.NewService(s); err != nil {
			b.Fatal(err)
		}
		for _, d := range dests[i] {
			if err := load.NewDestination(s, d); err != nil {
				b.Fatal(err)
			}
		}
	}
	r.alone, r.aloneCPU = time.Since(t0), cpuTime(b)-c0
	r.adds = addOneTimes(b, "", p, n)
	return r
}

// ipvsEvidence says why the ipvs mode's kernel figure cannot be measured here: what the
// proxy's own check reports, the kernel configuration's IP_VS line and whether modules
// exist to load. "" when the kernel has IP_VS.
func ipvsEvidence() string {
	err := proxy.IPVSSupported()
	if err == nil {
		return ""
	}
	var ev []string
	if f, ferr := os.Open("/proc/config.gz"); ferr == nil {
		defer f.Close()
		if z, zerr := gzip.NewReader(f); zerr == nil {
			cfg, _ := io.ReadAll(z)
			for _, l := range bytes.Split(cfg, []byte("\n")) {
				if bytes.Contains(l, []byte("CONFIG_IP_VS ")) || bytes.HasPrefix(l, []byte("CONFIG_IP_VS=")) {
					ev = append(ev, "/proc/config.gz: "+string(l))
				}
			}
		}
	}
	if _, serr := os.Stat("/lib/modules"); serr != nil {
		ev = append(ev, "no /lib/modules (nothing to modprobe)")
	}
	ev = append(ev, err.Error())
	return strings.Join(ev, "; ")
}

func printModes(w io.Writer, rows []modeRow, ipvsWhy string) {
	fmt.Fprintf(w, "\nproxy modes side by side, services × %d endpoints, one run (wall / CPU)\n", endpointsPerService)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "mode\tservices\tfull sync\tkernel interface alone\tratio (goal <= %.1f)\tiptables-restore --noflush alone / ratio\tadd-one p50 / max (%d adds)\tkernel interface\n", goalRatio, adds)
	for _, r := range rows {
		if r.skipped != "" {
			fmt.Fprintf(tw, "%s\t%d\t-\t-\t-\t-\t-\t%s\n", r.mode, r.services, r.skipped)
			continue
		}
		s := slices.Sorted(slices.Values(r.adds))
		noflush := "-"
		if r.noflush > 0 {
			noflush = fmt.Sprintf("%v / %v, %.2f / %.2f", r.noflush.Round(time.Millisecond), r.noflushCPU.Round(time.Millisecond),
				r.full.Seconds()/r.noflush.Seconds(), r.fullCPU.Seconds()/r.noflushCPU.Seconds())
		}
		fmt.Fprintf(tw, "%s\t%d\t%v / %v\t%v / %v\t%.2f / %.2f\t%s\t%v / %v\t%s\n", r.mode, r.services,
			r.full.Round(time.Millisecond), r.fullCPU.Round(time.Millisecond), r.alone.Round(time.Millisecond), r.aloneCPU.Round(time.Millisecond),
			r.full.Seconds()/r.alone.Seconds(), r.fullCPU.Seconds()/r.aloneCPU.Seconds(), noflush,
			median(s).Round(10*time.Microsecond), s[len(s)-1].Round(10*time.Microsecond), r.kernel)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "upstream anchor: kube-proxy adds one service to 10,000 in ~141 ms (iptables partial restore and nftables)")
	if ipvsWhy != "" {
		fmt.Fprintf(w, "ipvs: the kernel figure cannot be measured on this machine (%s); its row times the fake handle\n", ipvsWhy)
	}
}
