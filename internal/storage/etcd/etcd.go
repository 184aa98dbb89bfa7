// Package etcd implements storage.Interface on an etcd v3 client, for both the embedded
// server and an external etcd cluster. Every write is one etcd transaction whose
// conditions carry the caller's preconditions; when a transaction fails, its else branch
// reads the compared keys so the error names the condition that failed without a second
// round trip.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tranche/tranche/internal/storage"
)

// watchBuffer is how many events a watch holds for a slow reader before it stops reading
// from etcd (etcd then buffers on its side).
const watchBuffer = 100

// store is storage.Interface over one etcd client.
type store struct {
	client *clientv3.Client
}

var _ storage.Interface = (*store)(nil)

// New returns a storage.Interface that keeps keys in etcd through client. Its Close
// closes client.
func New(client *clientv3.Client) storage.Interface {
	return &store{client: client}
}

// Get implements storage.Interface.
func (s *store) Get(ctx context.Context, key string) (*storage.KeyValue, error) {
	var opts []clientv3.OpOption
	if storage.StaleReadsAllowed(ctx) {
		opts = append(opts, clientv3.WithSerializable())
	}
	resp, err := s.client.Get(ctx, key, opts...)
	if err != nil {
		return nil, fmt.Errorf("get %q: %w", key, mapError(err))
	}
	if len(resp.Kvs) == 0 {
		return nil, &storage.KeyError{Key: key, Err: storage.ErrNotFound}
	}
	kv := toKeyValue(resp.Kvs[0])
	return &kv, nil
}

// List implements storage.Interface. The range response's Count covers the whole range
// from the start key, so RemainingCount needs no second query.
func (s *store) List(ctx context.Context, prefix string, opts storage.ListOptions) (*storage.ListResult, error) {
	start, end := rangeOf(prefix)
	if opts.StartKey > start {
		start = opts.StartKey
	}
	var listOpts []clientv3.OpOption
	if opts.Revision > 0 {
		listOpts = append(listOpts, clientv3.WithRev(opts.Revision))
	}
	if storage.StaleReadsAllowed(ctx) {
		listOpts = append(listOpts, clientv3.WithSerializable())
	}
	if end != "\x00" && start >= end {
		// A start key past the prefix selects nothing, and etcd rejects an inverted range:
		// a count-only read still checks the revision and returns the header.
		start, listOpts = prefix, append(listOpts, clientv3.WithCountOnly())
	} else {
		listOpts = append(listOpts, clientv3.WithRange(end))
		if opts.Limit > 0 {
			listOpts = append(listOpts, clientv3.WithLimit(opts.Limit))
		}
	}
	result := &storage.ListResult{Revision: opts.Revision}
	resp, err := s.client.Get(ctx, start, listOpts...)
	if err != nil {
		return nil, fmt.Errorf("list %q at revision %d: %w", prefix, opts.Revision, mapError(err))
	}
	if result.Revision == 0 {
		result.Revision = resp.Header.Revision
	}
	result.Items = make([]storage.KeyValue, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		result.Items = append(result.Items, toKeyValue(kv))
	}
	result.More = resp.More
	if resp.More {
		result.RemainingCount = resp.Count - int64(len(resp.Kvs))
	}
	return result, nil
}

// Create implements storage.Interface.
func (s *store) Create(ctx context.Context, key string, value []byte, ops ...storage.Op) (int64, error) {
	t := newTxn(key, ops)
	t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
	t.then = append(t.then, clientv3.OpPut(key, string(value)))
	resp, err := t.commit(ctx, s.client)
	if err != nil {
		return 0, fmt.Errorf("create %q: %w", key, mapError(err))
	}
	if !resp.Succeeded {
		if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
			return 0, &storage.KeyError{Key: key, Err: storage.ErrExists}
		}
		if failed := t.failedKey(resp); failed != nil {
			return 0, failed
		}
		return 0, fmt.Errorf("create %q: transaction failed with every condition met", key)
	}
	return resp.Header.Revision, nil
}

// Update implements storage.Interface. The key must exist: a zero expectRevision never
// matches a stored key.
func (s *store) Update(ctx context.Context, key string, value []byte, expectRevision int64, ops ...storage.Op) (int64, error) {
	t := newTxn(key, ops)
	t.cmps = append(t.cmps,
		clientv3.Compare(clientv3.CreateRevision(key), ">", 0),
		clientv3.Compare(clientv3.ModRevision(key), "=", expectRevision))
	t.then = append(t.then, clientv3.OpPut(key, string(value)))
	resp, err := t.commit(ctx, s.client)
	if err != nil {
		return 0, fmt.Errorf("update %q: %w", key, mapError(err))
	}
	if !resp.Succeeded {
		if err := t.mainKeyError(resp, expectRevision); err != nil {
			return 0, err
		}
		if failed := t.failedKey(resp); failed != nil {
			return 0, failed
		}
		return 0, &storage.KeyError{Key: key, Err: storage.ErrConflict}
	}
	return resp.Header.Revision, nil
}

// Delete implements storage.Interface.
func (s *store) Delete(ctx context.Context, key string, expectRevision int64, ops ...storage.Op) (*storage.KeyValue, error) {
	t := newTxn(key, ops)
	t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(key), ">", 0))
	if expectRevision != 0 {
		t.cmps = append(t.cmps, clientv3.Compare(clientv3.ModRevision(key), "=", expectRevision))
	}
	t.then = append(t.then, clientv3.OpDelete(key, clientv3.WithPrevKV()))
	resp, err := t.commit(ctx, s.client)
	if err != nil {
		return nil, fmt.Errorf("delete %q: %w", key, mapError(err))
	}
	if !resp.Succeeded {
		if err := t.mainKeyError(resp, expectRevision); err != nil {
			return nil, err
		}
		if failed := t.failedKey(resp); failed != nil {
			return nil, failed
		}
		return nil, &storage.KeyError{Key: key, Err: storage.ErrConflict}
	}
	deleted := resp.Responses[len(t.then)-1].GetResponseDeleteRange()
	if deleted == nil || len(deleted.PrevKvs) == 0 {
		// Only a key deleted between the comparison and the delete could get here, and
		// etcd transactions are serializable, so this is a broken server.
		return nil, fmt.Errorf("delete %q: etcd returned no previous value", key)
	}
	kv := toKeyValue(deleted.PrevKvs[0])
	kv.ModRevision = resp.Header.Revision
	return &kv, nil
}

// Watch implements storage.Interface. A watch "from now" first reads the current
// revision so that every change committed after Watch returns is delivered, which a bare
// etcd watch without a start revision does not promise.
func (s *store) Watch(ctx context.Context, prefix string, fromRevision int64) (<-chan storage.Event, error) {
	if fromRevision <= 0 {
		rev, err := s.Revision(ctx)
		if err != nil {
			return nil, fmt.Errorf("watch %q: %w", prefix, err)
		}
		fromRevision = rev
	}
	start, end := rangeOf(prefix)
	out := make(chan storage.Event, watchBuffer)
	go func() {
		defer close(out)
		// next is the first revision not delivered yet: a watch resumed from it loses
		// and repeats nothing.
		next := fromRevision + 1
		for attempt := 0; ; attempt++ {
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			wch := s.client.Watch(wctx, start,
				clientv3.WithRange(end),
				clientv3.WithRev(next),
				clientv3.WithPrevKV(),
				clientv3.WithProgressNotify())
			resume, delivered := forward(ctx, s.client.Ctx(), out, prefix, next-1, wch, &next)
			cancel()
			if !resume {
				return
			}
			if delivered {
				attempt = 0
			}
			// The member the watch was on went away or lost its leader: resume on
			// whichever member the client reaches next, after a pause that grows while
			// no member serves the watch (a cluster without quorum).
			select {
			case <-time.After(min(watchRetry<<min(attempt, 5), watchRetryMax)):
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// Pauses between attempts to resume a watch whose member went away.
const (
	watchRetry    = 50 * time.Millisecond
	watchRetryMax = 2 * time.Second
)

// forward sends the storage events of one etcd watch to out, advancing *next past
// what it delivered, until the watch ends. It returns resume when etcd ended the watch
// with an error other than a compaction: the member stopped or lost its leader (etcd's
// "no leader", which WithRequireLeader turns a member's shutdown into), which a new
// watch from *next overcomes on another member; so does a watch etcd cancelled without
// a reason. The caller's context ending, a compaction or the client closing (clientCtx
// ending) end the stream, the last two with an Error event.
// delivered says whether anything reached out.
func forward(ctx, clientCtx context.Context, out chan<- storage.Event, prefix string, fromRevision int64, wch clientv3.WatchChan, next *int64) (resume, delivered bool) {
	for resp := range wch {
		if err := resp.Err(); err != nil && resp.CompactRevision == 0 && !errors.Is(err, rpctypes.ErrCompacted) && ctx.Err() == nil {
			return true, delivered
		}
		for _, ev := range translate(prefix, fromRevision, resp) {
			select {
			case out <- ev:
				delivered = true
			case <-ctx.Done():
				return false, delivered
			}
			if ev.Type == storage.Error {
				return false, delivered
			}
			*next = max(*next, ev.Revision+1)
		}
	}
	if ctx.Err() == nil && clientCtx.Err() == nil {
		// etcd cancelled the watch without a reason (as a member going away may).
		return true, delivered
	}
	if ctx.Err() == nil {
		// The client was closed under the watch: say so rather than end silently.
		select {
		case out <- storage.Event{Type: storage.Error, Err: fmt.Errorf("watch %q: etcd client closed", prefix)}:
		case <-ctx.Done():
		}
	}
	return false, delivered
}

// translate turns one etcd watch response into storage events; a failed watch becomes a
// single Error event.
func translate(prefix string, fromRevision int64, resp clientv3.WatchResponse) []storage.Event {
	if resp.CompactRevision != 0 {
		return []storage.Event{{Type: storage.Error, Err: fmt.Errorf("watch %q from revision %d (compacted up to %d): %w",
			prefix, fromRevision, resp.CompactRevision, storage.ErrCompacted)}}
	}
	if err := resp.Err(); err != nil {
		return []storage.Event{{Type: storage.Error, Err: fmt.Errorf("watch %q: %w", prefix, mapError(err))}}
	}
	if resp.IsProgressNotify() {
		return []storage.Event{{Type: storage.Progress, Revision: resp.Header.Revision}}
	}
	events := make([]storage.Event, 0, len(resp.Events))
	for _, e := range resp.Events {
		ev := storage.Event{Key: string(e.Kv.Key), Revision: e.Kv.ModRevision}
		if e.PrevKv != nil {
			ev.PrevValue = e.PrevKv.Value
		}
		switch {
		case e.Type == mvccpb.DELETE:
			ev.Type = storage.Deleted
		case e.IsCreate():
			ev.Type = storage.Added
			ev.Value = e.Kv.Value
			ev.PrevValue = nil
		default:
			ev.Type = storage.Modified
			ev.Value = e.Kv.Value
		}
		events = append(events, ev)
	}
	return events
}

// Compact implements storage.Interface. Compacting at or below the already compacted
// revision gives ErrCompacted, as etcd does.
func (s *store) Compact(ctx context.Context, revision int64) error {
	if _, err := s.client.Compact(ctx, revision); err != nil {
		return fmt.Errorf("compact at revision %d: %w", revision, mapError(err))
	}
	return nil
}

// Revision implements storage.Interface with a count-only read of one key, the cheapest
// request that returns the store's header.
func (s *store) Revision(ctx context.Context) (int64, error) {
	opts := []clientv3.OpOption{clientv3.WithCountOnly()}
	if storage.StaleReadsAllowed(ctx) {
		opts = append(opts, clientv3.WithSerializable())
	}
	resp, err := s.client.Get(ctx, "/", opts...)
	if err != nil {
		return 0, fmt.Errorf("read revision: %w", mapError(err))
	}
	return resp.Header.Revision, nil
}

// Close implements storage.Interface by closing the client.
func (s *store) Close() error {
	err := s.client.Close()
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("close etcd client: %w", err)
	}
	return nil
}

// txn is one write transaction under construction: the main key, the caller's extra
// ops, and the else-branch reads that explain a failure.
type txn struct {
	key  string
	ops  []storage.Op
	cmps []clientv3.Cmp
	then []clientv3.Op
}

// newTxn starts a transaction whose then-branch begins with ops and whose conditions
// require every MustNotExist op's key to be absent.
func newTxn(key string, ops []storage.Op) *txn {
	t := &txn{key: key, ops: ops}
	for _, op := range ops {
		if op.MustNotExist {
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(op.Key), "=", 0))
		}
		if op.Delete {
			t.then = append(t.then, clientv3.OpDelete(op.Key))
		} else {
			t.then = append(t.then, clientv3.OpPut(op.Key, string(op.Value)))
		}
	}
	return t
}

// commit runs the transaction; its else branch reads the main key and then every
// MustNotExist key, in that order, without values.
func (t *txn) commit(ctx context.Context, client *clientv3.Client) (*clientv3.TxnResponse, error) {
	elseOps := []clientv3.Op{clientv3.OpGet(t.key, clientv3.WithKeysOnly())}
	for _, op := range t.ops {
		if op.MustNotExist {
			elseOps = append(elseOps, clientv3.OpGet(op.Key, clientv3.WithKeysOnly()))
		}
	}
	return client.Txn(ctx).If(t.cmps...).Then(t.then...).Else(elseOps...).Commit()
}

// mainKeyError explains a failed Update or Delete by the main key's state: absent gives
// ErrNotFound, a different revision ErrConflict, and nil means the main key was fine.
func (t *txn) mainKeyError(resp *clientv3.TxnResponse, expectRevision int64) error {
	r := resp.Responses[0].GetResponseRange()
	if r == nil || len(r.Kvs) == 0 {
		return &storage.KeyError{Key: t.key, Err: storage.ErrNotFound}
	}
	if expectRevision != 0 && r.Kvs[0].ModRevision != expectRevision {
		return &storage.KeyError{Key: t.key, Err: storage.ErrConflict}
	}
	return nil
}

// failedKey returns the ErrExists error of the first MustNotExist op whose key exists, or
// nil.
func (t *txn) failedKey(resp *clientv3.TxnResponse) error {
	i := 1
	for _, op := range t.ops {
		if !op.MustNotExist {
			continue
		}
		r := resp.Responses[i].GetResponseRange()
		i++
		if r != nil && len(r.Kvs) > 0 {
			return &storage.KeyError{Key: op.Key, Err: storage.ErrExists}
		}
	}
	return nil
}

// rangeOf returns the etcd key range [start, end) holding the keys under prefix; the
// empty prefix is every key, which etcd spells as the range from "\x00" to "\x00".
func rangeOf(prefix string) (start, end string) {
	if prefix == "" {
		return "\x00", "\x00"
	}
	return prefix, clientv3.GetPrefixRangeEnd(prefix)
}

// toKeyValue copies an etcd key-value into the storage form.
func toKeyValue(kv *mvccpb.KeyValue) storage.KeyValue {
	return storage.KeyValue{
		Key:            string(kv.Key),
		Value:          kv.Value,
		ModRevision:    kv.ModRevision,
		CreateRevision: kv.CreateRevision,
	}
}

// mapError turns etcd's compaction error into storage.ErrCompacted, leaves the caller's
// own context errors as they are, and marks every other failure as the store's
// (storage.UnavailableError): lost quorum, etcd's request timeout, no member reachable.
func mapError(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return storage.ErrCompacted
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return &storage.UnavailableError{Err: err}
}
