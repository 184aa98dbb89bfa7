package nftsession

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"sigs.k8s.io/knftables"
)

// Table is knftables' implementation of knftables.Interface for one family and table
// (knftables.New) but for Run, whose transactions go through a Session when they can
// and through knftables (`nft -f -`) otherwise: too long for one line, or when nft -i
// does not answer as expected. RunText does the same for nft commands written by
// hand (the service proxy's syncs). Close ends the session's process.
type Table struct {
	knftables.Interface
	path    string
	session *Session
}

var _ knftables.Interface = (*Table)(nil)

// New returns a Table after checking, as knftables.New does, that nft works here with
// enough privileges.
func New(family knftables.Family, table string) (*Table, error) {
	nft, err := knftables.New(family, table)
	if err != nil {
		return nil, err
	}
	path, err := exec.LookPath("nft")
	if err != nil {
		return nil, fmt.Errorf("finding the nft command: %w", err)
	}
	return &Table{Interface: nft, path: path, session: NewSession(path)}, nil
}

// Path is the nft command the table runs.
func (t *Table) Path() string { return t.path }

// Run implements knftables.Interface: tx as one nft transaction, all of it or, on an
// error, none of it.
func (t *Table) Run(ctx context.Context, tx *knftables.Transaction) error {
	text := tx.String()
	// knftables' own Run returns the error of a transaction it refused while it was
	// built.
	if BuildError(text) != nil {
		return t.Interface.Run(ctx, tx)
	}
	if text == "" {
		return nil
	}
	if err := t.session.Run(ctx, text); !errors.Is(err, ErrUnusable) {
		return err
	}
	return t.Interface.Run(ctx, tx)
}

// RunText runs text (nft commands, one per line) as one transaction: through the
// session when it can, else with `nft -f -`.
func (t *Table) RunText(ctx context.Context, text string) error {
	if err := t.session.Run(ctx, text); !errors.Is(err, ErrUnusable) {
		return err
	}
	return t.Exec(ctx, strings.NewReader(text), "-f", "-")
}

// Exec runs the nft command with args and input; its error quotes nft's report.
func (t *Table) Exec(ctx context.Context, input io.Reader, args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, t.path, args...)
	cmd.Stdin, cmd.Stderr = input, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 4000 {
			msg = msg[:4000] + " [...]"
		}
		return fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, msg)
	}
	return nil
}

// BuildError returns the error that text, a knftables.Transaction's String, carries
// when knftables refused one of its operations: knftables stops there and writes the
// error as a last comment line.
func BuildError(text string) error {
	if i := strings.LastIndex(text, "# ERROR: "); i >= 0 && (i == 0 || text[i-1] == '\n') {
		return errors.New("invalid nftables operation: " + text[i+len("# ERROR: "):])
	}
	return nil
}

// Close ends the nft process of the table's session (a later Run starts another).
func (t *Table) Close() { t.session.Close() }
