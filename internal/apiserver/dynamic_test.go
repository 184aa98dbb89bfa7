package apiserver

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/registry/core"
	"github.com/tranche/tranche/internal/storage/memory"
)

// TestResourcesAddedAtRunTime adds a resource with two versions to a running server,
// serves it (CRUD, server-side apply, discovery) in both versions over one stored form,
// refuses a second owner of the same resource, and removes it: requests then answer 404
// and open watches end. Requests run concurrently with the changes (go test -race).
func TestResourcesAddedAtRunTime(t *testing.T) {
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: []registry.Resource{core.NamespaceResource()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	v1gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	v2gvr := v1gvr.GroupVersion().WithResource("gadgets")
	v2gvr.Version = "v2"
	if _, err := dyn.Resource(v1gvr).Namespace("default").List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("list before adding: %v, want NotFound", err)
	}

	// Readers race with the changes below.
	stopReaders := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stopReaders:
					return
				default:
				}
				_, _ = dyn.Resource(v1gvr).Namespace("default").List(ctx, metav1.ListOptions{})
				_, _ = discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerGroups()
			}
		}()
	}
	defer func() { close(stopReaders); wg.Wait() }()

	gadgets := func() []registry.Resource {
		r1 := registry.Unstructured(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}, "gadgets", "gadget", true)
		r2 := registry.Unstructured(schema.GroupVersionKind{Group: "example.com", Version: "v2", Kind: "Gadget"}, "gadgets", "gadget", true)
		return []registry.Resource{r2, r1}
	}
	if err := api.SetResources("gadgets.example.com", gadgets(), DynamicOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := api.SetResources("other", gadgets()[:1], DynamicOptions{}); err == nil {
		t.Fatal("a second owner of gadgets.example.com/v2 was accepted")
	}
	in := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Gadget",
		"metadata": map[string]interface{}{"name": "g1"}, "spec": map[string]interface{}{"size": "big"},
	}}
	if _, err := dyn.Resource(v1gvr).Namespace("default").Create(ctx, in, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := dyn.Resource(v2gvr).Namespace("default").Get(ctx, "g1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetAPIVersion() != "example.com/v2" {
		t.Fatalf("read through v2: apiVersion %q", got.GetAPIVersion())
	}
	applied, err := dyn.Resource(v2gvr).Namespace("default").Patch(ctx, "g1", types.ApplyPatchType,
		[]byte(`{"apiVersion":"example.com/v2","kind":"Gadget","metadata":{"name":"g1"},"spec":{"color":"red"}}`),
		metav1.PatchOptions{FieldManager: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	if c, _, _ := unstructured.NestedString(applied.Object, "spec", "color"); c != "red" || len(applied.GetManagedFields()) != 2 {
		t.Fatalf("applied: color %q, managedFields %v", c, applied.GetManagedFields())
	}
	groups, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range groups.Groups {
		if g.Name == "example.com" {
			found = true
			if g.PreferredVersion.Version != "v2" || len(g.Versions) != 2 {
				t.Fatalf("group example.com: %+v", g)
			}
		}
	}
	if !found {
		t.Fatal("example.com not in discovery")
	}

	w, err := dyn.Resource(v1gvr).Namespace("default").Watch(ctx, metav1.ListOptions{ResourceVersion: got.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	api.RemoveResources("gadgets.example.com")
	if _, err := dyn.Resource(v1gvr).Namespace("default").Get(ctx, "g1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after removal: %v, want NotFound", err)
	}
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return
			}
		case <-ctx.Done():
			t.Fatal("the watch did not end after removal")
		}
	}
}
