package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/bench/benchreport"
	"github.com/tranche/tranche/internal/storage"
)

const (
	// writers is the concurrency of the throughput comparison, on both sides.
	writers = 16
	// putsPerRun and createsPerRun are one iteration's work, long enough (seconds) that
	// go test runs each once even without -benchtime 1x.
	putsPerRun    = 8000
	createsPerRun = 4000
	// valueSize is the payload of a put and of a created config map.
	valueSize = 1024
	// getsPerRun is how many single-object GETs give the latency percentiles.
	getsPerRun = 5000
	// listsPerRun is how many full lists of each kind are timed (their mean is shown).
	listsPerRun = 3
	// kubectlPage is kubectl get's default --chunk-size.
	kubectlPage = 500
	// watchers and watchEvents size the fan-out.
	watchers    = 100
	watchEvents = 1000
	// deliveryTimeout bounds the wait for every watcher to see every event.
	deliveryTimeout = 2 * time.Minute
)

// Goals (see README.md).
const (
	goalCreateRatio = 0.5
	goalGetP99      = 5 * time.Millisecond
	goalList        = 500 * time.Millisecond
	goalIdleRSS     = 60e6 // bytes
)

// results carries figures one sub-benchmark compares with another's.
type results struct {
	putRate    float64 // raw etcd puts/s with writers goroutines
	createRate float64 // API creates/s with writers clients and no watcher
}

// BenchmarkAPI measures the API handler over an embedded etcd and prints every figure
// beside its reference in one table at the end. Run it with -benchtime 1x (make bench-api).
func BenchmarkAPI(b *testing.B) {
	e := newEnv(b)
	rp := newReport()
	res := &results{}
	b.Run("etcd-put-16", func(b *testing.B) { benchEtcdPut(b, e, res) })
	b.Run("create-16", func(b *testing.B) { benchCreate(b, e, rp, res) })
	b.Run("get", func(b *testing.B) { benchGet(b, e, rp) })
	b.Run("list", func(b *testing.B) { benchList(b, e, rp) })
	b.Run("watch-100x1000", func(b *testing.B) { benchWatch(b, e, rp, res) })
	b.Run("idle-rss", func(b *testing.B) { benchIdleRSS(b, rp) })
	b.Run("soak-rss", func(b *testing.B) { benchSoakRSS(b, rp) })
	rp.Print(os.Stdout)
}

// benchEtcdPut is the reference for create throughput: writers goroutines putting
// valueSize values on the one etcd client the API handler also uses.
func benchEtcdPut(b *testing.B, e *env, res *results) {
	ctx := context.Background()
	value := string(make([]byte, valueSize))
	client := e.etcd.Client()
	var total time.Duration
	b.ResetTimer()
	for iter := range b.N {
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		start := time.Now()
		for range writers {
			wg.Go(func() {
				for {
					i := next.Add(1)
					if i > putsPerRun {
						return
					}
					if _, err := client.Put(ctx, fmt.Sprintf("/bench/put/%d/%d", iter, i), value); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		total += time.Since(start)
		close(errs)
		if err := <-errs; err != nil {
			b.Fatalf("etcd put: %v", err)
		}
	}
	res.putRate = float64(b.N*putsPerRun) / total.Seconds()
	b.ReportMetric(res.putRate, "puts/s")
}

// benchCreate measures ConfigMap creates by writers clients, each on its own connection,
// against benchEtcdPut's rate.
func benchCreate(b *testing.B, e *env, rp *report, res *results) {
	ctx := context.Background()
	cls := e.clients(b, writers)
	ns := "bench-create-" + strconv.Itoa(b.N)
	if err := e.createNamespace(ctx, cls[0], ns); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	b.ResetTimer()
	for iter := range b.N {
		start := time.Now()
		_, err := benchreport.Parallel(ctx, cls, createsPerRun, func(ctx context.Context, cs *kubernetes.Clientset, i int) error {
			name := fmt.Sprintf("cm-%d-%d", iter, i)
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, makeConfigMap(ns, name, valueSize, nil), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create configmap %s/%s: %w", ns, name, err)
			}
			return nil
		})
		total += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
	}
	rate := float64(b.N*createsPerRun) / total.Seconds()
	res.createRate = rate
	b.ReportMetric(rate, "creates/s")
	ref := "etcd put: not measured"
	if res.putRate > 0 {
		ref = fmt.Sprintf("etcd put %.0f/s", res.putRate)
		b.ReportMetric(rate/res.putRate, "create/put")
	}
	rp.Set(row{
		Metric: fmt.Sprintf("create throughput (%d clients, 1 KiB ConfigMaps)", writers),
		Ours:   fmt.Sprintf("%.0f ops/s", rate), Reference: ref,
		Ratio: ratio(rate, res.putRate), Goal: fmt.Sprintf(">= %.1f", goalCreateRatio),
	})
}

// benchGet measures single-pod GET latency from one client with podCount pods stored,
// against raw etcd gets of the same keys.
func benchGet(b *testing.B, e *env, rp *report) {
	ctx := context.Background()
	if err := e.loadPods(b, rp); err != nil {
		b.Fatal(err)
	}
	cs := e.client(b)
	pods := cs.CoreV1().Pods(podNamespace)
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() string { return e.podNames[rng.IntN(len(e.podNames))] }
	for range 200 { // warm the connection and the caches on both sides
		if _, err := pods.Get(ctx, pick(), metav1.GetOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	var api, raw []time.Duration
	b.ResetTimer()
	for range b.N {
		for range getsPerRun {
			name := pick()
			start := time.Now()
			if _, err := pods.Get(ctx, name, metav1.GetOptions{}); err != nil {
				b.Fatalf("get pod %s/%s: %v", podNamespace, name, err)
			}
			api = append(api, time.Since(start))
		}
		b.StopTimer()
		for range getsPerRun {
			key := podKey(pick())
			start := time.Now()
			if _, err := e.store.Get(ctx, key); err != nil {
				b.Fatalf("etcd get %s: %v", key, err)
			}
			raw = append(raw, time.Since(start))
		}
		b.StartTimer()
	}
	p50, p99 := percentile(api, 50), percentile(api, 99)
	r50, r99 := percentile(raw, 50), percentile(raw, 99)
	b.ReportMetric(msf(p50), "p50-ms")
	b.ReportMetric(msf(p99), "p99-ms")
	b.ReportMetric(msf(r50), "etcd-p50-ms")
	b.ReportMetric(msf(r99), "etcd-p99-ms")
	rp.Set(row{Metric: fmt.Sprintf("GET pod p50 (%d stored)", podCount), Ours: ms(p50),
		Reference: "etcd get p50 " + ms(r50), Ratio: ratio(float64(p50), float64(r50)), Goal: "-"})
	rp.Set(row{Metric: fmt.Sprintf("GET pod p99 (%d stored)", podCount), Ours: ms(p99),
		Reference: "goal " + ms(goalGetP99) + " (etcd " + ms(r99) + ")", Ratio: ratio(float64(p99), float64(goalGetP99)), Goal: "<= 1"})
}

// benchList times full lists of the podCount pods four ways: client-go's typed List
// (what a controller's informer does, client decoding included), the raw body alone
// (server and transfer), kubectl get's paged Table requests, and the etcd range read
// underneath as the reference.
func benchList(b *testing.B, e *env, rp *report) {
	ctx := context.Background()
	if err := e.loadPods(b, rp); err != nil {
		b.Fatal(err)
	}
	cs := e.client(b)
	rc := cs.CoreV1().RESTClient()
	if _, err := cs.CoreV1().Pods(podNamespace).List(ctx, metav1.ListOptions{}); err != nil {
		b.Fatal(err)
	}
	var typed, body, table, etcdRange time.Duration
	var bodySize, tableSize, etcdSize int64
	var n int
	b.ResetTimer()
	for range b.N {
		for range listsPerRun {
			n++
			start := time.Now()
			list, err := cs.CoreV1().Pods(podNamespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				b.Fatalf("list pods: %v", err)
			}
			typed += time.Since(start)
			if len(list.Items) != podCount {
				b.Fatalf("list pods: got %d items, want %d", len(list.Items), podCount)
			}

			start = time.Now()
			raw, err := rc.Get().Namespace(podNamespace).Resource("pods").DoRaw(ctx)
			if err != nil {
				b.Fatalf("list pods (raw): %v", err)
			}
			body += time.Since(start)
			bodySize = int64(len(raw))

			start = time.Now()
			size, err := kubectlList(ctx, cs)
			if err != nil {
				b.Fatal(err)
			}
			table += time.Since(start)
			tableSize = size

			b.StopTimer()
			start = time.Now()
			res, err := e.store.List(ctx, podPrefix, storage.ListOptions{})
			if err != nil {
				b.Fatalf("etcd range %s: %v", podPrefix, err)
			}
			etcdRange += time.Since(start)
			if len(res.Items) != podCount {
				b.Fatalf("etcd range %s: got %d keys, want %d (has the key layout changed?)", podPrefix, len(res.Items), podCount)
			}
			etcdSize = 0
			for _, kv := range res.Items {
				etcdSize += int64(len(kv.Value))
			}
			b.StartTimer()
		}
	}
	typed, body, table, etcdRange = typed/time.Duration(n), body/time.Duration(n), table/time.Duration(n), etcdRange/time.Duration(n)
	b.ReportMetric(msf(typed), "list-ms")
	b.ReportMetric(msf(body), "list-raw-ms")
	b.ReportMetric(msf(table), "kubectl-get-ms")
	b.ReportMetric(msf(etcdRange), "etcd-range-ms")
	b.ReportMetric(float64(bodySize), "list-bytes")
	b.ReportMetric(float64(etcdSize), "etcd-bytes")
	rp.Set(row{Metric: fmt.Sprintf("LIST %d pods, client-go typed", podCount), Ours: ms(typed),
		Reference: "goal " + ms(goalList), Ratio: ratio(float64(typed), float64(goalList)), Goal: "<= 1"})
	rp.Set(row{Metric: fmt.Sprintf("LIST %d pods, raw body only", podCount), Ours: ms(body),
		Reference: "etcd range " + ms(etcdRange), Ratio: ratio(float64(body), float64(etcdRange)), Goal: "-"})
	rp.Set(row{Metric: fmt.Sprintf("LIST %d pods, kubectl get (Table, %d/page)", podCount, kubectlPage), Ours: ms(table),
		Reference: "goal " + ms(goalList), Ratio: ratio(float64(table), float64(goalList)), Goal: "<= 1"})
	rp.Set(row{Metric: "LIST response size (JSON)", Ours: mib(bodySize),
		Reference: "etcd values " + mib(etcdSize), Ratio: ratio(float64(bodySize), float64(etcdSize)), Goal: "-"})
	rp.Set(row{Metric: "LIST response size (Table, all pages)", Ours: mib(tableSize),
		Reference: "JSON list " + mib(bodySize), Ratio: ratio(float64(tableSize), float64(bodySize)), Goal: "-"})
}

// kubectlList lists the pods the way `kubectl get pods` does: Table responses in pages
// of kubectlPage, following continue tokens. It returns the bytes received.
func kubectlList(ctx context.Context, cs *kubernetes.Clientset) (int64, error) {
	var size int64
	cont := ""
	for {
		raw, err := cs.CoreV1().RESTClient().Get().Namespace(podNamespace).Resource("pods").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json").
			Param("limit", strconv.Itoa(kubectlPage)).Param("continue", cont).DoRaw(ctx)
		if err != nil {
			return size, fmt.Errorf("list pods as Table: %w", err)
		}
		size += int64(len(raw))
		var page metav1.Table
		if err := json.Unmarshal(raw, &page); err != nil {
			return size, fmt.Errorf("list pods as Table: %w", err)
		}
		if page.Continue == "" {
			return size, nil
		}
		cont = page.Continue
	}
}

// benchWatch opens watchers client-go watches on one namespace's config maps, each on
// its own connection, then writes watchEvents creates with writers clients and waits
// until every watcher has seen every creation.
func benchWatch(b *testing.B, e *env, rp *report, res *results) {
	ctx := context.Background()
	wcl := e.clients(b, watchers)
	cls := e.clients(b, writers)
	var deliverSum, writeSum time.Duration
	b.ResetTimer()
	for iter := range b.N {
		b.StopTimer()
		ns := fmt.Sprintf("bench-watch-%d-%d", b.N, iter)
		if err := e.createNamespace(ctx, cls[0], ns); err != nil {
			b.Fatal(err)
		}
		list, err := cls[0].CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, deliveryTimeout)
		ws := make([]watch.Interface, watchers)
		for i, cs := range wcl {
			// Watch returns once the server has sent the response headers, that is once
			// its storage watch is established, so no event can be missed.
			ws[i], err = cs.CoreV1().ConfigMaps(ns).Watch(wctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if err != nil {
				cancel()
				b.Fatalf("watch %d: %v", i, err)
			}
		}
		b.StartTimer()

		start := time.Now()
		var received atomic.Int64
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Go(func() {
				seen := 0
				for ev := range w.ResultChan() {
					if ev.Type != watch.Added {
						continue
					}
					received.Add(1)
					if seen++; seen == watchEvents {
						w.Stop()
					}
				}
			})
		}
		_, err = benchreport.Parallel(wctx, cls, watchEvents, func(ctx context.Context, cs *kubernetes.Clientset, i int) error {
			name := fmt.Sprintf("w-%d", i)
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, makeConfigMap(ns, name, 64, nil), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create configmap %s/%s: %w", ns, name, err)
			}
			return nil
		})
		writeTime := time.Since(start)
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		wg.Wait()
		deliverTime := time.Since(start)
		b.StopTimer()
		cancel()
		if got := received.Load(); got != watchers*watchEvents {
			b.Fatalf("watchers received %d events of %d within %s", got, watchers*watchEvents, deliveryTimeout)
		}
		deliverSum += deliverTime
		writeSum += writeTime
		b.StartTimer()
	}
	deliver, write := deliverSum/time.Duration(b.N), writeSum/time.Duration(b.N)
	evps := float64(watchers*watchEvents) / deliver.Seconds()
	needed := float64(watchers*watchEvents) / write.Seconds()
	b.ReportMetric(msf(deliver), "deliver-ms")
	b.ReportMetric(msf(write), "write-ms")
	b.ReportMetric(evps, "events/s")
	rp.Set(row{Metric: fmt.Sprintf("watch: %d watchers x %d events, all delivered", watchers, watchEvents), Ours: ms(deliver),
		Reference: fmt.Sprintf("writing them (%d cl.) %s", writers, ms(write)), Ratio: ratio(float64(deliver), float64(write)), Goal: "~1 (keeps up)"})
	rp.Set(row{Metric: "watch: events delivered per second", Ours: fmt.Sprintf("%.0f ev/s", evps),
		Reference: fmt.Sprintf("%d x write rate %.0f ev/s", watchers, needed), Ratio: ratio(evps, needed), Goal: "~1 (keeps up)"})
	if res.createRate > 0 {
		rp.Note("watch: with %d watchers attached the %d clients created %.0f ConfigMaps/s, against %.0f/s with none (create row)",
			watchers, writers, float64(watchEvents)/write.Seconds(), res.createRate)
	}
}

// percentile returns the p-th percentile (nearest rank) of ds, sorting ds.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := (len(ds)*p + 99) / 100
	return ds[max(rank-1, 0)]
}

// msf converts a duration to fractional milliseconds for ReportMetric.
func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
