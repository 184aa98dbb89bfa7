package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// recorder counts informer notifications per object name.
type recorder struct {
	mu      sync.Mutex
	adds    map[string]int
	updates map[string]int
	deletes map[string]int
}

func newRecorder() *recorder {
	return &recorder{adds: map[string]int{}, updates: map[string]int{}, deletes: map[string]int{}}
}

func (r *recorder) handler() cache.ResourceEventHandlerFuncs {
	name := func(obj interface{}) string {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		return obj.(*v1.ConfigMap).Name
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { r.mu.Lock(); r.adds[name(obj)]++; r.mu.Unlock() },
		UpdateFunc: func(_, obj interface{}) { r.mu.Lock(); r.updates[name(obj)]++; r.mu.Unlock() },
		DeleteFunc: func(obj interface{}) { r.mu.Lock(); r.deletes[name(obj)]++; r.mu.Unlock() },
	}
}

func (r *recorder) counts(n string) (int, int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.adds[n], r.updates[n], r.deletes[n]
}

func startInformer(t *testing.T, c kubernetes.Interface, ns string, r *recorder) cache.SharedIndexInformer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(r.handler()); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return inf
}

// TestInformerAcrossRestartAndCompaction runs its own server: an informer sees adds,
// updates and deletes, keeps working across a server restart, and relists after a
// compaction made its watch revision too old.
func TestInformerAcrossRestartAndCompaction(t *testing.T) {
	s, err := startServer([]string{"--compact-interval", "1s"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop(); _ = os.RemoveAll(s.dataDir) })
	c := s.client(t)
	ctx := context.Background()
	ns := "informer"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	inf := startInformer(t, c, ns, rec)
	cms := c.CoreV1().ConfigMaps(ns)
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "one"}, Data: map[string]string{"v": "1"}}
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Patch(ctx, "one", "application/merge-patch+json", []byte(`{"data":{"v":"2"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "one", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "add, update and delete seen", func() (bool, string) {
		a, u, d := rec.counts("one")
		return a == 1 && u >= 1 && d == 1, fmt.Sprintf("adds %d updates %d deletes %d", a, u, d)
	})

	// Restart: the informer's watch breaks and resumes; nothing is lost.
	s.stop()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "two"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "informer sees an object created after the restart", func() (bool, string) {
		a, _, _ := rec.counts("two")
		_, exists, _ := inf.GetStore().GetByKey(ns + "/two")
		return a == 1 && exists, fmt.Sprintf("adds %d in store %v", a, exists)
	})

	// A watch from a revision older than the compaction gets 410 Gone.
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := list.ResourceVersion
	for i := 0; i < 5; i++ {
		if _, err := cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("churn-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "a watch from a compacted revision gets 410", func() (bool, string) {
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: old})
		if err != nil {
			return strings.Contains(err.Error(), "too old"), err.Error()
		}
		defer w.Stop()
		select {
		case ev := <-w.ResultChan():
			st, ok := ev.Object.(*metav1.Status)
			return ev.Type == watch.Error && ok && st.Code == http.StatusGone, fmt.Sprintf("%s %v", ev.Type, ev.Object)
		case <-time.After(2 * time.Second):
			return false, "no event"
		}
	})
	// The informer, whose watch position is also compacted by now, relists and stays correct.
	if _, err := cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "three"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "informer in sync after compaction", func() (bool, string) {
		keys := inf.GetStore().ListKeys()
		sort.Strings(keys)
		want := []string{"kube-root-ca.crt", "three", "two", "churn-0", "churn-1", "churn-2", "churn-3", "churn-4"}
		sort.Strings(want)
		for i := range want {
			want[i] = ns + "/" + want[i]
		}
		return strings.Join(keys, ",") == strings.Join(want, ","), strings.Join(keys, ",")
	})
}

// TestHealthAndVersionWithoutCredentials: anonymous requests are refused (401) except
// the health and version endpoints.
func TestAnonymousRequests(t *testing.T) {
	s := shared
	for _, tc := range []struct {
		path string
		code string
	}{{"/api/v1/namespaces", "401"}, {"/apis", "401"}, {"/healthz", "200"}, {"/readyz", "200"}, {"/version", "200"}} {
		out, err := exec.Command("curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", "https://"+s.listen+tc.path).Output()
		if err != nil {
			t.Fatalf("curl %s: %v", tc.path, err)
		}
		if string(out) != tc.code {
			t.Errorf("anonymous GET %s: HTTP %s, want %s", tc.path, out, tc.code)
		}
	}
}
