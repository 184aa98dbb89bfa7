package apiserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/registry/metrics"
	"github.com/tranche/tranche/internal/storage/memory"
)

// TestComputedResources: requests for computed resources (metrics.k8s.io here) reach
// their handler with the request's namespace, name and verb, only for served verbs;
// discovery lists them; one without a handler answers 503.
func TestComputedResources(t *testing.T) {
	podsGVR := schema.GroupVersionResource{Group: "metrics.k8s.io", Version: "v1beta1", Resource: "pods"}
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond),
		Resources: append(testResources(), metrics.NodeMetricsResource(), metrics.PodMetricsResource()),
		Computed: map[schema.GroupVersionResource]SubresourceHandler{
			podsGVR: func(ctx context.Context, w http.ResponseWriter, r *http.Request, req Request) error {
				writeJSON(w, http.StatusOK, map[string]string{"verb": req.Verb, "namespace": req.Namespace, "name": req.Name,
					"labelSelector": r.URL.Query().Get("labelSelector")})
				return nil
			},
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	do := func(method, path string) (int, map[string]string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var out map[string]string
		_ = json.Unmarshal(body, &out)
		return resp.StatusCode, out
	}
	for _, tc := range []struct {
		method, path string
		code         int
		want         map[string]string
	}{
		{"GET", "/apis/metrics.k8s.io/v1beta1/pods?labelSelector=app%3Dx", 200, map[string]string{"verb": "list", "namespace": "", "name": "", "labelSelector": "app=x"}},
		{"GET", "/apis/metrics.k8s.io/v1beta1/namespaces/ns1/pods", 200, map[string]string{"verb": "list", "namespace": "ns1", "name": "", "labelSelector": ""}},
		{"GET", "/apis/metrics.k8s.io/v1beta1/namespaces/ns1/pods/p", 200, map[string]string{"verb": "get", "namespace": "ns1", "name": "p", "labelSelector": ""}},
		{"GET", "/apis/metrics.k8s.io/v1beta1/namespaces/ns1/pods?watch=true", http.StatusMethodNotAllowed, nil},
		{"POST", "/apis/metrics.k8s.io/v1beta1/namespaces/ns1/pods", http.StatusMethodNotAllowed, nil},
		{"DELETE", "/apis/metrics.k8s.io/v1beta1/namespaces/ns1/pods/p", http.StatusMethodNotAllowed, nil},
		{"GET", "/apis/metrics.k8s.io/v1beta1/namespaces/ns1/pods/p/status", http.StatusNotFound, nil},
		{"GET", "/apis/metrics.k8s.io/v1beta1/nodes", http.StatusServiceUnavailable, nil},
	} {
		code, got := do(tc.method, tc.path)
		if code != tc.code {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, code, tc.code)
			continue
		}
		if tc.want != nil {
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s %s: the handler saw %s=%q, want %q", tc.method, tc.path, k, got[k], v)
				}
			}
		}
	}
	resp, err := http.Get(srv.URL + "/apis/metrics.k8s.io/v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Resources []struct {
			Name       string   `json:"name"`
			Kind       string   `json:"kind"`
			Namespaced bool     `json:"namespaced"`
			Verbs      []string `json:"verbs"`
		} `json:"resources"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Resources) != 2 || list.Resources[0].Kind != "NodeMetrics" || list.Resources[1].Name != "pods" || !list.Resources[1].Namespaced ||
		len(list.Resources[1].Verbs) != 2 {
		t.Errorf("discovery of metrics.k8s.io/v1beta1: %+v, want nodes (NodeMetrics) and namespaced pods, get and list", list.Resources)
	}
}
