package nftsession

import (
	"context"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/tranche/tranche/internal/netns"
	"github.com/tranche/tranche/internal/testutil"
)

// TestTable runs knftables transactions through a Table in a namespace of its own:
// they apply through one nft -i (the same process for both), one that nft refuses
// reports nft's error and applies nothing, one that knftables refused while it was
// built returns knftables' error without reaching nft, an empty one does nothing, and
// List reads what the transactions wrote.
func TestTable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces and nft)")
	}
	ns := testutil.Netns(t, "nftt")
	ctx := context.Background()
	if err := netns.Do(ns, func() error {
		tbl, err := New(knftables.IPv4Family, "t")
		if err != nil {
			return err
		}
		defer tbl.Close()
		tx := tbl.NewTransaction()
		tx.Add(&knftables.Table{Comment: knftables.PtrTo("a table's comment; with a semicolon")})
		tx.Add(&knftables.Set{Name: "s", Type: "ipv4_addr"})
		tx.Add(&knftables.Chain{Name: "c", Type: knftables.PtrTo(knftables.FilterType), Hook: knftables.PtrTo(knftables.ForwardHook),
			Priority: knftables.PtrTo(knftables.FilterPriority)})
		tx.Add(&knftables.Rule{Chain: "c", Rule: "ip saddr @s drop", Comment: knftables.PtrTo("drop s")})
		tx.Add(&knftables.Element{Set: "s", Key: []string{"10.0.0.1"}})
		if err := tbl.Run(ctx, tx); err != nil {
			t.Fatalf("first transaction: %v", err)
		}
		if tbl.session.cmd == nil {
			t.Fatal("the transaction did not go through nft -i")
		}
		pid := tbl.session.cmd.Process.Pid

		tx = tbl.NewTransaction()
		tx.Add(&knftables.Element{Set: "s", Key: []string{"10.0.0.2"}})
		tx.Add(&knftables.Element{Set: "nosuch", Key: []string{"10.0.0.3"}})
		if err := tbl.Run(ctx, tx); err == nil || !strings.Contains(err.Error(), "nosuch") {
			t.Errorf("a transaction naming a missing set: %v, want nft's error quoting it", err)
		}

		tx = tbl.NewTransaction()
		tx.Add(&knftables.Element{Set: "s", Key: []string{"10.0.0.4"}})
		tx.Add(&knftables.Element{Set: "s"}) // no key: knftables refuses it
		if err := tbl.Run(ctx, tx); err == nil || !strings.Contains(err.Error(), "key") {
			t.Errorf("a transaction knftables refused: %v, want its error", err)
		}

		if err := tbl.Run(ctx, tbl.NewTransaction()); err != nil {
			t.Errorf("an empty transaction: %v", err)
		}
		tx = tbl.NewTransaction()
		tx.Add(&knftables.Element{Set: "s", Key: []string{"10.0.0.5"}})
		if err := tbl.Run(ctx, tx); err != nil {
			t.Errorf("a transaction after the refused ones: %v", err)
		}
		if tbl.session.cmd == nil || tbl.session.cmd.Process.Pid != pid {
			t.Errorf("nft -i replaced or gone after refused transactions (pid %d)", pid)
		}

		elems, err := tbl.ListElements(ctx, "set", "s")
		if err != nil {
			return err
		}
		var got []string
		for _, e := range elems {
			got = append(got, e.Key...)
		}
		if strings.Join(got, " ") != "10.0.0.1 10.0.0.5" && strings.Join(got, " ") != "10.0.0.5 10.0.0.1" {
			t.Errorf("set s holds %v, want 10.0.0.1 and 10.0.0.5 (nothing of the refused transactions)", got)
		}
		chains, err := tbl.List(ctx, "chains")
		if err != nil || len(chains) != 1 || chains[0] != "c" {
			t.Errorf("chains: %v %v", chains, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
