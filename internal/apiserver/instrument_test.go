package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	trtest "github.com/tranche/tranche/internal/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/storage/memory"
)

// metricsFixture is an API server with a metrics registry and a Ready hook tests flip.
type metricsFixture struct {
	reg    *prometheus.Registry
	srv    *httptest.Server
	client kubernetes.Interface
	ready  error
	ctx    context.Context
}

func newMetricsFixture(t *testing.T) *metricsFixture {
	t.Helper()
	f := &metricsFixture{reg: prometheus.NewRegistry()}
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: testResources(), Metrics: f.reg,
		Ready: func() error { return f.ready }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	f.srv = httptest.NewServer(api)
	t.Cleanup(f.srv.Close)
	f.client = kubernetes.NewForConfigOrDie(&rest.Config{Host: f.srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	f.ctx = ctx
	if _, err := f.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return f
}

// get fetches path and returns the status code and body.
func (f *metricsFixture) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(f.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestMetricsNamesAndLabels(t *testing.T) {
	f := newMetricsFixture(t)
	cms := f.client.CoreV1().ConfigMaps("default")
	if _, err := cms.Create(f.ctx, makeConfigMap("a", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(f.ctx, makeConfigMap("b", nil), metav1.CreateOptions{DryRun: []string{"All"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.List(f.ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(f.ctx, "missing", metav1.GetOptions{}); err == nil {
		t.Fatal("GET of a missing ConfigMap succeeded")
	}
	f.get(t, "/readyz")

	families, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string][]string{
		"apiserver_request_total":            {"code", "component", "dry_run", "group", "resource", "scope", "subresource", "verb", "version"},
		"apiserver_request_duration_seconds": {"component", "dry_run", "group", "resource", "scope", "subresource", "verb", "version"},
		"apiserver_storage_objects":          {"resource"},
		"etcd_request_duration_seconds":      {"group", "operation", "resource"},
		"apiserver_longrunning_requests":     nil, // no watch yet: no series
		"apiserver_watch_events_total":       nil,
	}
	got := map[string][]string{}
	for _, mf := range families {
		var names []string
		if len(mf.Metric) > 0 {
			for _, lp := range mf.Metric[0].Label {
				names = append(names, lp.GetName())
			}
			slices.Sort(names)
		}
		got[mf.GetName()] = names
	}
	for name, want := range wantLabels {
		if want == nil {
			continue
		}
		if diff := cmp.Diff(want, got[name]); diff != "" {
			t.Errorf("labels of %s (-want +got):\n%s", name, diff)
		}
	}

	for _, tc := range []struct {
		name   string
		labels []string // verb, dry_run, group, version, resource, subresource, scope, component, code
	}{
		{"create", []string{"POST", "", "", "v1", "configmaps", "", "resource", "apiserver", "201"}},
		{"dry-run create", []string{"POST", "All", "", "v1", "configmaps", "", "resource", "apiserver", "201"}},
		{"list", []string{"LIST", "", "", "v1", "configmaps", "", "namespace", "apiserver", "200"}},
		{"get not found", []string{"GET", "", "", "v1", "configmaps", "", "resource", "apiserver", "404"}},
		{"readyz", []string{"GET", "", "", "", "", "/readyz", "", "", "200"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component", "code"}
			want := map[string]string{}
			for i, n := range names {
				want[n] = tc.labels[i]
			}
			if m := metricValue(t, f.reg, "apiserver_request_total", want); m != 1 {
				t.Errorf("apiserver_request_total%v = %v, want 1", tc.labels, m)
			}
		})
	}
	// Stored: the namespace and one ConfigMap (the dry run stored nothing).
	const objects = `
# HELP apiserver_storage_objects Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.
# TYPE apiserver_storage_objects gauge
apiserver_storage_objects{resource="configmaps"} 1
apiserver_storage_objects{resource="deployments.apps"} 0
apiserver_storage_objects{resource="namespaces"} 1
apiserver_storage_objects{resource="pods"} 0
`
	if err := testutil.GatherAndCompare(f.reg, strings.NewReader(objects), "apiserver_storage_objects"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(f.reg, "etcd_request_duration_seconds"); n == 0 {
		t.Error("no etcd_request_duration_seconds series")
	}
}

// metricValue sums the series of the named metric whose labels include want.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.Metric {
			have := map[string]string{}
			for _, lp := range m.Label {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue series
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// TestWatchReleasedOnClose checks that closed watches leave nothing behind: the
// long-running gauge returns to 0 and the goroutines serving them end.
func TestWatchReleasedOnClose(t *testing.T) {
	f := newMetricsFixture(t)
	cms := f.client.CoreV1().ConfigMaps("default")
	watching := func() float64 {
		return metricValue(t, f.reg, "apiserver_longrunning_requests", map[string]string{"verb": "WATCH", "resource": "configmaps"})
	}
	// The first watch starts the resource's cache (one storage watch that stays).
	w0, err := cms.Watch(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w0.Stop()
	trtest.Eventually(t, 10*time.Second, "the first watch ends", func() bool { return watching() == 0 })

	const n = 20
	var watches []watch.Interface
	for i := 0; i < n; i++ {
		w, err := cms.Watch(f.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		watches = append(watches, w)
	}
	trtest.Eventually(t, 10*time.Second, "every watch is counted", func() bool { return watching() == n })
	if got := watchGoroutines(); got != n {
		t.Fatalf("%d goroutines serve watches, want %d", got, n)
	}
	if _, err := cms.Create(f.ctx, makeConfigMap("x", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range watches {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Added {
				t.Fatalf("event %s, want ADDED", ev.Type)
			}
		case <-f.ctx.Done():
			t.Fatal("no event")
		}
		w.Stop()
	}
	// The server counts an event once its write returned, which may be after the
	// client read it.
	trtest.EventuallyState(t, 10*time.Second, "apiserver_watch_events_total to count every event sent", func() (bool, string) {
		got := metricValue(t, f.reg, "apiserver_watch_events_total", map[string]string{"group": "", "version": "v1", "resource": "configmaps"})
		return got >= n, fmt.Sprintf("apiserver_watch_events_total = %v, want >= %d", got, n)
	})
	trtest.Eventually(t, 10*time.Second, "every closed watch ends", func() bool { return watching() == 0 })
	trtest.Eventually(t, 10*time.Second, "the watches' goroutines end", func() bool { return watchGoroutines() == 0 })
}

// watchGoroutines counts the goroutines serving an API watch.
func watchGoroutines() int {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return strings.Count(b.String(), "apiserver.(*Server).watch(")
}

func TestHealthChecks(t *testing.T) {
	f := newMetricsFixture(t)
	for _, tc := range []struct {
		name, path string
		notReady   bool
		code       int
		body       string
	}{
		{"readyz", "/readyz", false, 200, "ok"},
		{"readyz verbose", "/readyz?verbose", false, 200, "[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]poststarthook/tranche-bootstrap ok\n[+]shutdown ok\nreadyz check passed\n"},
		{"livez verbose", "/livez?verbose", false, 200, "[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]poststarthook/tranche-bootstrap ok\nlivez check passed\n"},
		{"one check", "/readyz/etcd", false, 200, "ok"},
		{"unknown check", "/readyz/nope", false, 404, "404 page not found\n"},
		{"exclude", "/livez?verbose&exclude=etcd&exclude=nope", false, 200, "[+]ping ok\n[+]log ok\n[+]etcd excluded: ok\n[+]poststarthook/tranche-bootstrap ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nlivez check passed\n"},
		{"not ready", "/readyz", true, 500, "[+]ping ok\n[+]log ok\n[+]etcd ok\n[-]poststarthook/tranche-bootstrap failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n"},
		{"not ready, check excluded", "/readyz?exclude=poststarthook/tranche-bootstrap", true, 200, "ok"},
		{"healthz", "/healthz", false, 200, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.ready = nil
			if tc.notReady {
				f.ready = errors.New("bootstrap not finished")
			}
			code, body := f.get(t, tc.path)
			if code != tc.code || body != tc.body {
				t.Errorf("GET %s = %d %q, want %d %q", tc.path, code, body, tc.code, tc.body)
			}
		})
	}
}
