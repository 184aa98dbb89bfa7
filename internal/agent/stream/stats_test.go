package stream

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestStatsRoutes: the resource usage paths reach Config.Stats, only for verified
// clients, and answer 404 without it.
func TestStatsRoutes(t *testing.T) {
	stats := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("stats " + r.URL.Path)) })
	with, _ := New(Config{Runtime: &fakeRuntime{}, Stats: stats})
	without, _ := New(Config{Runtime: &fakeRuntime{}})
	for _, path := range []string{"/stats/summary", "/metrics/resource"} {
		rec := httptest.NewRecorder()
		with.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || rec.Body.String() != "stats "+path {
			t.Errorf("GET %s: %d %q, want the stats handler's answer", path, rec.Code, rec.Body)
		}
		rec = httptest.NewRecorder()
		without.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s without Stats: %d, want 404", path, rec.Code)
		}
		rec = httptest.NewRecorder()
		with.authenticated(with.Handler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusForbidden {
			t.Errorf("GET %s without a client certificate: %d, want 403", path, rec.Code)
		}
	}
}
