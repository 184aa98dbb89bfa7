package api

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// soakWatches, soakClients and soakServices size the soak: the load a tester saw
	// grow the API server from 109 MB to 781 MB.
	soakWatches  = 1000
	soakClients  = 10
	soakServices = 1000
	// soakIdle is how long the server idles after the load before RSS is read again.
	soakIdle = 2 * time.Minute
	// goalSoakRatio bounds RSS after the idle period over RSS before the load.
	goalSoakRatio = 1.2
)

// benchSoakRSS runs `tranche server`, reads its RSS when idle, opens soakWatches
// watches of Services over soakClients connections, creates soakServices Services,
// waits until every watch has seen every one, closes the watches, and reads RSS again
// after soakIdle; the peak is sampled throughout.
func benchSoakRSS(b *testing.B, rp *report) {
	bin := trancheBinary()
	srv, err := startServerProcess(bin)
	if err != nil {
		b.Skipf("no tranche server to soak (run make build or set TRANCHE_BIN): %v", err)
	}
	defer srv.stop()
	pid := srv.cmd.Process.Pid
	time.Sleep(idleFor)
	before, err := procMemory(pid)
	if err != nil {
		b.Fatal(err)
	}
	clients := make([]*kubernetes.Clientset, soakClients)
	for i := range clients {
		cfg, err := clientcmd.BuildConfigFromFlags("", srv.kubeconfig)
		if err != nil {
			b.Fatal(err)
		}
		cfg.QPS, cfg.Burst = -1, 0
		// A dialer of its own keeps client-go from sharing one cached transport: each
		// client has its own connection, as separate processes would.
		dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		cfg.Dial = dialer.DialContext
		if clients[i], err = kubernetes.NewForConfig(cfg); err != nil {
			b.Fatal(err)
		}
	}
	statsBefore := serverStats(clients[0])

	var peak atomic.Int64
	sampleDone := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			if m, err := procMemory(pid); err == nil && m.rss > peak.Load() {
				peak.Store(m.rss)
			}
			select {
			case <-sampleDone:
				return
			case <-t.C:
			}
		}
	}()

	b.ResetTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := clients[0].CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "soak"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var seen atomic.Int64
	var watches sync.WaitGroup
	var stops []func()
	for i := range soakWatches {
		w, err := clients[i%soakClients].CoreV1().Services("soak").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatalf("watch %d: %v", i, err)
		}
		stops = append(stops, w.Stop)
		watches.Go(func() {
			for ev := range w.ResultChan() {
				if ev.Type == watch.Added {
					seen.Add(1)
				}
			}
		})
	}
	work := make(chan int)
	var writers sync.WaitGroup
	var createErr atomic.Value
	for i := range soakClients {
		cs := clients[i]
		writers.Go(func() {
			for n := range work {
				svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "soak-" + strconv.Itoa(n), Namespace: "soak"},
					Spec: v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "http", Port: 80}}}}
				if _, err := cs.CoreV1().Services("soak").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					createErr.Store(err)
				}
			}
		})
	}
	for n := range soakServices {
		work <- n
	}
	close(work)
	writers.Wait()
	if err, _ := createErr.Load().(error); err != nil {
		b.Fatalf("creating Services: %v", err)
	}
	deadline := time.Now().Add(deliveryTimeout)
	for seen.Load() < soakWatches*soakServices && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := seen.Load(); got < soakWatches*soakServices {
		b.Fatalf("watchers saw %d of %d ADDED events", got, soakWatches*soakServices)
	}
	statsLoaded := serverStats(clients[0])
	for _, stop := range stops {
		stop()
	}
	watches.Wait()
	b.StopTimer()
	time.Sleep(soakIdle)
	after, err := procMemory(pid)
	if err != nil {
		b.Fatal(err)
	}
	statsAfter := serverStats(clients[0])
	close(sampleDone)
	<-sampled

	r := float64(after.rss) / float64(before.rss)
	b.ReportMetric(float64(before.rss), "rss-before-bytes")
	b.ReportMetric(float64(peak.Load()), "rss-peak-bytes")
	b.ReportMetric(float64(after.rss), "rss-after-bytes")
	b.ReportMetric(r, "after/before")
	rp.Set(row{Metric: fmt.Sprintf("soak RSS (%d watches, %d Services, %s idle)", soakWatches, soakServices, soakIdle),
		Ours: mb(after.rss), Reference: "before " + mb(before.rss), Ratio: ratio(float64(after.rss), float64(before.rss)),
		Goal: fmt.Sprintf("<= %.1f", goalSoakRatio)})
	rp.Note("soak RSS: before %s (private %s, file-backed %s), peak %s, %s after the load %s (private %s, file-backed %s); ratio after/before %.2f",
		mb(before.rss), mb(before.anon), mb(before.file), mb(peak.Load()), soakIdle, mb(after.rss), mb(after.anon), mb(after.file), r)
	rp.Note("soak server: before %s; loaded %s; after %s", statsBefore, statsLoaded, statsAfter)
}

// serverStats reads a few of the server's own metrics: goroutines, heap in use and
// watches being served.
func serverStats(cs *kubernetes.Clientset) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return "(no /metrics: " + err.Error() + ")"
	}
	var goroutines, heap, watching float64
	for _, line := range strings.Split(string(data), "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, _ := strconv.ParseFloat(val, 64)
		switch {
		case name == "go_goroutines":
			goroutines = v
		case name == "go_memstats_heap_inuse_bytes":
			heap = v
		case strings.HasPrefix(name, `apiserver_longrunning_requests{`) && strings.Contains(name, `verb="WATCH"`):
			watching += v
		}
	}
	return fmt.Sprintf("%.0f goroutines, heap in use %s, %.0f watches", goroutines, mb(int64(heap)), watching)
}
