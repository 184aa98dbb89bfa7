package syspod

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestServeStatus: liveness always answers, readiness only once synced, and the
// registry's metrics are served.
func TestServeStatus(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "syspod_test_total", Help: "a test counter"})
	reg.MustRegister(c)
	c.Inc()
	var synced atomic.Bool
	stop := ServeStatus(ln, reg, "/health", "OK", synced.Load)
	defer stop()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/health"); code != 200 || body != "OK" {
		t.Errorf("/health = %d %q", code, body)
	}
	if code, _ := get("/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("/ready before sync = %d, want 503", code)
	}
	synced.Store(true)
	if code, body := get("/ready"); code != 200 || body != "OK" {
		t.Errorf("/ready after sync = %d %q", code, body)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "syspod_test_total 1") {
		t.Errorf("/metrics = %d %q", code, body)
	}
}
