package proxy

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"

	"github.com/tranche/tranche/internal/nftsession"
)

// TestWriteElementsGroupsPerContainer checks that Kernel writes element changes as one
// command per set or map, whatever order they come in, values only for maps.
func TestWriteElementsGroupsPerContainer(t *testing.T) {
	ops := []elemOp{
		{elemKey{serviceIPsMap, "10.96.0.1 . tcp . 80"}, "goto pick-tcp-1-of-1"},
		{elemKey{hairpinSet, "10.244.1.2 . 10.244.1.2"}, ""},
		{elemKey{serviceIPsMap, "10.96.0.2 . udp . 53"}, "goto pick-udp-1-of-2"},
		{elemKey{clusterIPsSet, "10.96.0.1"}, ""},
	}
	var buf bytes.Buffer
	writeElements(&buf, "add", ops)
	want := `add element ip tranche service-ips { 10.96.0.1 . tcp . 80 : goto pick-tcp-1-of-1, 10.96.0.2 . udp . 53 : goto pick-udp-1-of-2 }
add element ip tranche hairpin { 10.244.1.2 . 10.244.1.2 }
add element ip tranche cluster-ips { 10.96.0.1 }
`
	if d := cmp.Diff(want, buf.String()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	buf.Reset()
	writeElements(&buf, "delete", nil)
	if buf.Len() != 0 {
		t.Errorf("no element wrote %q", buf.String())
	}
}

// TestWriteElementsBoundsCommands checks that a large change is cut into commands of
// at most elementsPerCommand elements, none lost.
func TestWriteElementsBoundsCommands(t *testing.T) {
	n := 2*elementsPerCommand + 1
	ops := make([]elemOp, n)
	for i := range ops {
		ops[i] = elemOp{key: elemKey{clusterIPsSet, fmt.Sprintf("10.96.%d.%d", i/250, i%250)}}
	}
	var buf bytes.Buffer
	writeElements(&buf, "delete", ops)
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d elements in %d commands, want 3", n, len(lines))
	}
	total := 0
	for _, l := range lines {
		body, ok := strings.CutPrefix(l, "delete element ip tranche cluster-ips { ")
		if !ok || !strings.HasSuffix(body, " }") {
			t.Fatalf("malformed command %.100q", l)
		}
		k := len(strings.Split(strings.TrimSuffix(body, " }"), ", "))
		if k > elementsPerCommand {
			t.Errorf("a command holds %d elements", k)
		}
		total += k
	}
	if total != n {
		t.Errorf("wrote %d elements, want %d", total, n)
	}
}

// TestKernelRefusesInvalidObjects checks that an operation knftables finds invalid is
// reported instead of being sent to nft.
func TestKernelRefusesInvalidObjects(t *testing.T) {
	k := &Kernel{Table: &nftsession.Table{Interface: knftables.NewFake(knftables.IPv4Family, TableName)}}
	var ops objectOps
	ops.Add(&knftables.Chain{Name: "fine"})
	ops.Flush(&knftables.Chain{})
	var buf bytes.Buffer
	err := k.writeObjects(&buf, ops)
	if err == nil || !strings.Contains(err.Error(), "invalid nftables operation") {
		t.Fatalf("got %v, want an invalid-operation error", err)
	}
	ops = ops[:1]
	buf.Reset()
	if err := k.writeObjects(&buf, ops); err != nil || buf.String() != "add chain ip tranche fine\n" {
		t.Errorf("got %q, %v", buf.String(), err)
	}
}
