package netpol

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/knftables"

	enginepkg "github.com/tranche/tranche/internal/netpol"
	"github.com/tranche/tranche/internal/testutil"
)

// BenchmarkFullSyncText is why full syncs write a hand-made nested nft script instead
// of knftables' transaction: it renders the full sync of BenchmarkFullSync's model
// both ways (knftables' one command per object, rule and element, as its Fake records
// the transaction; the engine's nested `table { ... }` block) and loads each with
// `nft -f` into an empty network namespace, the same table either way
// (internal/netpol's TestFullTextSameRuleset checks that). Root only; -benchtime 1x.
func BenchmarkFullSyncText(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("the full-sync text benchmark needs root: it creates network namespaces and runs nft")
	}
	policies := fullSyncEnv(b, "NETPOL_FULLSYNC_POLICIES", 1000)
	podsPer := fullSyncEnv(b, "NETPOL_FULLSYNC_PODS", 100)
	m := enginepkg.Compile(fullSyncSnapshot(policies, podsPer))

	fake := knftables.NewFake(knftables.IPv4Family, enginepkg.TableName)
	if err := enginepkg.NewSyncer(fake, nil, nil).Sync(context.Background(), m, true, nil); err != nil {
		b.Fatal(err)
	}
	knft := fake.LastTransaction.String()
	var nested string
	s := enginepkg.NewSyncer(knftables.NewFake(knftables.IPv4Family, enginepkg.TableName), nil, nil)
	s.LoadFullSyncsWith(func(_ context.Context, text string) error { nested = text; return nil })
	if err := s.Sync(context.Background(), m, true, nil); err != nil {
		b.Fatal(err)
	}

	prefix := fmt.Sprintf("bft%d-", os.Getpid())
	load := func(ns, text string) (wall, cpu time.Duration) {
		testutil.NetnsNamed(b, ns)
		cpu0 := childCPU()
		start := time.Now()
		fullSyncNFT(b, ns, bytes.NewReader([]byte(text)), nil, "-f", "-")
		return time.Since(start), childCPU() - cpu0
	}
	knftWall, knftCPU := load(prefix+"knft", knft)
	nestedWall, nestedCPU := load(prefix+"nested", nested)

	b.ReportMetric(nestedCPU.Seconds()/knftCPU.Seconds(), "x-cpu-nested/knftables")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "policies×pods\ttext\tlines\tbytes\tnft -f wall\tnft -f CPU\t\n")
	for _, r := range []struct {
		name      string
		text      string
		wall, cpu time.Duration
	}{{"knftables transaction", knft, knftWall, knftCPU}, {"nested script", nested, nestedWall, nestedCPU}} {
		fmt.Fprintf(tw, "%d×%d\t%s\t%d\t%d\t%s\t%s\t\n", policies, podsPer, r.name, strings.Count(r.text, "\n"), len(r.text),
			r.wall.Round(time.Millisecond), r.cpu.Round(time.Millisecond))
	}
	tw.Flush()
	fmt.Printf("nested / knftables: wall %.2f, nft CPU %.2f\n", nestedWall.Seconds()/knftWall.Seconds(), nestedCPU.Seconds()/knftCPU.Seconds())
}
