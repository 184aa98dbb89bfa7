package nftsession

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"sigs.k8s.io/knftables"
)

// Table is knftables' implementation of knftables.Interface for one family and table
// (knftables.New) but for Run, whose transactions go through a Session when they can
// and through knftables (`nft -f -`) otherwise: too long for one line, or when nft -i
// does not answer as expected. Close ends the session's process.
type Table struct {
	knftables.Interface
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
	return &Table{Interface: nft, session: NewSession(path)}, nil
}

// Run implements knftables.Interface: tx as one nft transaction, all of it or, on an
// error, none of it.
func (t *Table) Run(ctx context.Context, tx *knftables.Transaction) error {
	text := tx.String()
	// A transaction that knftables refused while it was built carries its error as a
	// comment; knftables' own Run returns that error.
	if strings.Contains(text, "# ERROR: ") {
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

// Close ends the nft process of the table's session (a later Run starts another).
func (t *Table) Close() { t.session.Close() }
