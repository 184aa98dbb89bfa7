package apiserver

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/storage"
	"github.com/tranche/tranche/internal/storage/memory"
)

// countingStore counts the single-key reads of namespaces.
type countingStore struct {
	storage.Interface
	nsGets atomic.Int64
}

func (c *countingStore) Get(ctx context.Context, key string) (*storage.KeyValue, error) {
	if strings.HasPrefix(key, "/registry/core/namespaces/") {
		c.nsGets.Add(1)
	}
	return c.Interface.Get(ctx, key)
}

type nsFixture struct {
	*fixture
	counting *countingStore
	api      *Server
}

func newNSFixture(t *testing.T) *nsFixture {
	t.Helper()
	store := memory.New(50 * time.Millisecond)
	counting := &countingStore{Interface: store}
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
	f := &nsFixture{fixture: &fixture{t: t, store: store, srv: srv, client: client, ctx: ctx}, counting: counting, api: api}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return f
}

// waitSynced makes a namespaced create (which starts the cache) until the cache runs.
func (f *nsFixture) waitSynced() {
	f.t.Helper()
	for i := 0; ; i++ {
		if _, err := f.client.CoreV1().ConfigMaps("default").Create(f.ctx, makeConfigMap("", func(cm *v1.ConfigMap) { cm.GenerateName = "sync-" }), metav1.CreateOptions{}); err != nil {
			f.t.Fatal(err)
		}
		f.api.namespaces.mu.Lock()
		synced := f.api.namespaces.synced
		f.api.namespaces.mu.Unlock()
		if synced {
			return
		}
		if i > 200 {
			f.t.Fatal("namespace cache never synced")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *nsFixture) createIn(ns, name string) error {
	_, err := f.client.CoreV1().ConfigMaps(ns).Create(f.ctx, makeConfigMap(name, func(cm *v1.ConfigMap) { cm.Namespace = ns }), metav1.CreateOptions{})
	return err
}

func TestNamespaceCacheAvoidsReads(t *testing.T) {
	f := newNSFixture(t)
	f.waitSynced()
	before := f.counting.nsGets.Load()
	for i := 0; i < 20; i++ {
		if err := f.createIn("default", "c"+string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.counting.nsGets.Load() - before; n != 0 {
		t.Errorf("20 creates read the namespace %d times, want 0", n)
	}
}

func TestNamespaceCacheSemantics(t *testing.T) {
	f := newNSFixture(t)
	f.waitSynced()
	nss := f.client.CoreV1().Namespaces()

	// A namespace written behind the server's back is found by a live read at once.
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "direct", UID: "u"}}
	data, err := encodeStored(ns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Create(f.ctx, "/registry/core/namespaces/direct", data); err != nil {
		t.Fatal(err)
	}
	if err := f.createIn("direct", "x"); err != nil {
		t.Fatalf("create in a namespace just written to the store: %v", err)
	}

	// A just-created namespace is usable, and refuses creates right after its delete.
	if _, err := nss.Create(f.ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.createIn("fresh", "x"); err != nil {
		t.Fatalf("create in a just-created namespace: %v", err)
	}
	if err := nss.Delete(f.ctx, "fresh", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.createIn("fresh", "y"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "because it is being terminated") {
		t.Fatalf("create right after the namespace's delete: %v, want Forbidden", err)
	}

	// Missing namespaces are NotFound; one removed behind the server's back goes once
	// the watch reports it.
	if err := f.createIn("nowhere", "x"); !apierrors.IsNotFound(err) {
		t.Fatalf("create in a missing namespace: %v, want NotFound", err)
	}
	if _, err := f.store.Delete(f.ctx, "/registry/core/namespaces/direct", 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for err := f.createIn("direct", "y"); !apierrors.IsNotFound(err); err = f.createIn("direct", "y") {
		if time.Now().After(deadline) {
			t.Fatalf("create in a removed namespace: %v, want NotFound", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNamespaceCacheOrdering checks that entries only move forward in revision.
func TestNamespaceCacheOrdering(t *testing.T) {
	live := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	dying := live.DeepCopy()
	dying.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	tests := []struct {
		name            string
		steps           func(c *namespaceCache)
		exists, closing bool
	}{
		{"newer write wins over older event", func(c *namespaceCache) {
			c.observe("a", dying, 10)
			c.observe("a", live, 9)
		}, true, true},
		{"delete is not undone by an older event", func(c *namespaceCache) {
			c.observe("a", nil, 10)
			c.observe("a", live, 9)
		}, false, false},
		{"recreate after delete", func(c *namespaceCache) {
			c.observe("a", nil, 10)
			c.observe("a", live, 11)
		}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newNamespaceCache(nil, "/registry/core/namespaces/")
			c.synced = true
			tt.steps(c)
			st, ok := c.names["a"]
			if exists := ok && !st.gone; exists != tt.exists || st.terminating != tt.closing {
				t.Errorf("state %+v, want exists=%v terminating=%v", st, tt.exists, tt.closing)
			}
		})
	}
}
