// Package storage is the key-value store the API server keeps objects in: one interface,
// implemented on etcd v3 (embedded or external) and by an in-memory fake for unit tests.
// Values are opaque bytes; revisions are etcd revisions and become resourceVersions.
package storage

import (
	"context"
	"errors"
)

// Errors returned by Interface implementations; test with errors.Is.
var (
	ErrNotFound  = errors.New("key not found")
	ErrExists    = errors.New("key already exists")
	ErrConflict  = errors.New("revision conflict")
	ErrCompacted = errors.New("revision compacted")
)

// UnavailableError is a failure of the store itself rather than of the request: no
// quorum, a member that does not answer, etcd's own request timeout. Err is the store's
// error as it gave it ("etcdserver: request timed out"); the same request may succeed
// later.
type UnavailableError struct {
	Err error
}

// Error returns the store's own message.
func (e *UnavailableError) Error() string { return e.Err.Error() }

// Unwrap returns the store's error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// staleReadsKey marks a context whose reads may be served from any recent state.
type staleReadsKey struct{}

// WithStaleReads returns a context whose Get, List and Revision may be answered
// from the state of whichever member the client reaches, without a round of consensus
// (etcd's serializable reads): what a resourceVersion="0" read asks for ("any state,
// the newest preferred"), and what still answers while the store has no quorum.
func WithStaleReads(ctx context.Context) context.Context {
	return context.WithValue(ctx, staleReadsKey{}, true)
}

// StaleReadsAllowed says whether ctx came from WithStaleReads.
func StaleReadsAllowed(ctx context.Context) bool {
	ok, _ := ctx.Value(staleReadsKey{}).(bool)
	return ok
}

// KeyError names the key an error is about (the main key or one of the extra Ops).
type KeyError struct {
	Key string
	Err error
}

// Error returns "<key>: <error>".
func (e *KeyError) Error() string { return e.Key + ": " + e.Err.Error() }

// Unwrap returns the underlying error, so errors.Is(err, ErrExists) and the like work.
func (e *KeyError) Unwrap() error { return e.Err }

// KeyValue is one stored key at the revision it was last modified.
type KeyValue struct {
	Key            string
	Value          []byte
	ModRevision    int64
	CreateRevision int64
}

// ListOptions selects a page of a prefix.
type ListOptions struct {
	// Revision lists the store as it was at that revision; 0 means the latest.
	Revision int64
	// Limit bounds the number of items; 0 means no limit.
	Limit int64
	// StartKey continues a list: items with keys >= StartKey (under the prefix).
	StartKey string
}

// ListResult is a page of a list.
type ListResult struct {
	Items []KeyValue
	// Revision is the store revision the list was read at.
	Revision int64
	// More is true when items remain after this page; RemainingCount counts them.
	More           bool
	RemainingCount int64
}

// Op is an extra write that must commit atomically with the main write of Create,
// Update or Delete (used to persist allocations together with the object).
type Op struct {
	Key   string
	Value []byte
	// Delete removes Key instead of writing Value.
	Delete bool
	// MustNotExist makes the whole transaction fail with a KeyError{Key, ErrExists}
	// when Key already exists.
	MustNotExist bool
}

// EventType says what happened to a key.
type EventType int

// Event types. Progress carries only a Revision: everything up to it has been sent.
// Error carries Err (ErrCompacted when the start revision is gone) and ends the stream.
const (
	Added EventType = iota
	Modified
	Deleted
	Progress
	Error
)

// Event is one change seen by a watch.
type Event struct {
	Type      EventType
	Key       string
	Value     []byte // new value (nil for Deleted)
	PrevValue []byte // value before the change (nil for Added)
	Revision  int64
	Err       error
}

// Interface is the store. All methods are safe for concurrent use.
type Interface interface {
	// Get returns the current value of key, or KeyError{key, ErrNotFound}.
	Get(ctx context.Context, key string) (*KeyValue, error)
	// List returns the keys under prefix, in key order. A compacted Revision gives ErrCompacted.
	List(ctx context.Context, prefix string, opts ListOptions) (*ListResult, error)
	// Create writes key if absent (else KeyError{key, ErrExists}) and returns the new revision.
	Create(ctx context.Context, key string, value []byte, ops ...Op) (int64, error)
	// Update writes key if its ModRevision is expectRevision (else ErrConflict; ErrNotFound
	// when absent) and returns the new revision. A zero expectRevision never matches.
	Update(ctx context.Context, key string, value []byte, expectRevision int64, ops ...Op) (int64, error)
	// Delete removes key if its ModRevision is expectRevision (0: any) and returns the
	// deleted value with the deletion's revision as ModRevision.
	Delete(ctx context.Context, key string, expectRevision int64, ops ...Op) (*KeyValue, error)
	// Watch streams changes under prefix with revisions > fromRevision (fromRevision 0:
	// from now). PrevValue is filled for Modified and Deleted. Progress events arrive
	// periodically when nothing changes. The channel closes when ctx ends or after Error.
	Watch(ctx context.Context, prefix string, fromRevision int64) (<-chan Event, error)
	// Compact discards history before revision.
	Compact(ctx context.Context, revision int64) error
	// Revision returns the store's current revision.
	Revision(ctx context.Context) (int64, error)
	// Close releases the client (and stops an embedded server it owns).
	Close() error
}
