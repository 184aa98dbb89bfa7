package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/tranche/tranche/internal/nftsession"
)

// elementsPerCommand bounds the elements Kernel writes in one `add element` or `delete
// element` command, so that an error message quoting the command stays readable.
const elementsPerCommand = 1000

// Kernel writes the proxy's table (family ip, TableName) with the nft command in the
// network namespace of the thread that calls it. It is knftables' own implementation
// for everything (List, Run, ...) but the proxy's syncs, which it runs as knftables
// does, one `nft -f -` transaction, except that the element changes of each set or map
// go in a few commands instead of one command per element. nft parses, evaluates and
// sends every command on its own, which made a full sync of 10,000 services (130,000
// elements) cost half again as much CPU as loading the same table (see bench/proxy).
//
// Its syncs, and every other transaction, go through one long-lived `nft -i`
// (nftsession.Table) when they fit, so that a sync does not start a process; Close
// ends it.
type Kernel struct {
	*nftsession.Table
}

var _ knftables.Interface = (*Kernel)(nil)
var _ planRunner = (*Kernel)(nil)

// NewKernel returns a Kernel after checking, as knftables.New does, that nft works
// here with enough privileges.
func NewKernel() (*Kernel, error) {
	t, err := nftsession.New(knftables.IPv4Family, TableName)
	if err != nil {
		return nil, err
	}
	return &Kernel{Table: t}, nil
}

// List implements knftables.Interface. For chains, sets and maps it reads only their
// names (`nft --terse list chains|sets|maps ip`, keeping those of TableName), where
// knftables reads the whole table, every rule and element included: 1.5 CPU-s per
// call for 10,000 services, twice in every full sync. Other types are knftables'.
func (k *Kernel) List(ctx context.Context, objectType string) ([]string, error) {
	var what string
	switch objectType {
	case "chain", "chains":
		what = "chains"
	case "set", "sets":
		what = "sets"
	case "map", "maps":
		what = "maps"
	default:
		return k.Interface.List(ctx, objectType)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, k.Path(), "--json", "--terse", "list", what, "ip")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("nft list %s ip: %w: %s", what, err, strings.TrimSpace(stderr.String()))
	}
	var out struct {
		Nftables []map[string]struct {
			Table, Name string
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("nft list %s ip: reading its JSON: %w", what, err)
	}
	var names []string
	key := strings.TrimSuffix(what, "s")
	for _, obj := range out.Nftables {
		if o, ok := obj[key]; ok && o.Table == TableName {
			names = append(names, o.Name)
		}
	}
	return names, nil
}

// runPlan runs pl as one nft transaction: all of it or, on error, none of it; through
// the session when it can, else with `nft -f -`.
func (k *Kernel) runPlan(ctx context.Context, pl *syncPlan) error {
	buf, err := k.render(pl)
	if err != nil || buf.Len() == 0 {
		return err
	}
	return k.RunText(ctx, buf.String())
}

// checkPlan runs pl with `nft --check`: nft sends the transaction to the kernel, which
// validates it whole and then discards it.
func (k *Kernel) checkPlan(ctx context.Context, pl *syncPlan) error {
	return k.nftPlan(ctx, pl, "--check", "-f", "-")
}

// nftPlan renders pl and feeds it to nft with args.
func (k *Kernel) nftPlan(ctx context.Context, pl *syncPlan, args ...string) error {
	buf, err := k.render(pl)
	if err != nil || buf.Len() == 0 {
		return err
	}
	return k.Exec(ctx, buf, args...)
}

// render writes pl as nft commands, one per line.
func (k *Kernel) render(pl *syncPlan) (*bytes.Buffer, error) {
	var buf bytes.Buffer
	size := 100 * (len(pl.before) + len(pl.after)) // a rough guess at an object's line
	for _, ops := range [][]elemOp{pl.deletes, pl.adds} {
		for _, op := range ops {
			size += len(op.key.key) + len(" : , ") + len(op.value)
		}
	}
	buf.Grow(size)
	if err := k.writeObjects(&buf, pl.before); err != nil {
		return nil, err
	}
	writeElements(&buf, "delete", pl.deletes)
	writeElements(&buf, "add", pl.adds)
	if err := k.writeObjects(&buf, pl.after); err != nil {
		return nil, err
	}
	return &buf, nil
}

// writeObjects renders object operations with knftables, which validates them.
func (k *Kernel) writeObjects(buf *bytes.Buffer, ops objectOps) error {
	if len(ops) == 0 {
		return nil
	}
	tx := k.NewTransaction()
	ops.addTo(tx)
	s := tx.String()
	if err := nftsession.BuildError(s); err != nil {
		return err
	}
	buf.WriteString(s)
	return nil
}

// writeElements writes element operations grouped by set or map, in the order the
// containers first appear, elementsPerCommand to a command.
func writeElements(buf *bytes.Buffer, verb string, ops []elemOp) {
	var containers []string
	for _, op := range ops {
		if n := len(containers); n > 0 && containers[n-1] == op.key.container {
			continue
		}
		if !slices.Contains(containers, op.key.container) {
			containers = append(containers, op.key.container)
		}
	}
	for _, c := range containers {
		isMap, n := isSkeletonMap(c), 0
		for _, op := range ops {
			if op.key.container != c {
				continue
			}
			if n%elementsPerCommand == 0 {
				if n > 0 {
					buf.WriteString(" }\n")
				}
				fmt.Fprintf(buf, "%s element ip %s %s { ", verb, TableName, c)
			} else {
				buf.WriteString(", ")
			}
			buf.WriteString(op.key.key)
			if isMap {
				buf.WriteString(" : ")
				buf.WriteString(op.value)
			}
			n++
		}
		buf.WriteString(" }\n")
	}
}
