package apiserver

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/registry/core"
	"github.com/tranche/tranche/internal/storage/memory"
)

// TestResourceWithoutCode serves widgets.example.com, a resource built from its group,
// version and kind alone (registry.Unstructured: no Go type, no strategy of its own),
// and drives it with client-go's dynamic client: the generic handlers need nothing
// resource-specific, which is what CustomResourceDefinitions rely on.
func TestResourceWithoutCode(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	gvr := gvk.GroupVersion().WithResource("widgets")
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: []registry.Resource{
		core.NamespaceResource(),
		registry.Unstructured(gvk, "widgets", "widget", true),
	}})
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
	widgets := dynamic.NewForConfigOrDie(cfg).Resource(gvr).Namespace("default")

	w, err := widgets.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	in := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{"name": "w1", "labels": map[string]interface{}{"size": "big"}},
		"spec":     map[string]interface{}{"color": "blue"},
	}}
	created, err := widgets.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetUID() == "" || created.GetResourceVersion() == "" || created.GetNamespace() != "default" {
		t.Fatalf("created without server metadata: %v", created.Object["metadata"])
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added || ev.Object.(*unstructured.Unstructured).GetName() != "w1" {
			t.Fatalf("watch event %s %v", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event")
	}
	if _, err := widgets.Create(ctx, in, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	bad := in.DeepCopy()
	bad.SetName("Not_A_Name")
	if _, err := widgets.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name") {
		t.Fatalf("bad name: %v, want Invalid naming metadata.name", err)
	}

	patched, err := widgets.Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"color":"red"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c, _, _ := unstructured.NestedString(patched.Object, "spec", "color"); c != "red" {
		t.Fatalf("patched color %q", c)
	}
	got, err := widgets.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.SetNestedField(got.Object, "green", "spec", "color")
	if _, err := widgets.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := widgets.List(ctx, metav1.ListOptions{LabelSelector: "size=big"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.GetResourceVersion() == "" {
		t.Fatalf("list: %d items, resourceVersion %q", len(list.Items), list.GetResourceVersion())
	}
	if c, _, _ := unstructured.NestedString(list.Items[0].Object, "spec", "color"); c != "green" {
		t.Fatalf("listed color %q", c)
	}

	resources, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerResourcesForGroupVersion("example.com/v1")
	if err != nil {
		t.Fatal(err)
	}
	if len(resources.APIResources) != 1 || resources.APIResources[0].Name != "widgets" || resources.APIResources[0].Kind != "Widget" || !resources.APIResources[0].Namespaced {
		t.Fatalf("discovery: %+v", resources.APIResources)
	}

	if err := widgets.Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := widgets.Get(ctx, "w1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: %v, want NotFound", err)
	}
}
