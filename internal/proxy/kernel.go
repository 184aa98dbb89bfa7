package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
// Its syncs go through one long-lived `nft -i` (see nftsession.Session) when they fit, so that
// a sync does not start a process; Close ends it.
type Kernel struct {
	knftables.Interface
	path    string
	session *nftsession.Session
}

var _ knftables.Interface = (*Kernel)(nil)
var _ planRunner = (*Kernel)(nil)

// NewKernel returns a Kernel after checking, as knftables.New does, that nft works
// here with enough privileges.
func NewKernel() (*Kernel, error) {
	nft, err := knftables.New(knftables.IPv4Family, TableName)
	if err != nil {
		return nil, err
	}
	path, err := exec.LookPath("nft")
	if err != nil {
		return nil, fmt.Errorf("finding the nft command: %w", err)
	}
	return &Kernel{Interface: nft, path: path, session: nftsession.NewSession(path)}, nil
}

// Close ends the nft process Kernel keeps for its syncs (a later sync starts another).
func (k *Kernel) Close() { k.session.Close() }

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
	cmd := exec.CommandContext(ctx, k.path, "--json", "--terse", "list", what, "ip")
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
	if err := k.session.Run(ctx, buf.String()); !errors.Is(err, nftsession.ErrUnusable) {
		return err
	}
	return k.nft(ctx, buf, "-f", "-")
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
	return k.nft(ctx, buf, args...)
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

// nft runs the nft command with args and buf as its input.
func (k *Kernel) nft(ctx context.Context, buf *bytes.Buffer, args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, k.path, args...)
	cmd.Stdin, cmd.Stderr = buf, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 4000 {
			msg = msg[:4000] + " [...]"
		}
		return fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, msg)
	}
	return nil
}

// writeObjects renders object operations with knftables, which validates them.
func (k *Kernel) writeObjects(buf *bytes.Buffer, ops objectOps) error {
	if len(ops) == 0 {
		return nil
	}
	tx := k.NewTransaction()
	ops.addTo(tx)
	s := tx.String()
	// knftables stops at the first invalid operation and reports it on a last line.
	if i := strings.LastIndex(s, "# ERROR: "); i >= 0 && (i == 0 || s[i-1] == '\n') {
		return errors.New("invalid nftables operation: " + s[i+len("# ERROR: "):])
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
