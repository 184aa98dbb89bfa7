package netpol

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"

	"sigs.k8s.io/knftables"
)

// TextLoader runs an nft script (`nft -f`) as one transaction.
type TextLoader func(ctx context.Context, text string) error

// LoadWithNFT runs text with `nft -f -` in the current network namespace: the kernel
// applies the whole script or nothing.
func LoadWithNFT(ctx context.Context, text string) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(text)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nft -f: %w: %.2000s", err, stderr.String())
	}
	return nil
}

// fullText is a full sync of desired as one nft script: the table written as one
// nested block (`table { counter ... set ... { elements = { ... } } chain ... { rules } }`),
// the form `nft list table` prints. knftables writes a command per object, rule and
// element (75,084 lines for 1,000 policies of 100 pods), and nft's parser pays per
// command: loading the nested form of the same table costs it about two thirds of the
// CPU (BenchmarkFullSyncText in bench/netpol). Partial syncs stay on knftables.
//
// existing names the kernel's objects (nil: the table is new, or deleted by prelude):
// the script then flushes the table's chains and the sets desired keeps, refills
// them, and deletes what desired lacks last, so that counters keep their values. It
// is one transaction: no packet meets a half-written table.
func fullText(prelude string, desired *state, existing map[string][]string) string {
	var b strings.Builder
	b.WriteString(prelude)
	if existing != nil {
		fmt.Fprintf(&b, "flush table ip %s\n", TableName)
		for _, mp := range []string{ingressMap, egressMap} {
			fmt.Fprintf(&b, "flush map ip %s %s\n", TableName, mp)
		}
		for _, s := range sortedStrings(existing["set"]) {
			if _, ok := desired.sets[s]; ok {
				fmt.Fprintf(&b, "flush set ip %s %s\n", TableName, s)
			}
		}
	}
	writeNested(&b, desired)
	if existing != nil {
		// The stale objects, through knftables' own text: they are few.
		tx := knftables.NewFake(knftables.IPv4Family, TableName).NewTransaction()
		deleteStale(tx, desired, existing["chain"], existing["set"], existing["counter"])
		b.WriteString(tx.String())
	}
	return b.String()
}

// writeNested writes the table with desired's objects as one nested block, in the order
// fullTx adds them (skeleton, counters, sets, chains), each kind sorted by name.
func writeNested(b *strings.Builder, st *state) {
	fmt.Fprintf(b, "table ip %s {\n\tcomment %q\n", TableName, "tranche: NetworkPolicies of this node")
	writeMap := func(name, comment string) {
		fmt.Fprintf(b, "\tmap %s {\n\t\ttype ipv4_addr : verdict\n\t\tcomment %q\n", name, comment)
		writeElements(b, st.elems[name], true)
		b.WriteString("\t}\n")
	}
	writeMap(ingressMap, "pod address → its ingress chain")
	writeMap(egressMap, "pod address → its egress chain")
	for _, bc := range baseChains {
		fmt.Fprintf(b, "\tchain %s {\n\t\ttype %s hook %s priority %s\n", bc.name, knftables.FilterType, bc.hook, bc.priority)
		for _, r := range bc.rules {
			fmt.Fprintf(b, "\t\t%s\n", r)
		}
		b.WriteString("\t}\n")
	}
	for _, name := range sortedKeys(st.counters) {
		fmt.Fprintf(b, "\tcounter %s {\n\t\tcomment %q\n\t}\n", name, *counterObject(name, st.counters[name]).Comment)
	}
	for _, name := range sortedKeys(st.sets) {
		spec := st.sets[name]
		fmt.Fprintf(b, "\tset %s {\n\t\ttype %s\n", name, spec.typ)
		if spec.interval {
			fmt.Fprintf(b, "\t\tflags %s\n", knftables.IntervalFlag)
		}
		fmt.Fprintf(b, "\t\tcomment %q\n", spec.comment)
		writeElements(b, st.elems[name], false)
		b.WriteString("\t}\n")
	}
	for _, name := range sortedKeys(st.chains) {
		fmt.Fprintf(b, "\tchain %s {\n", name)
		for _, r := range st.chains[name] {
			fmt.Fprintf(b, "\t\t%s\n", r)
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
}

// writeElements writes `elements = { ... }` with the elements in key order (none:
// nothing, nft refuses an empty list), a line each.
func writeElements(b *strings.Builder, elems map[string]string, isMap bool) {
	if len(elems) == 0 {
		return
	}
	b.WriteString("\t\telements = {")
	for i, k := range sortedKeys(elems) {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n\t\t\t")
		b.WriteString(k)
		if isMap {
			b.WriteString(" : ")
			b.WriteString(elems[k])
		}
	}
	b.WriteString("\n\t\t}\n")
}
