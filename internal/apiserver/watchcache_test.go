package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/storage"
	"github.com/tranche/tranche/internal/storage/memory"
)

// watchCountingStore counts the storage watches opened per prefix.
type watchCountingStore struct {
	storage.Interface
	mu      sync.Mutex
	watches map[string]int
}

func (c *watchCountingStore) Watch(ctx context.Context, prefix string, from int64) (<-chan storage.Event, error) {
	c.mu.Lock()
	c.watches[prefix]++
	c.mu.Unlock()
	return c.Interface.Watch(ctx, prefix, from)
}

type cacheFixture struct {
	*fixture
	api      *Server
	counting *watchCountingStore
}

func newCacheFixture(t *testing.T) *cacheFixture {
	t.Helper()
	store := memory.New(50 * time.Millisecond)
	counting := &watchCountingStore{Interface: store, watches: map[string]int{}}
	api, err := New(Config{Storage: counting, Resources: testResources()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	f := &cacheFixture{fixture: &fixture{t: t, store: store, srv: srv, client: client, ctx: ctx}, api: api, counting: counting}
	for _, ns := range []string{"default", "other"} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// collect reads n events (bookmarks skipped) from w as "TYPE name".
func collect(t *testing.T, ctx context.Context, w watch.Interface, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v", got)
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error %#v after %v", ev.Object, got)
			}
			got = append(got, fmt.Sprintf("%s %s", ev.Type, ev.Object.(*v1.ConfigMap).Name))
		case <-ctx.Done():
			t.Fatalf("timed out after %v", got)
		}
	}
	return got
}

// TestWatchCacheFanOut checks that many watches of one resource, with different
// namespaces, selectors and formats, share one storage watch and each see exactly
// their own events.
func TestWatchCacheFanOut(t *testing.T) {
	f := newCacheFixture(t)
	jsonCfg := &rest.Config{Host: f.srv.URL, QPS: 1000, Burst: 1000}
	jsonCfg.ContentType = "application/json"
	jsonCfg.AcceptContentTypes = "application/json"
	jsonClient := kubernetes.NewForConfigOrDie(jsonCfg)
	list, err := f.client.CoreV1().ConfigMaps("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv := list.ResourceVersion
	tests := []struct {
		name   string
		client kubernetes.Interface
		ns     string
		opts   metav1.ListOptions
		want   []string
	}{
		{"all namespaces", f.client, "", metav1.ListOptions{}, []string{"ADDED a", "ADDED b", "MODIFIED a", "DELETED b"}},
		{"one namespace", f.client, "default", metav1.ListOptions{}, []string{"ADDED a", "MODIFIED a"}},
		{"other namespace as JSON", jsonClient, "other", metav1.ListOptions{}, []string{"ADDED b", "DELETED b"}},
		{"label selector", f.client, "default", metav1.ListOptions{LabelSelector: "team=x"}, []string{"ADDED a", "DELETED a"}},
		{"field selector as JSON", jsonClient, "", metav1.ListOptions{FieldSelector: "metadata.name=b"}, []string{"ADDED b", "DELETED b"}},
	}
	watches := make([]watch.Interface, len(tests))
	for i, tt := range tests {
		opts := tt.opts
		opts.ResourceVersion = rv
		opts.AllowWatchBookmarks = true
		w, err := tt.client.CoreV1().ConfigMaps(tt.ns).Watch(f.ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		watches[i] = w
	}
	a, err := f.client.CoreV1().ConfigMaps("default").Create(f.ctx, makeConfigMap("a", func(cm *v1.ConfigMap) { cm.Labels = map[string]string{"team": "x"} }), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CoreV1().ConfigMaps("other").Create(f.ctx, makeConfigMap("b", func(cm *v1.ConfigMap) { cm.Namespace = "other" }), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.Labels["team"] = "y"
	if _, err := f.client.CoreV1().ConfigMaps("default").Update(f.ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.client.CoreV1().ConfigMaps("other").Delete(f.ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		got := collect(t, f.ctx, watches[i], len(tt.want))
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%s: events %v, want %v", tt.name, got, tt.want)
		}
	}
	f.counting.mu.Lock()
	defer f.counting.mu.Unlock()
	if n := f.counting.watches["/registry/core/configmaps/"]; n != 1 {
		t.Errorf("storage watches of configmaps: %d, want 1 for %d API watches (all: %v)", n, len(tests), f.counting.watches)
	}
}

// TestWatchCacheWindow checks the ring's limits: a watch from a revision the ring no
// longer holds is 410 Gone, one from inside it replays from memory, and a watch that
// falls behind the ring ends with an ERROR 410 event.
func TestWatchCacheWindow(t *testing.T) {
	f := newCacheFixture(t)
	cms := f.client.CoreV1().ConfigMaps("default")
	cache := f.api.lookup("", "v1", "configmaps").cache
	cache.capacity = 3
	base, err := cms.List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The first watch starts the cache at base.
	w, err := cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: base.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	var revs []string
	for i := 0; i < 5; i++ {
		cm, err := cms.Create(f.ctx, makeConfigMap(fmt.Sprintf("c%d", i), nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, cm.ResourceVersion)
	}
	// Wait until the cache holds the last create.
	deadline := time.Now().Add(5 * time.Second)
	for {
		cache.mu.Lock()
		n := len(cache.ring)
		last := int64(0)
		if n > 0 {
			last = cache.ring[n-1].rev
		}
		cache.mu.Unlock()
		if fmt.Sprint(last) == revs[4] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cache never caught up")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// As kube-apiserver's watch cache: the watch is accepted (200) and its one event is
	// an ERROR carrying 410 Expired, on which client-go's reflector relists.
	w, err = cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: base.ResourceVersion})
	if err != nil {
		t.Fatalf("watch from before the ring: %v, want an ERROR event", err)
	}
	select {
	case ev := <-w.ResultChan():
		st, ok := ev.Object.(*metav1.Status)
		want := fmt.Sprintf("too old resource version: %s (%s)", base.ResourceVersion, revs[1])
		if ev.Type != watch.Error || !ok || st.Code != http.StatusGone || st.Reason != metav1.StatusReasonExpired || st.Message != want {
			t.Fatalf("watch from before the ring: %s %+v, want ERROR 410 Expired %q", ev.Type, ev.Object, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch from before the ring: no event")
	}
	w.Stop()

	w, err = cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: revs[1]})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got := collect(t, f.ctx, w, 3)
	if want := "ADDED c2,ADDED c3,ADDED c4"; strings.Join(got, ",") != want {
		t.Errorf("replay from the ring: %v, want %s", got, want)
	}

	// A reader left behind by more than the ring holds ends with 410.
	rev4, _ := parseRev(revs[4])
	cur, err := cache.open(f.ctx, rev4)
	if err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 9; i++ {
		if _, err := cms.Create(f.ctx, makeConfigMap(fmt.Sprintf("c%d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		_, _, changed, ended, err := cur.next()
		if ended {
			if st := watchErrorStatus(err, rev4); err == nil || st.Code != http.StatusGone {
				t.Fatalf("lagging reader ended with %v, want 410", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lagging reader never expired")
		}
		select {
		case <-changed:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func parseRev(s string) (int64, error) {
	var n int64
	_, err := fmt.Sscan(s, &n)
	return n, err
}

// TestWatchCacheBookmarks checks that storage progress reaches watches asking for
// bookmarks, never behind an event already sent.
func TestWatchCacheBookmarks(t *testing.T) {
	f := newCacheFixture(t)
	cms := f.client.CoreV1().ConfigMaps("default")
	base, _ := cms.List(f.ctx, metav1.ListOptions{})
	w, err := cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: base.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cm, err := cms.Create(f.ctx, makeConfigMap("a", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created, _ := parseRev(cm.ResourceVersion)
	sawAdded := false
	for {
		select {
		case ev := <-w.ResultChan():
			switch ev.Type {
			case watch.Added:
				sawAdded = true
			case watch.Bookmark:
				rv, _ := parseRev(ev.Object.(*v1.ConfigMap).ResourceVersion)
				if sawAdded && rv >= created {
					return
				}
				if !sawAdded && rv >= created {
					t.Fatalf("bookmark at %d before the ADDED event at %d", rv, created)
				}
			default:
				t.Fatalf("unexpected %s", ev.Type)
			}
		case <-f.ctx.Done():
			t.Fatal("no bookmark after the ADDED event")
		}
	}
}

// TestWatchCacheSharesEncodings checks that an event is encoded once per format.
func TestWatchCacheSharesEncodings(t *testing.T) {
	ev := &cacheEvent{typ: storage.Added, cur: makeConfigMap("a", nil)}
	ev.cur.GetObjectKind().SetGroupVersionKind(v1.SchemeGroupVersion.WithKind("ConfigMap"))
	first := map[bool][]byte{}
	for i := 0; i < 3; i++ {
		for _, pb := range []bool{false, true} {
			data, err := ev.frame(watch.Added, false, pb)
			if err != nil || len(data) == 0 {
				t.Fatal(err)
			}
			if prev, ok := first[pb]; ok && &prev[0] != &data[0] {
				t.Errorf("protobuf=%v: event encoded again", pb)
			}
			first[pb] = data
		}
	}
	if len(ev.frames) != 2 {
		t.Errorf("%d encodings kept for 2 formats", len(ev.frames))
	}
}

// TestWatchCacheFutureStart checks that a first watch from a revision in the future
// does not make every ordinary watch too old.
func TestWatchCacheFutureStart(t *testing.T) {
	f := newCacheFixture(t)
	cms := f.client.CoreV1().ConfigMaps("default")
	base, err := cms.List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rev, _ := parseRev(base.ResourceVersion)
	w, err := cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: fmt.Sprint(rev + 1000)})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	w, err = cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: base.ResourceVersion})
	if err != nil {
		t.Fatalf("watch from the current revision after a future one: %v", err)
	}
	defer w.Stop()
	if _, err := cms.Create(f.ctx, makeConfigMap("a", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, f.ctx, w, 1); got[0] != "ADDED a" {
		t.Errorf("events %v, want [ADDED a]", got)
	}
}

// TestCloseEndsWatches checks that Close stops the caches' storage watches and so
// ends the API watches they serve.
func TestCloseEndsWatches(t *testing.T) {
	f := newCacheFixture(t)
	w, err := f.client.CoreV1().ConfigMaps("default").Watch(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	f.api.Close()
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return
			}
		case <-f.ctx.Done():
			t.Fatal("watch still open after Close")
		}
	}
}

// TestWatchCacheStartedLate: a watch from a revision older than the cache's start (the
// cache starts with its first watch, which may come after a client read the older
// revision) is served from storage, as kube-apiserver's cache, started with the server,
// would serve it; and it ends with the server.
func TestWatchCacheStartedLate(t *testing.T) {
	f := newCacheFixture(t)
	cms := f.client.CoreV1().ConfigMaps("default")
	a, err := cms.Create(f.ctx, makeConfigMap("a", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(f.ctx, makeConfigMap("b", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := cms.List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The first watch starts the cache after b.
	first, err := cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop()
	late, err := cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: a.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Stop()
	if _, err := cms.Create(f.ctx, makeConfigMap("c", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(collect(t, f.ctx, late, 2), ","), "ADDED b,ADDED c"; got != want {
		t.Errorf("watch from before the cache started: %s, want %s", got, want)
	}
	if got := collect(t, f.ctx, first, 1); got[0] != "ADDED c" {
		t.Errorf("the cache's own watch: %v, want [ADDED c]", got)
	}
	f.api.Close()
	select {
	case _, ok := <-late.ResultChan():
		for ok {
			_, ok = <-late.ResultChan()
		}
	case <-time.After(5 * time.Second):
		t.Error("the watch served from storage outlived the server's Close")
	}
}
