package tracer

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

// fakeTable returns a fake holding table name with the given base chains (name →
// hook, priority) and rules ("chain: rule").
func fakeTable(t *testing.T, name string, chains map[string][2]string, rules ...string) *knftables.Fake {
	t.Helper()
	fake := knftables.NewFake(knftables.IPv4Family, name)
	tx := fake.NewTransaction()
	tx.Add(&knftables.Table{})
	for c, hp := range chains {
		ch := &knftables.Chain{Name: c}
		if hp[0] != "" {
			ch.Type = knftables.PtrTo(knftables.FilterType)
			if hp[0] == string(knftables.PreroutingHook) {
				ch.Type = knftables.PtrTo(knftables.NATType)
			}
			ch.Hook = knftables.PtrTo(knftables.BaseChainHook(hp[0]))
			ch.Priority = knftables.PtrTo(knftables.BaseChainPriority(hp[1]))
		}
		tx.Add(ch)
	}
	tx.Add(&knftables.Counter{Name: "c-" + name})
	tx.Add(&knftables.Set{Name: "ports", Type: "inet_proto . inet_service", Flags: []knftables.SetFlag{knftables.IntervalFlag}})
	tx.Add(&knftables.Element{Set: "ports", Key: []string{"tcp", "8000-8100"}})
	for _, r := range rules {
		c, rule, _ := strings.Cut(r, ": ")
		tx.Add(&knftables.Rule{Chain: c, Rule: rule})
	}
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	return fake
}

func tcpTo(dst string, port uint16) Packet {
	return Packet{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr(dst), Proto: "tcp", DPort: port}
}

// TestMultiTable checks the kernel's ordering across tables: every table's base chains
// of a hook run by priority (named and numeric forms alike), an accept hands the
// packet on, a drop ends it, and NAT in prerouting happens before forward.
func TestMultiTable(t *testing.T) {
	// Table a runs at filter+1, after table b's chain at 0, although a comes first.
	a := fakeTable(t, "a", map[string][2]string{"late": {"forward", "filter+1"}},
		`late: ct state established,related accept`,
		`late: ip daddr 10.0.0.9 meta l4proto . th dport @ports counter name "c-a" drop`)
	b := fakeTable(t, "b", map[string][2]string{"early": {"forward", "0"}, "nat": {"prerouting", "dstnat"}, "sub": {}},
		`nat: ip daddr 10.96.0.1 dnat ip to 10.0.0.9:8080`,
		`early: jump sub`,
		`sub: ip daddr 10.0.0.9 counter name "c-b" return`,
		`sub: ip daddr 10.0.0.10 counter drop`,
		`early: counter name "c-b" accept`)
	tr, err := NewMulti([]*knftables.Fake{a, b})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		pkt  Packet
		want string
	}{
		{"accept in b, drop in a", tcpTo("10.0.0.9", 8000), "drop [c-b c-b c-a]"},
		{"port outside the range: accepted by both", tcpTo("10.0.0.9", 8101), "accept [c-b c-b]"},
		{"dropped in b: a never sees it", tcpTo("10.0.0.10", 8000), "drop []"},
		{"DNAT first, then forward judges the endpoint", tcpTo("10.96.0.1", 80), "drop dnat 10.0.0.9:8080 [c-b c-b c-a]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tr.Trace(tc.pkt)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range out {
				got = append(got, o.String()+" ["+strings.Join(o.Counters, " ")+"]")
			}
			if diff := cmp.Diff([]string{tc.want}, got); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMultiTableErrors(t *testing.T) {
	a := fakeTable(t, "a", map[string][2]string{"f": {"forward", "filter"}}, `f: ip ttl 5 drop`)
	if _, err := NewMulti([]*knftables.Fake{a, a}); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("the same table twice: err = %v", err)
	}
	if _, err := NewMulti(nil); err == nil {
		t.Error("no table: no error")
	}
	tr, err := NewMulti([]*knftables.Fake{a})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Trace(tcpTo("10.0.0.9", 80)); err == nil || !strings.Contains(err.Error(), `unsupported expression at "ip ttl 5 drop"`) {
		t.Errorf("unknown rule shape: err = %v", err)
	}
	b := fakeTable(t, "b", map[string][2]string{"f": {"forward", "filter"}}, `f: counter name "nope" accept`)
	tr, err = NewMulti([]*knftables.Fake{b})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Trace(tcpTo("10.0.0.9", 80)); err == nil || !strings.Contains(err.Error(), `no counter "nope"`) {
		t.Errorf("unknown counter: err = %v", err)
	}
}
