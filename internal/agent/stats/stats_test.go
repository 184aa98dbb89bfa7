package stats

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche/tranche/internal/agent/runc"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fakeReader is a Reader over a map; a missing path is a removed cgroup.
type fakeReader map[string]runc.Usage

func (f fakeReader) Read(path string) (runc.Usage, error) {
	u, ok := f[path]
	if !ok {
		return runc.Usage{}, fmt.Errorf("usage of cgroup %s: %w", path, fs.ErrNotExist)
	}
	return u, nil
}

// clock is a settable clock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

var t0 = time.Date(2026, 5, 4, 12, 0, 0, 250_000_000, time.UTC)

const nodeCG = "/tranche/tr-n1"

// node is a node with two pods: web (two containers, one of which has ended so that
// its cgroup is gone) and a kube-system one, with a memory limit.
func node(clk *clock, reader fakeReader) *Provider {
	started := t0.Add(-time.Hour)
	containers := []Container{
		{Namespace: "kube-system", Pod: "dns", PodUID: "uid-dns", Name: "dns", Cgroup: nodeCG + "/poduid-dns/c3", PodCgroup: nodeCG + "/poduid-dns", StartedAt: started, PodStartTime: started},
		{Namespace: "default", Pod: "web", PodUID: "uid-web", Name: "sidecar", Cgroup: nodeCG + "/poduid-web/gone", PodCgroup: nodeCG + "/poduid-web", StartedAt: started, PodStartTime: started},
		{Namespace: "default", Pod: "web", PodUID: "uid-web", Name: "app", Cgroup: nodeCG + "/poduid-web/c1", PodCgroup: nodeCG + "/poduid-web", StartedAt: started.Add(90 * time.Second), PodStartTime: started},
	}
	p, err := New(Config{NodeName: "n1", NodeCgroup: nodeCG, Reader: reader, MemoryCapacity: 4 << 30, StartTime: started.Add(-time.Minute),
		Containers: func() []Container { return append([]Container(nil), containers...) },
		Agent: func() (runc.Usage, error) {
			return runc.Usage{CPU: 3 * time.Second, MemoryUsage: 40 << 20, WorkingSet: 40 << 20, RSS: 40 << 20}, nil
		},
		Now: clk.Now})
	if err != nil {
		panic(err)
	}
	return p
}

func usages() fakeReader {
	return fakeReader{
		nodeCG:                    {CPU: 90 * time.Second, MemoryUsage: 300 << 20, WorkingSet: 200 << 20, RSS: 150 << 20, PageFaults: 1000, MajorPageFaults: 2},
		nodeCG + "/poduid-web":    {CPU: 60 * time.Second, MemoryUsage: 100 << 20, WorkingSet: 80 << 20, RSS: 60 << 20, PageFaults: 500},
		nodeCG + "/poduid-web/c1": {CPU: 59500 * time.Millisecond, MemoryUsage: 99 << 20, WorkingSet: 79 << 20, RSS: 59 << 20, PageFaults: 490},
		nodeCG + "/poduid-dns":    {CPU: 1500 * time.Millisecond, MemoryUsage: 20 << 20, WorkingSet: 12 << 20, RSS: 10 << 20, MemoryLimit: 170 << 20},
		nodeCG + "/poduid-dns/c3": {CPU: 1400 * time.Millisecond, MemoryUsage: 19 << 20, WorkingSet: 11 << 20, RSS: 10 << 20, MemoryLimit: 170 << 20},
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

func TestResourceMetricsGolden(t *testing.T) {
	p := node(&clock{now: t0}, usages())
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics/resource", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != ResourceMetricsContentType {
		t.Errorf("Content-Type %q, want %q", ct, ResourceMetricsContentType)
	}
	golden(t, "resource.txt", rec.Body.Bytes())
}

func TestResourceMetricsScrapeError(t *testing.T) {
	reader := usages()
	p := node(&clock{now: t0}, reader)
	p.cfg.Agent = func() (runc.Usage, error) { return runc.Usage{}, fmt.Errorf("no /proc") }
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics/resource", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	golden(t, "resource-error.txt", rec.Body.Bytes())
}

func TestSummaryGolden(t *testing.T) {
	p := node(&clock{now: t0}, usages())
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stats/summary?only_cpu_and_memory=true", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, rec.Body.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteByte('\n')
	golden(t, "summary.json", out.Bytes())
}

// TestSummaryRates: the second Summary carries the CPU rate since the first; a
// restarted container (new start time, counter back near zero) and a counter that
// went back have none.
func TestSummaryRates(t *testing.T) {
	clk := &clock{now: t0}
	reader := usages()
	p := node(clk, reader)
	first, err := p.Summary()
	if err != nil {
		t.Fatal(err)
	}
	if first.Node.CPU.UsageNanoCores != nil {
		t.Errorf("first summary has a node CPU rate %d, want none", *first.Node.CPU.UsageNanoCores)
	}
	clk.now = t0.Add(2 * time.Second)
	reader[nodeCG] = runc.Usage{CPU: 91 * time.Second}                       // +1 s of CPU in 2 s: 0.5 core with the agent's +0
	reader[nodeCG+"/poduid-web"] = runc.Usage{CPU: 60200 * time.Millisecond} // +200 ms: 100m
	reader[nodeCG+"/poduid-web/c1"] = runc.Usage{CPU: 59700 * time.Millisecond}
	reader[nodeCG+"/poduid-dns"] = runc.Usage{CPU: 1 * time.Second} // went back
	second, err := p.Summary()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*uint64{"node": second.Node.CPU.UsageNanoCores}
	for _, pod := range second.Pods {
		got["pod "+pod.PodRef.Name] = pod.CPU.UsageNanoCores
		for _, c := range pod.Containers {
			got["container "+pod.PodRef.Name+"/"+c.Name] = c.CPU.UsageNanoCores
		}
	}
	want := map[string]*uint64{"node": u64(500_000_000), "pod web": u64(100_000_000), "container web/app": u64(100_000_000),
		"pod dns": nil, "container dns/dns": u64(0)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usageNanoCores (-want +got):\n%s", diff)
	}
}

func u64(v uint64) *uint64 { return &v }

func TestNanoCores(t *testing.T) {
	for _, tc := range []struct {
		name      string
		prev, cur cpuReading
		want      uint64
		ok        bool
	}{
		{"one core", cpuReading{t0, 0}, cpuReading{t0.Add(time.Second), 1e9}, 1e9, true},
		{"200m over 15 s", cpuReading{t0, 5e9}, cpuReading{t0.Add(15 * time.Second), 8e9}, 2e8, true},
		{"idle", cpuReading{t0, 5e9}, cpuReading{t0.Add(15 * time.Second), 5e9}, 0, true},
		{"counter reset", cpuReading{t0, 5e9}, cpuReading{t0.Add(15 * time.Second), 1e6}, 0, false},
		{"same time", cpuReading{t0, 5e9}, cpuReading{t0, 6e9}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := nanoCores(tc.prev, tc.cur)
			if got != tc.want || ok != tc.ok {
				t.Errorf("nanoCores = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestNodeWithoutPods(t *testing.T) {
	p, err := New(Config{NodeName: "n1", NodeCgroup: nodeCG, Reader: fakeReader{}, Containers: func() []Container { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Snapshot()
	if err != nil {
		t.Fatalf("a node whose cgroup does not exist yet: %v", err)
	}
	if got := *s.Node.CPU.UsageCoreNanoSeconds; got != 0 {
		t.Errorf("node CPU %d, want 0", got)
	}
	if s.Pods == nil || len(s.Pods) != 0 {
		t.Errorf("pods %v, want an empty list", s.Pods)
	}
}

func TestRSSAnon(t *testing.T) {
	status := "Name:\ttranche\nVmRSS:\t   81234 kB\nRssAnon:\t   30000 kB\nRssFile:\t   51234 kB\n"
	got, err := rssAnon([]byte(status))
	if err != nil || got != 30000<<10 {
		t.Errorf("rssAnon = %d, %v; want %d", got, err, 30000<<10)
	}
	if _, err := rssAnon([]byte("Name:\tx\n")); err == nil {
		t.Error("a status without RssAnon gave no error")
	}
	if u, err := SelfUsage(); err != nil || u.WorkingSet == 0 || u.CPU <= 0 {
		t.Errorf("SelfUsage of the test process = %+v, %v; want some CPU and memory", u, err)
	}
}
