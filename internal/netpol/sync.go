package netpol

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/knftables"
)

// Syncer writes models into the table, one knftables transaction per sync: the
// differences from what the last successful sync wrote, or everything (a full sync)
// the first time, after a failure, or when asked.
type Syncer struct {
	nft knftables.Interface
	// load, when set, writes full syncs as one nested nft script (fullText); nil
	// writes them through nft as knftables transactions.
	load    TextLoader
	log     *slog.Logger
	now     func() time.Time
	metrics *metrics

	mu      sync.Mutex
	applied *state // nil: unknown, the next sync is full
	// started is set once a sync succeeded: before, a table in the kernel is an
	// earlier run's.
	started  bool
	lastFull time.Time
	// refused are the policies the kernel refused on their own at the last full sync
	// that failed: they are left out (their pods stay isolated, they allow nothing)
	// until they change or the next full sync.
	refused map[string]bool
}

// NewSyncer returns a Syncer writing through nft (a table of family ip named
// TableName). reg (nil: none) receives its metrics.
func NewSyncer(nft knftables.Interface, log *slog.Logger, reg prometheus.Registerer) *Syncer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Syncer{nft: nft, log: log, now: time.Now, refused: map[string]bool{}}
	s.metrics = newMetrics(s)
	if reg != nil {
		s.metrics.register(reg)
	}
	return s
}

// LoadFullSyncsWith makes the full syncs write the table as one nested nft script
// run by load (LoadWithNFT: `nft -f` beside nft's own table): nft parses it with about
// two thirds of the CPU of knftables' command per line. Partial syncs are unchanged.
func (s *Syncer) LoadFullSyncsWith(load TextLoader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.load = load
}

// Sync writes m. full forces a full sync; a sync after a failure is full anyway.
// changed names the policies whose objects changed since the last sync ("ns/name"):
// a refused policy that changed is tried again.
func (s *Syncer) Sync(ctx context.Context, m *Model, full bool, changed []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := s.now()
	for _, k := range changed {
		delete(s.refused, k)
	}
	full = full || s.applied == nil
	if full {
		clear(s.refused)
	}
	desired := render(m, s.refused)
	err := s.write(ctx, desired, full)
	if err != nil && full {
		// One policy the kernel refuses must not keep the others out: find the ones it
		// refuses on their own and write the rest.
		if bad := s.findRefused(ctx, m); len(bad) > 0 {
			for _, k := range bad {
				s.refused[k] = true
				s.log.Error("the kernel refused a NetworkPolicy's rules: it allows nothing on this node until it changes", "policy", k, "err", err)
			}
			desired = render(m, s.refused)
			err = s.write(ctx, desired, true)
		}
	}
	elapsed := s.now().Sub(start).Seconds()
	if err != nil {
		s.applied = nil
		s.metrics.syncErrors.Inc()
		return err
	}
	s.applied = desired
	s.metrics.syncDuration.Observe(elapsed)
	if full {
		s.lastFull = start
	}
	return nil
}

// write runs one transaction from s.applied (or the kernel's list of objects, when
// full) to desired.
func (s *Syncer) write(ctx context.Context, desired *state, full bool) error {
	if full && s.load != nil {
		return s.writeText(ctx, desired)
	}
	tx := s.nft.NewTransaction()
	if full && !s.started && s.tableExists(ctx) {
		// A table left by an earlier run: replaced whole in the same transaction, so
		// that nothing of it lingers and its pods are never unprotected meanwhile.
		tx.Delete(&knftables.Table{})
		fullTx(tx, desired, nil)
	} else if full {
		existing, err := s.existing(ctx)
		if err != nil {
			return err
		}
		fullTx(tx, desired, existing)
	} else {
		// The skeleton is there since the last (successful) sync; were it gone, the
		// transaction fails and the next sync is full.
		partialTx(tx, desired, s.applied)
		if tx.NumOperations() == 0 {
			return nil
		}
	}
	if err := s.nft.Run(ctx, tx); err != nil {
		return fmt.Errorf("writing table %s: %w", TableName, err)
	}
	s.started = true
	return nil
}

// writeText is a full sync written as one nested nft script (fullText).
func (s *Syncer) writeText(ctx context.Context, desired *state) error {
	var text string
	if !s.started && s.tableExists(ctx) {
		// A table left by an earlier run: replaced whole in the same transaction.
		text = fullText(fmt.Sprintf("delete table ip %s\n", TableName), desired, nil)
	} else {
		existing, err := s.existing(ctx)
		if err != nil {
			return err
		}
		text = fullText("", desired, existing)
	}
	if err := s.load(ctx, text); err != nil {
		return fmt.Errorf("writing table %s: %w", TableName, err)
	}
	s.started = true
	return nil
}

// existing lists the kernel's chains, sets and counters of the table, or returns nil
// when there is no table.
func (s *Syncer) existing(ctx context.Context) (map[string][]string, error) {
	if s.applied == nil && !s.tableExists(ctx) {
		return nil, nil
	}
	existing := map[string][]string{}
	for _, t := range []string{"chain", "set", "counter"} {
		names, err := s.nft.List(ctx, t)
		if err != nil && !knftables.IsNotFound(err) {
			return nil, fmt.Errorf("listing the %ss of table %s: %w", t, TableName, err)
		}
		existing[t] = names
	}
	return existing, nil
}

func (s *Syncer) tableExists(ctx context.Context) bool {
	_, err := s.nft.List(ctx, "chain")
	return err == nil
}

// findRefused checks each policy of m on its own (its chains, sets and counters in a
// transaction checked, not run) and returns those the kernel refuses.
func (s *Syncer) findRefused(ctx context.Context, m *Model) []string {
	var bad []string
	for _, k := range sortedKeys(m.Policies) {
		one := &Model{Policies: map[string]*Policy{k: m.Policies[k]}, Pods: map[string]*Pod{}}
		st := render(one, nil)
		tx := s.nft.NewTransaction()
		fullTx(tx, st, nil)
		if err := s.nft.Check(ctx, tx); err != nil {
			bad = append(bad, k)
		}
	}
	return bad
}

// Refused returns the policies left out because the kernel refused them, sorted.
func (s *Syncer) Refused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(func(yield func(string) bool) {
		for k := range s.refused {
			if !yield(k) {
				return
			}
		}
	})
}

// counters returns the specs of the counters the last sync wrote.
func (s *Syncer) counters() map[string]counterSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.applied == nil {
		return nil
	}
	return s.applied.counters
}

// Delete removes the table (a stale one at start, or everything at the end).
func (s *Syncer) Delete(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied = nil
	tx := s.nft.NewTransaction()
	tx.Delete(&knftables.Table{})
	err := s.nft.Run(ctx, tx)
	if err != nil && !knftables.IsNotFound(err) {
		return err
	}
	return nil
}
