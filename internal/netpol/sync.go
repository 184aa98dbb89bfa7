package netpol

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
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
	// cache holds the renderings of what s.applied was made of.
	cache *renderCache
	// rendered counts the policies and pods rendered, lastPartialOps the operations
	// of the last partial sync (for tests).
	rendered, lastPartialOps int
}

// NewSyncer returns a Syncer writing through nft (a table of family ip named
// TableName). reg (nil: none) receives its metrics.
func NewSyncer(nft knftables.Interface, log *slog.Logger, reg prometheus.Registerer) *Syncer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Syncer{nft: nft, log: log, now: time.Now, refused: map[string]bool{}, cache: newRenderCache()}
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
//
// Policies and pods are rendered once per object: a policy or pod of m that is the
// very object (pointer) of the last sync reuses its rendering, so that with models
// from an Incremental a partial sync renders, diffs and writes the changed policies
// and pods only.
func (s *Syncer) Sync(ctx context.Context, m *Model, full bool, changed []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := s.now()
	refusedBefore := len(s.refused)
	for _, k := range changed {
		delete(s.refused, k)
	}
	full = full || s.applied == nil
	if full {
		clear(s.refused)
	}
	// The pods' chains leave the refused policies out: they change with the set.
	podsStale := len(s.refused) != refusedBefore
	var err error
	if full {
		cache := s.renderAll(m, podsStale)
		desired := cache.desired()
		err = s.write(ctx, desired)
		if err != nil {
			// One policy the kernel refuses must not keep the others out: find the
			// ones it refuses on their own and write the rest.
			if bad := s.findRefused(ctx, m); len(bad) > 0 {
				for _, k := range bad {
					s.refused[k] = true
					s.log.Error("the kernel refused a NetworkPolicy's rules: it allows nothing on this node until it changes", "policy", k, "err", err)
				}
				cache = s.renderAll(m, true)
				desired = cache.desired()
				err = s.write(ctx, desired)
			}
		}
		if err == nil {
			s.applied, s.cache = desired, cache
		}
	} else {
		desired, applied := s.renderChanges(m, podsStale)
		if err = s.writePartial(ctx, desired, applied); err == nil {
			s.applied.remove(applied)
			s.applied.merge(desired)
		}
	}
	elapsed := s.now().Sub(start).Seconds()
	if err != nil {
		s.applied, s.cache = nil, newRenderCache()
		s.metrics.syncErrors.Inc()
		return err
	}
	s.metrics.syncDuration.Observe(elapsed)
	if full {
		s.lastFull = start
	}
	return nil
}

// renderCache holds the renderings of the policies and pods of the last sync, each
// with the object it was rendered from.
type renderCache struct {
	pols map[string]polFragment
	pods map[string]podFragment
	// groups counts the pods jumping to each group chain; chains are their rules.
	groups map[string]int
	chains map[string][]string
}

type polFragment struct {
	src *Policy
	st  *state
}

type podFragment struct {
	src    *Pod
	st     *state              // without its group chains
	groups map[string][]string // the group chains it jumps to
}

func newRenderCache() *renderCache {
	return &renderCache{pols: map[string]polFragment{}, pods: map[string]podFragment{}, groups: map[string]int{}, chains: map[string][]string{}}
}

// desired merges the fragments into the whole table's state.
func (c *renderCache) desired() *state {
	st := newState()
	st.elems[ingressMap], st.elems[egressMap] = map[string]string{}, map[string]string{}
	for _, f := range c.pols {
		st.merge(f.st)
	}
	for _, f := range c.pods {
		st.merge(f.st)
	}
	for g := range c.groups {
		st.chains[g], st.owner[g] = c.chains[g], "group"
	}
	return st
}

func (s *Syncer) renderPolicy(key string, pol *Policy) polFragment {
	s.rendered++
	return polFragment{src: pol, st: renderPolicy(key, pol)}
}

func (s *Syncer) renderPod(pod *Pod, m *Model) podFragment {
	s.rendered++
	st := renderPod(pod, m, s.refused)
	f := podFragment{src: pod, st: st, groups: map[string][]string{}}
	for name, owner := range st.owner {
		if owner == "group" {
			f.groups[name] = st.chains[name]
			delete(st.chains, name)
			delete(st.owner, name)
		}
	}
	return f
}

// renderAll renders m whole, reusing the fragments of objects unchanged since the
// last sync (pods' only when !podsStale).
func (s *Syncer) renderAll(m *Model, podsStale bool) *renderCache {
	c := newRenderCache()
	for k, pol := range m.Policies {
		if s.refused[k] {
			continue
		}
		if f, ok := s.cache.pols[k]; ok && f.src == pol {
			c.pols[k] = f
		} else {
			c.pols[k] = s.renderPolicy(k, pol)
		}
	}
	for k, pod := range m.Pods {
		f, ok := s.cache.pods[k]
		if !ok || f.src != pod || podsStale {
			f = s.renderPod(pod, m)
		}
		c.pods[k] = f
		for g, rules := range f.groups {
			c.groups[g]++
			c.chains[g] = rules
		}
	}
	return c
}

// renderChanges renders the policies and pods of m that are not the objects of the
// last sync (every pod when podsStale), updates s.cache, and returns the new state of
// what changed beside its old state: a partial sync writes the differences of these
// two only.
func (s *Syncer) renderChanges(m *Model, podsStale bool) (desired, applied *state) {
	desired, applied = newState(), newState()
	c := s.cache
	for k, f := range c.pols {
		if m.Policies[k] == nil || s.refused[k] {
			applied.merge(f.st)
			delete(c.pols, k)
		}
	}
	for k, pol := range m.Policies {
		if s.refused[k] {
			continue
		}
		f, ok := c.pols[k]
		if ok && f.src == pol {
			continue
		}
		if ok {
			applied.merge(f.st)
		}
		nf := s.renderPolicy(k, pol)
		desired.merge(nf.st)
		c.pols[k] = nf
	}
	delta := map[string]int{}
	chains := map[string][]string{}
	drop := func(f podFragment) {
		applied.merge(f.st)
		for g, rules := range f.groups {
			delta[g]--
			chains[g] = rules
		}
	}
	for k, f := range c.pods {
		if m.Pods[k] == nil {
			drop(f)
			delete(c.pods, k)
		}
	}
	for k, pod := range m.Pods {
		f, ok := c.pods[k]
		if ok && f.src == pod && !podsStale {
			continue
		}
		if ok {
			drop(f)
		}
		nf := s.renderPod(pod, m)
		desired.merge(nf.st)
		for g, rules := range nf.groups {
			delta[g]++
			chains[g] = rules
		}
		c.pods[k] = nf
	}
	// A group chain is written when its first pod comes and deleted when its last
	// goes; its name is its content, so it never changes in between.
	for g, d := range delta {
		before := c.groups[g]
		after := before + d
		switch {
		case before == 0 && after > 0:
			desired.chains[g], desired.owner[g] = chains[g], "group"
			c.chains[g] = chains[g]
		case before > 0 && after == 0:
			applied.chains[g], applied.owner[g] = chains[g], "group"
			delete(c.chains, g)
		}
		if after > 0 {
			c.groups[g] = after
		} else {
			delete(c.groups, g)
		}
	}
	return desired, applied
}

// write runs one full sync: a transaction (or a nested script) from the kernel's
// list of objects to desired.
func (s *Syncer) write(ctx context.Context, desired *state) error {
	if s.load != nil {
		return s.writeText(ctx, desired)
	}
	tx := s.nft.NewTransaction()
	if !s.started && s.tableExists(ctx) {
		// A table left by an earlier run: replaced whole in the same transaction, so
		// that nothing of it lingers and its pods are never unprotected meanwhile.
		tx.Delete(&knftables.Table{})
		fullTx(tx, desired, nil)
	} else {
		existing, err := s.existing(ctx)
		if err != nil {
			return err
		}
		fullTx(tx, desired, existing)
	}
	if err := s.nft.Run(ctx, tx); err != nil {
		return fmt.Errorf("writing table %s: %w", TableName, err)
	}
	s.started = true
	return nil
}

// writePartial runs the transaction from applied to desired, the old and new states
// of what changed; nothing changed, nothing runs.
func (s *Syncer) writePartial(ctx context.Context, desired, applied *state) error {
	// The skeleton is there since the last (successful) sync; were it gone, the
	// transaction fails and the next sync is full.
	tx := s.nft.NewTransaction()
	partialTx(tx, desired, applied)
	s.lastPartialOps = tx.NumOperations()
	if tx.NumOperations() == 0 {
		return nil
	}
	if err := s.nft.Run(ctx, tx); err != nil {
		return fmt.Errorf("writing table %s: %w", TableName, err)
	}
	return nil
}

// writeText is a full sync written as one nested nft script (fullText).
func (s *Syncer) writeText(ctx context.Context, desired *state) error {
	var text string
	switch {
	case !s.started && s.tableExists(ctx):
		// A table left by an earlier run: replaced whole in the same transaction.
		text = fullText(fmt.Sprintf("delete table ip %s\n", TableName), desired, nil)
	case !s.started:
		text = fullText("", desired, nil)
	default:
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
	return maps.Clone(s.applied.counters)
}

// Delete removes the table (a stale one at start, or everything at the end).
func (s *Syncer) Delete(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied, s.cache = nil, newRenderCache()
	tx := s.nft.NewTransaction()
	tx.Delete(&knftables.Table{})
	err := s.nft.Run(ctx, tx)
	if err != nil && !knftables.IsNotFound(err) {
		return err
	}
	return nil
}
