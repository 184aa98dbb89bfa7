package apiserver

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/storage"
)

// nsCacheRetry spaces attempts to (re)start the namespace watch after a failure.
const nsCacheRetry = time.Second

// nsState is what the cache knows of one namespace at revision rev.
type nsState struct {
	rev int64
	// gone marks a deletion, kept so that an older event cannot bring the name back.
	gone        bool
	terminating bool
	// labels are the namespace's labels (a copy, never changed), for admission steps
	// that depend on them (Pod Security).
	labels map[string]string
}

// stateOf is what the cache keeps of a namespace object stored at rev.
func stateOf(obj runtime.Object, rev int64) nsState {
	st := nsState{rev: rev}
	if m, err := meta.Accessor(obj); err == nil {
		st.terminating = m.GetDeletionTimestamp() != nil
		st.labels = maps.Clone(m.GetLabels())
	}
	return st
}

// namespaceCache answers "does this namespace exist, is it terminating, what are its
// labels" for every namespaced create and every Pod Security evaluation without a
// linearizable read each time. It is fed by one storage watch of the namespaces prefix
// (started on first use, restarted after a failure) and by this server's own namespace
// writes, applied synchronously so that a create right after a delete on this server is
// refused. Entries only move forward in revision, so a late watch event never undoes a
// newer write. Until the watch runs, and for names it does not hold, lookups read the
// store.
type namespaceCache struct {
	s      *Server
	prefix string

	mu sync.Mutex
	// synced is true while the watch runs; epoch counts (re)starts, so that a live read
	// begun under an older watch does not fill the new one's map.
	synced    bool
	epoch     int64
	starting  bool
	lastStart time.Time
	names     map[string]nsState
}

func newNamespaceCache(s *Server, prefix string) *namespaceCache {
	return &namespaceCache{s: s, prefix: prefix, names: map[string]nsState{}}
}

// lookup returns whether ns exists and whether it is terminating, reading the store
// when the cache cannot answer.
func (c *namespaceCache) lookup(ctx context.Context, ns string) (exists, terminating bool, err error) {
	st, exists, err := c.state(ctx, ns)
	return exists, st.terminating, err
}

// state returns what the cache knows of ns and whether it exists, reading the store
// when the cache cannot answer.
func (c *namespaceCache) state(ctx context.Context, ns string) (nsState, bool, error) {
	c.mu.Lock()
	st, ok := c.names[ns]
	synced, epoch := c.synced, c.epoch
	if !synced && !c.starting && time.Since(c.lastStart) >= nsCacheRetry && c.s.bg.Err() == nil {
		c.starting = true
		c.lastStart = time.Now()
		go c.run()
	}
	c.mu.Unlock()
	if synced && ok && !st.gone {
		return st, true, nil
	}
	nsEntry := c.s.lookup("", "v1", "namespaces")
	obj, rev, err := nsEntry.store.get(ctx, "", ns)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nsState{}, false, nil
		}
		return nsState{}, false, err
	}
	st = stateOf(obj, rev)
	c.mu.Lock()
	if c.synced && c.epoch == epoch {
		c.applyLocked(ns, st)
	}
	c.mu.Unlock()
	return st, true, nil
}

// observe records a namespace write of this server (obj nil: deleted) at rev.
func (c *namespaceCache) observe(name string, obj runtime.Object, rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.synced {
		return
	}
	if obj == nil {
		c.applyLocked(name, nsState{rev: rev, gone: true})
		return
	}
	c.applyLocked(name, stateOf(obj, rev))
}

func (c *namespaceCache) applyLocked(name string, st nsState) {
	if cur, ok := c.names[name]; ok && cur.rev >= st.rev {
		return
	}
	c.names[name] = st
}

// run lists the namespaces, then follows the watch until it ends; the cache is then
// unsynced and the next lookup starts it again.
func (c *namespaceCache) run() {
	ctx, cancel := context.WithCancel(c.s.bg)
	defer cancel()
	events, err := c.start(ctx)
	c.mu.Lock()
	c.starting = false
	c.mu.Unlock()
	if err != nil {
		c.s.log.Warn("namespace cache: cannot watch namespaces", "err", err)
		return
	}
	for ev := range events {
		if ev.Type == storage.Error {
			break
		}
		c.apply(ev)
	}
	c.mu.Lock()
	c.synced = false
	c.names = map[string]nsState{}
	c.mu.Unlock()
}

// start fills the map from a list and opens the watch that continues it.
func (c *namespaceCache) start(ctx context.Context) (<-chan storage.Event, error) {
	nsEntry := c.s.lookup("", "v1", "namespaces")
	names := map[string]nsState{}
	var rev int64
	opts := storage.ListOptions{}
	for {
		page, err := c.s.cfg.Storage.List(ctx, c.prefix, opts)
		if err != nil {
			return nil, fmt.Errorf("listing namespaces: %w", err)
		}
		rev = page.Revision
		for _, kv := range page.Items {
			obj, err := nsEntry.store.decode(kv.Value, kv.ModRevision)
			if err != nil {
				return nil, err
			}
			names[kv.Key[len(c.prefix):]] = stateOf(obj, kv.ModRevision)
		}
		if !page.More || len(page.Items) == 0 {
			break
		}
		opts = storage.ListOptions{Revision: rev, StartKey: page.Items[len(page.Items)-1].Key + "\x00"}
	}
	events, err := c.s.cfg.Storage.Watch(ctx, c.prefix, rev)
	if err != nil {
		return nil, fmt.Errorf("watching namespaces from %d: %w", rev, err)
	}
	c.mu.Lock()
	c.names = names
	c.synced = true
	c.epoch++
	c.mu.Unlock()
	return events, nil
}

func (c *namespaceCache) apply(ev storage.Event) {
	if !strings.HasPrefix(ev.Key, c.prefix) {
		// Progress events carry no key.
		return
	}
	name := ev.Key[len(c.prefix):]
	switch ev.Type {
	case storage.Added, storage.Modified:
		obj, err := c.s.lookup("", "v1", "namespaces").store.decode(ev.Value, ev.Revision)
		if err != nil {
			return
		}
		c.mu.Lock()
		c.applyLocked(name, stateOf(obj, ev.Revision))
		c.mu.Unlock()
	case storage.Deleted:
		c.mu.Lock()
		c.applyLocked(name, nsState{rev: ev.Revision, gone: true})
		c.mu.Unlock()
	}
}

// observeWrite tells the namespace cache about a write of e (obj nil: deleted).
func (s *Server) observeWrite(e *entry, name string, obj runtime.Object, rev int64) {
	if e.store.storedGVR.Group == "" && e.store.storedGVR.Resource == "namespaces" {
		s.namespaces.observe(name, obj, rev)
	}
}

// checkNamespaceOpen refuses creates in missing or terminating namespaces.
func (s *Server) checkNamespaceOpen(ctx context.Context, ns string, res *registry.Resource) error {
	if ns == "" {
		return apierrors.NewBadRequest("the server could not find the requested resource: a namespace is required")
	}
	exists, terminating, err := s.namespaces.lookup(ctx, ns)
	if err != nil {
		return err
	}
	if !exists {
		return apierrors.NewNotFound(s.lookup("", "v1", "namespaces").store.gr, ns)
	}
	if terminating {
		// Events may still be written while a namespace empties.
		if res.GVK.Kind == "Event" {
			return nil
		}
		return apierrors.NewForbidden(s.lookup(res.GVK.Group, res.GVK.Version, res.Plural).store.gr, "",
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	}
	return nil
}
