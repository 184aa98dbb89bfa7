package apiserver

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/storage"
	"github.com/tranche/tranche/internal/storage/memory"
	trtest "github.com/tranche/tranche/internal/testutil"
)

// TestWatchCacheDropsStaleEvents: once a burst of events is older than watchCacheFresh,
// the cache keeps only the newest watchCacheKeep (trimmed on the store's progress
// events, so also while idle); a watch from a dropped revision gets 410 Gone, one from
// the last dropped revision still sees everything after it.
func TestWatchCacheDropsStaleEvents(t *testing.T) {
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: testResources(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := client.CoreV1().ConfigMaps("default")
	cache := api.lookup("", "v1", "configmaps").cache
	w, err := cms.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	const n = watchCacheKeep + 5
	var revs []string
	for i := range n {
		cm, err := cms.Create(ctx, makeConfigMap(fmt.Sprintf("c%d", i), nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, cm.ResourceVersion)
	}
	ringLen := func() int {
		cache.mu.Lock()
		defer cache.mu.Unlock()
		return len(cache.ring)
	}
	trtest.Eventually(t, 10*time.Second, "the cache holds the burst", func() bool { return ringLen() == n })
	time.Sleep(200 * time.Millisecond) // progress events while fresh drop nothing
	if got := ringLen(); got != n {
		t.Fatalf("fresh events were dropped: %d left of %d", got, n)
	}
	offset.Store(int64(watchCacheFresh + time.Second))
	trtest.Eventually(t, 10*time.Second, "stale events are dropped while idle", func() bool { return ringLen() == watchCacheKeep })
	cache.mu.Lock()
	window := cache.window
	cache.mu.Unlock()
	if got := fmt.Sprint(window); got != revs[n-watchCacheKeep-1] {
		t.Errorf("window = %s, want the last dropped revision %s", got, revs[n-watchCacheKeep-1])
	}

	gone, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: revs[0]})
	if err == nil {
		ev := <-gone.ResultChan()
		gone.Stop()
		if st, ok := ev.Object.(*metav1.Status); ev.Type != watch.Error || !ok || st.Code != 410 {
			t.Errorf("watch from a dropped revision: %s %v, want ERROR 410", ev.Type, ev.Object)
		}
	} else if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("watch from a dropped revision: %v, want 410", err)
	}
	kept, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: revs[n-watchCacheKeep-1]})
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Stop()
	ev := <-kept.ResultChan()
	if cm, ok := ev.Object.(*v1.ConfigMap); ev.Type != watch.Added || !ok || cm.Name != fmt.Sprintf("c%d", n-watchCacheKeep) {
		t.Errorf("watch from the window: first event %s %v, want ADDED c%d", ev.Type, ev.Object, n-watchCacheKeep)
	}
}

// TestWatchCacheEndAfterLastEvents: a run that ends while a watch has not yet read its
// last events reports the end together with them. Nothing closes the changed channel
// after a run's end, so a watch told "not ended" there would wait until its timeout
// (seen as a watch of a removed custom resource that never ended).
func TestWatchCacheEndAfterLastEvents(t *testing.T) {
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: testResources()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	c := api.lookup("", "v1", "configmaps").cache
	c.mu.Lock()
	c.running, c.window, c.ended = true, 1, make(chan struct{})
	c.gen++
	cur := &cacheCursor{c: c, rev: 1, gen: c.gen, ended: c.ended}
	c.mu.Unlock()
	events := make(chan storage.Event)
	go c.run(func() {}, events, cur.gen)
	events <- storage.Event{Type: storage.Added, Key: "/registry/configmaps/default/a", Revision: 2}
	close(events)
	<-cur.ended
	got, _, _, ended, err := cur.next()
	if len(got) != 1 || got[0].rev != 2 || !ended || err != nil {
		t.Fatalf("next after the run ended: %d events, ended %v, err %v; want the event at revision 2 and ended", len(got), ended, err)
	}
}
