package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/storage"
	"github.com/tranche/tranche/internal/storage/memory"
)

// noQuorum is a store that behaves as etcd without quorum once lost is set: writes and
// consistent reads wait until their context ends (the etcd client retries them), or, with
// failWrites, writes fail at once with etcd's own error; reads that allow stale state
// are answered from the member's state, as etcd's serializable reads are.
type noQuorum struct {
	*memory.Store
	lost, failWrites atomic.Bool
}

var errEtcdTimeout = errors.New("etcdserver: request timed out")

func (s *noQuorum) read(ctx context.Context) error {
	if !s.lost.Load() || storage.StaleReadsAllowed(ctx) {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (s *noQuorum) write(ctx context.Context) error {
	if !s.lost.Load() {
		return nil
	}
	if s.failWrites.Load() {
		return &storage.UnavailableError{Err: errEtcdTimeout}
	}
	<-ctx.Done()
	return ctx.Err()
}

func (s *noQuorum) Get(ctx context.Context, key string) (*storage.KeyValue, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, key)
}

func (s *noQuorum) List(ctx context.Context, prefix string, opts storage.ListOptions) (*storage.ListResult, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, prefix, opts)
}

func (s *noQuorum) Revision(ctx context.Context) (int64, error) {
	if err := s.read(ctx); err != nil {
		return 0, err
	}
	return s.Store.Revision(ctx)
}

func (s *noQuorum) Create(ctx context.Context, key string, value []byte, ops ...storage.Op) (int64, error) {
	if err := s.write(ctx); err != nil {
		return 0, err
	}
	return s.Store.Create(ctx, key, value, ops...)
}

func (s *noQuorum) Update(ctx context.Context, key string, value []byte, expect int64, ops ...storage.Op) (int64, error) {
	if err := s.write(ctx); err != nil {
		return 0, err
	}
	return s.Store.Update(ctx, key, value, expect, ops...)
}

// TestStoreWithoutQuorum: while the store can not commit, writes end within the request
// timeout with kube-apiserver's 504 Timeout, or with etcd's own error as a 500 without a
// reason when etcd gives one; resourceVersion="0" gets, lists and watches still answer
// from the state at hand; consistent reads time out; a bad ?timeout= is a 400.
func TestStoreWithoutQuorum(t *testing.T) {
	store := &noQuorum{Store: memory.New(50 * time.Millisecond)}
	api, err := New(Config{Storage: store, Resources: testResources(), RequestTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, makeConfigMap("before", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Creates check their namespace in the namespace cache, which the first create
	// started; until it has synced they read the store, which would wait like any
	// consistent read (on a loaded machine the store's failure came after the timeout).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		api.namespaces.mu.Lock()
		synced := api.namespaces.synced
		api.namespaces.mu.Unlock()
		if synced {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the namespace cache did not sync in 30 s")
		}
	}
	store.lost.Store(true)

	do := func(method, path, body string) (int, metav1.Status, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var st metav1.Status
		_ = json.Unmarshal(data, &st)
		return resp.StatusCode, st, string(data)
	}
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"during"}}`
	const cms = "/api/v1/namespaces/default/configmaps"
	for _, c := range []struct {
		name, method, path, body string
		failWrites               bool
		code                     int
		reason                   metav1.StatusReason
		message                  string
	}{
		{"create waiting on the store", http.MethodPost, cms, cm, false, 504, metav1.StatusReasonTimeout,
			"Timeout: request did not complete within requested timeout - context deadline exceeded"},
		{"create failed by the store", http.MethodPost, cms, cm, true, 500, metav1.StatusReasonUnknown, "etcdserver: request timed out"},
		{"consistent get", http.MethodGet, cms + "/before", "", false, 504, metav1.StatusReasonTimeout,
			"Timeout: request did not complete within requested timeout - context deadline exceeded"},
		{"consistent list", http.MethodGet, cms, "", false, 504, metav1.StatusReasonTimeout,
			"Timeout: request did not complete within requested timeout - context deadline exceeded"},
		{"a timeout that is not a duration", http.MethodGet, cms + "?timeout=soon", "", false, 400, metav1.StatusReasonBadRequest,
			`invalid timeout specified in the request URL - time: invalid duration "soon"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			store.failWrites.Store(c.failWrites)
			code, st, body := do(c.method, c.path, c.body)
			if code != c.code || st.Code != int32(c.code) || st.Reason != c.reason || st.Message != c.message {
				t.Errorf("%s %s: %d %s, want %d reason %q message %q", c.method, c.path, code, body, c.code, c.reason, c.message)
			}
		})
	}

	// resourceVersion="0" reads answer from the state at hand.
	if code, _, body := do(http.MethodGet, cms+"/before?resourceVersion=0", ""); code != 200 || !strings.Contains(body, `"name":"before"`) {
		t.Errorf("get with resourceVersion=0: %d %s", code, body)
	}
	l, err := client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "before" {
		t.Errorf("list with resourceVersion=0: %v %v", l, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	w, err := client.CoreV1().ConfigMaps("default").Watch(wctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatalf("watch with resourceVersion=0: %v", err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		if got, ok := ev.Object.(*v1.ConfigMap); !ok || got.Name != "before" {
			t.Errorf("watch with resourceVersion=0: first event %s %#v", ev.Type, ev.Object)
		}
	case <-wctx.Done():
		t.Error("watch with resourceVersion=0: no event")
	}

	// When the store commits again, so do writes.
	store.lost.Store(false)
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, makeConfigMap("after", nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create after the store returned: %v", err)
	}
}
