package ingress

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// syncBuffer is a bytes.Buffer safe for the flusher and the test to share.
type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLineBufferKeepsEveryLine: lines written concurrently, more than the buffer holds,
// all come out whole, in few writes, the last ones when the context ends.
func TestLineBufferKeepsEveryLine(t *testing.T) {
	var out syncBuffer
	lb := NewLineBuffer(&out, 256)
	line := strings.Repeat("x", 49) + "\n"
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				if _, err := lb.Write([]byte(line)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { lb.Run(ctx, 1<<40); close(done) }()
	cancel()
	<-done
	got := out.String()
	if n := strings.Count(got, line); n != 400 || len(got) != 400*len(line) {
		t.Errorf("got %d whole lines in %d bytes, want 400 in %d", n, len(got), 400*len(line))
	}
	if out.writes > 400/5+1 {
		t.Errorf("%d writes for 400 lines of 50 bytes through a 256-byte buffer; want at most %d", out.writes, 400/5+1)
	}
}

// TestAccessLogAndMetricsAcrossTables: every request gets its access line, and request
// counts keep adding up when the Table (and so the cached metric children) is replaced.
func TestAccessLogAndMetricsAcrossTables(t *testing.T) {
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	log, flushed := NewAccessLogger(ctx, &out)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	p := NewProxy(ProxyConfig{Metrics: m, AccessLog: true, AccessLogger: log, Attempts: 1})
	f := seedFake(t)
	p.SetTable(Build(f))
	front := httptest.NewServer(p)
	defer front.Close()
	for i := range 6 {
		if i == 3 {
			p.SetTable(Build(f))
		}
		if code, body := get(t, front.Client(), front.URL+"/web", "monapp.example.com", nil); code != 200 {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
	}
	if code, _ := get(t, front.Client(), front.URL+"/", "nowhere.test", nil); code != 200 {
		t.Fatalf("default backend answered %d", code)
	}
	cancel()
	<-flushed
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	web := 0.0
	for _, mf := range families {
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "backend" && l.GetValue() == "default/service-web:80" {
					web += mt.GetCounter().GetValue()
				}
			}
		}
	}
	if web != 6 {
		t.Errorf("requests to service-web counted %v, want 6", web)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 7 {
		t.Fatalf("got %d access lines, want 7:\n%s", len(lines), out.String())
	}
	for _, want := range []string{"msg=request", "component=ingress", "status=200", "backend=default/service-web:80", "path=/web"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("access line %q lacks %q", lines[0], want)
		}
	}
}

// TestAccessLineAsSlog: the access lines the Proxy formats itself are the lines slog's
// TextHandler writes for the same record, quoting included.
func TestAccessLineAsSlog(t *testing.T) {
	at := time.Date(2026, 12, 2, 17, 4, 5, 987654321, time.FixedZone("X", 3600))
	base := exchange{client: "10.0.0.1:4242", method: "GET", host: "monapp.example.com", path: "/web/page",
		proto: "HTTP/1.1", endpoint: "10.244.1.5:8080", status: 200, bytes: 65}
	for _, tc := range []struct {
		name    string
		tweak   func(*exchange)
		elapsed time.Duration
		ingress string
	}{
		{"plain", nil, 1234567 * time.Nanosecond, "default/mon-ingress"},
		{"no endpoint, no ingress", func(x *exchange) { x.endpoint = ""; x.status = 404 }, 900 * time.Nanosecond, "-"},
		{"space and quote in the path", func(x *exchange) { x.path = `/a b/"c"` }, time.Second, "i/j"},
		{"equals sign and backslash", func(x *exchange) { x.path = `/a=b\c` }, time.Millisecond, "i/j"},
		{"control character", func(x *exchange) { x.path = "/a\x01b\tc" }, time.Millisecond, "i/j"},
		{"unicode", func(x *exchange) { x.host = "été.example"; x.path = "/ça" }, time.Millisecond, "i/j"},
		{"unicode space", func(x *exchange) { x.path = "/a\u00a0b" }, time.Millisecond, "i/j"},
		{"invalid UTF-8", func(x *exchange) { x.path = "/a\xffb" }, time.Millisecond, "i/j"},
		{"odd method", func(x *exchange) { x.method = "M-SEARCH" }, time.Millisecond, "i/j"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := base
			if tc.tweak != nil {
				tc.tweak(&x)
			}
			var want bytes.Buffer
			h := slog.NewTextHandler(&want, nil).WithAttrs([]slog.Attr{slog.String("component", "ingress")})
			r := slog.NewRecord(at, slog.LevelInfo, "request", 0)
			r.AddAttrs(slog.String("client", x.client), slog.String("method", x.method), slog.String("host", x.host),
				slog.String("path", x.path), slog.String("proto", x.proto), slog.Int("status", x.status),
				slog.Int64("bytes", x.bytes), slog.Duration("duration", tc.elapsed), slog.String("ingress", tc.ingress),
				slog.String("backend", "default/web:80"), slog.String("endpoint", x.endpoint))
			if err := h.Handle(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			got := string(accessLine(nil, new(timestamps), at, &x, tc.elapsed, tc.ingress, "default/web:80"))
			if diff := cmp.Diff(want.String(), got); diff != "" {
				t.Errorf("access line (-slog +ours):\n%s", diff)
			}
		})
	}
}

// TestAccessLineTimes: times in access lines are slog's, from one line to the next
// whatever changes between them: milliseconds, second, zone, year.
func TestAccessLineTimes(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skipf("no zone database: %v", err)
	}
	at := time.Date(2026, 12, 2, 17, 4, 5, 987654321, time.UTC)
	var ts timestamps
	for _, when := range []time.Time{
		at,
		at.In(time.FixedZone("X", 3600)), // the same second in other zones
		at.In(paris),
		at.Add(time.Millisecond),
		at.Add(13 * time.Millisecond),
		at.Add(time.Second),
		time.Date(2026, 3, 29, 0, 59, 59, 999e6, time.UTC).In(paris), // just before summer time
		time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC).In(paris),       // just after
		time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2027, 1, 1, 0, 0, 0, 1e6, time.UTC),
	} {
		var want bytes.Buffer
		h := slog.NewTextHandler(&want, nil)
		if err := h.Handle(context.Background(), slog.NewRecord(when, slog.LevelInfo, "m", 0)); err != nil {
			t.Fatal(err)
		}
		wantTime, _, _ := strings.Cut(want.String(), " ")
		if got := "time=" + string(ts.append(nil, when)); got != wantTime {
			t.Errorf("%v: %s, want %s", when, got, wantTime)
		}
	}
}

// BenchmarkRecord: what the access log and the metrics cost per request.
func BenchmarkRecord(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log, _ := NewAccessLogger(ctx, io.Discard)
	p := NewProxy(ProxyConfig{Metrics: NewMetrics(prometheus.NewRegistry()), AccessLog: true, AccessLogger: log})
	be := &Backend{Service: "s", Namespace: "default", Port: "80", name: "default/s:80"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			x := exchange{start: time.Now(), client: "127.0.0.1:54321", method: "GET", host: "h.test", path: "/",
				proto: "HTTP/1.1", ingress: "default/i", backend: be, endpoint: "127.0.0.1:8080", status: 200, bytes: 65}
			p.record(ctx, &x)
		}
	})
}
