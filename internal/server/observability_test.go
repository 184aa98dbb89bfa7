package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"

	"github.com/tranche/tranche/internal/apiserver"
)

// pathGuard allows the non-resource paths in allowed and records what it was asked.
type pathGuard struct {
	allowed map[string]bool
	asked   []apiserver.Request
}

func (g *pathGuard) Check(r *http.Request, req apiserver.Request) (*http.Request, error) {
	g.asked = append(g.asked, req)
	if !g.allowed[req.Path] {
		return nil, apierrors.NewForbidden(schema.GroupResource{}, "", nil)
	}
	return r, nil
}

func TestObservabilityEndpoints(t *testing.T) {
	reg := newMetricsRegistry()
	// The process's provider: component-base's, as in the binary.
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "test-queue"})
	defer q.ShutDown()
	q.Add("a")
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "api") })
	for _, tc := range []struct {
		name, path string
		allowed    []string
		code       int
		body       string
	}{
		{"metrics allowed", "/metrics", []string{"/metrics"}, 200, `workqueue_depth{name="test-queue"} 1`},
		{"go and process metrics", "/metrics", []string{"/metrics"}, 200, "process_resident_memory_bytes"},
		{"metrics forbidden", "/metrics", nil, 403, `"reason":"Forbidden"`},
		{"pprof allowed", "/debug/pprof/", []string{"/debug/pprof/"}, 200, "goroutine"},
		{"pprof forbidden with metrics only", "/debug/pprof/heap", []string{"/metrics"}, 403, `"code":403`},
		{"other paths go to the API", "/api", nil, 200, "api"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &pathGuard{allowed: map[string]bool{}}
			for _, p := range tc.allowed {
				g.allowed[p] = true
			}
			rec := httptest.NewRecorder()
			newObservability(g, api, reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
				t.Errorf("GET %s = %d %.300q, want %d with %q", tc.path, rec.Code, rec.Body.String(), tc.code, tc.body)
			}
			if tc.path != "/api" && (len(g.asked) != 1 || g.asked[0].Verb != "get" || g.asked[0].Path != tc.path || g.asked[0].IsResourceRequest) {
				t.Errorf("guard asked %+v, want one non-resource get of %s", g.asked, tc.path)
			}
		})
	}
}
