package proxy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tranche/tranche/internal/proxy"
)

// ipTablesServices is the size for the iptables mode.
const ipTablesServices = 1000

// recordingIPTables remembers the last restore input, so that the same text can be
// timed through iptables-restore alone.
type recordingIPTables struct {
	proxy.IPTables
	last []byte
}

func (r *recordingIPTables) Restore(ctx context.Context, data []byte) error {
	r.last = bytes.Clone(data)
	return r.IPTables.Restore(ctx, data)
}

// BenchmarkIPTables programs 1,000 services × 10 endpoints from scratch into a fresh
// namespace through IPTablesProxier and the real iptables-restore, then adds one
// service (a partial sync), and compares each with iptables-restore alone loading the
// very text the sync wrote, into a second namespace in the same state. Run it as root
// with -benchtime 1x.
func BenchmarkIPTables(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("the iptables benchmark needs root: it creates network namespaces and runs iptables-restore")
	}
	ours, alone := newNS(b, "ipt-ours"), newNS(b, "ipt-alone")
	var rec *recordingIPTables
	inNS(b, ours, func() error {
		k, err := proxy.NewIPTablesKernel()
		rec = &recordingIPTables{IPTables: k}
		return err
	})
	p, err := proxy.NewIPTablesProxier(rec, proxy.ProxierConfig{Config: config(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	feed(p, 0, ipTablesServices)
	full, fullCPU := timedSync(b, ours, p)
	fullText := rec.last
	fullAlone, fullAloneCPU := restoreIn(b, alone, "iptables-restore", fullText, "--noflush", "-w", "5")

	feed(p, ipTablesServices, ipTablesServices+1)
	add, addCPU := timedSync(b, ours, p)
	addText := rec.last
	addAlone, addAloneCPU := restoreIn(b, alone, "iptables-restore", addText, "--noflush", "-w", "5")

	b.ReportMetric(full.Seconds(), "full-sync-s")
	b.ReportMetric(full.Seconds()/fullAlone.Seconds(), "x-restore-alone")
	b.ReportMetric(float64(add.Microseconds())/1000, "add-one-ms")

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\niptables mode, %d services x %d endpoints\tsync (wall / cpu)\tiptables-restore alone (wall / cpu)\tratio wall / cpu\trestore input\n", ipTablesServices, endpointsPerService)
	fmt.Fprintf(w, "full sync\t%v / %v\t%v / %v\t%.2f / %.2f\t%d lines\n", full.Round(time.Millisecond), fullCPU.Round(time.Millisecond),
		fullAlone.Round(time.Millisecond), fullAloneCPU.Round(time.Millisecond), full.Seconds()/fullAlone.Seconds(), fullCPU.Seconds()/fullAloneCPU.Seconds(), bytes.Count(fullText, []byte("\n")))
	fmt.Fprintf(w, "add one service (partial)\t%v / %v\t%v / %v\t%.2f / %.2f\t%d lines\n", add.Round(time.Millisecond), addCPU.Round(time.Millisecond),
		addAlone.Round(time.Millisecond), addAloneCPU.Round(time.Millisecond), add.Seconds()/addAlone.Seconds(), addCPU.Seconds()/addAloneCPU.Seconds(), bytes.Count(addText, []byte("\n")))
	w.Flush()
}
