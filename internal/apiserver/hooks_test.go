package apiserver

import (
	"net/http"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRegisteredHandlers drives the subresources the pod registry registers through
// the generic layer: eviction deletes through the generic delete path, a verb the
// handler does not list is a 405 naming the subresource, a streaming subresource
// without Config.Nodes is a 503, and an unknown subresource a 404.
func TestRegisteredHandlers(t *testing.T) {
	f := newFixture(t)
	pods := f.client.CoreV1().Pods("default")
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := pods.Create(f.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path, body string
		code               int
		message            string
	}{
		{"GET", "/api/v1/namespaces/default/pods/p/binding", "", http.StatusMethodNotAllowed, `get is not supported on resources of kind "pods/binding"`},
		{"PUT", "/api/v1/namespaces/default/pods/p/eviction", `{}`, http.StatusMethodNotAllowed, ``},
		{"GET", "/api/v1/namespaces/default/pods/p/log", "", http.StatusServiceUnavailable, `this API server is not configured to reach nodes and pods`},
		{"POST", "/api/v1/namespaces/default/pods/p/exec?command=true", "", http.StatusServiceUnavailable, ``},
		{"GET", "/api/v1/namespaces/default/pods/p/nothing", "", http.StatusNotFound, ``},
		{"POST", "/api/v1/namespaces/default/pods/p/binding", `{"target":{"kind":"Pod","name":"n1"}}`, http.StatusUnprocessableEntity, `Binding "" is invalid: target.kind: Unsupported value: "Pod": supported values: "Node"`},
	} {
		got := f.raw(tc.method, tc.path, "application/json", tc.body)
		if got.code != tc.code || (tc.message != "" && got.status.Message != tc.message) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, got.code, got.status.Message, tc.code, tc.message)
		}
	}
	got := f.raw("POST", "/api/v1/namespaces/default/pods/p/eviction", "application/json", `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p"}}`)
	if got.code != http.StatusCreated || got.status.Status != metav1.StatusSuccess {
		t.Fatalf("eviction: %d %s", got.code, got.body)
	}
	if _, err := pods.Get(f.ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("an unbound pod evicted must be gone: %v", err)
	}
	got = f.raw("POST", "/api/v1/namespaces/default/pods/p/eviction", "application/json", "")
	if got.code != http.StatusNotFound {
		t.Fatalf("evicting a missing pod with an empty body: %d %s", got.code, got.body)
	}
}
