package endpointslice

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/bench/benchreport"
	"github.com/tranche/tranche/internal/controller/endpointslice"
	"github.com/tranche/tranche/internal/events"
)

const (
	// peerNamespace holds the reference slices written by a plain client.
	peerNamespace = "bench-es-peer"
	// floorNamespace holds the one pod of the write-to-watch-event reference.
	floorNamespace = "bench-es-floor"
	// peerManager marks the reference slices, so that the controller leaves them alone.
	peerManager = "bench.tranche.dev"
	// flips is how many pods are turned not ready and then ready again.
	flips = 500
	// goalFlipP99 is the goal for a pod's Ready write to show in its slice.
	goalFlipP99 = 50 * time.Millisecond
	// cacheTimeout, syncTimeout and flipTimeout bound the waits: the benchmark fails
	// with what it saw instead of hanging.
	cacheTimeout = 5 * time.Minute
	syncTimeout  = 10 * time.Minute
	flipTimeout  = 30 * time.Second
	flipsTimeout = 10 * time.Minute
	// settleQuiet is how long the controller must have written nothing and synced
	// nothing for the first sync's writes to be counted as final; settleTimeout bounds
	// that wait.
	settleQuiet   = 2 * time.Second
	settleTimeout = 10 * time.Minute
	// progressEvery is how often a long wait prints where it is.
	progressEvery = 15 * time.Second
)

// firstSync is what the first sync measured.
type firstSync struct {
	wall, cache     time.Duration // controller start → all slices complete / caches filled
	listRef, putRef time.Duration // plain LIST of the pods / plain creates of the same slices
	idle            time.Duration // controller start → its last write or sync
	writes          int64         // EndpointSlice writes sent (accepted or not)
	counts          string        // writes by method
	syncs           string        // controller syncs by result
}

// BenchmarkEndpointSlice measures the EndpointSlice controller against the real API
// handler and prints every figure beside its reference in one table at the end. Run
// it with -benchtime 1x (make bench-endpointslice): b.N is not meaningful here.
func BenchmarkEndpointSlice(b *testing.B) {
	rp := newReport()
	e := newEnv(b, rp)
	b.Run(fmt.Sprintf("first-sync-%dx%d-ns%d", services, podsPerService, e.namespaces), func(b *testing.B) { benchFirstSync(b, e) })
	b.Run(fmt.Sprintf("ready-flip-%d-ns%d", flips, e.namespaces), func(b *testing.B) { benchReadyFlip(b, e) })
	rp.Print(os.Stdout)
}

// benchFirstSync reports the first sync of services Services of podsPerService pods
// each: from the controller's start (every object already stored) to the moment a
// watch shows every Service's slices with all its pods ready, and the EndpointSlice
// writes the controller sent, against the services creates that are the minimum.
func benchFirstSync(b *testing.B, e *env) {
	if err := e.runFirstSync(b); err != nil {
		b.Fatal(err)
	}
	f := e.first
	// ns/op would otherwise include the set-up and the references.
	b.ReportMetric(float64(f.wall.Nanoseconds()), "ns/op")
	b.ReportMetric(f.wall.Seconds(), "sync-s")
	b.ReportMetric(f.cache.Seconds(), "cache-s")
	b.ReportMetric(f.idle.Seconds(), "idle-s")
	b.ReportMetric(float64(f.writes), "writes")
	b.ReportMetric(float64(f.writes)/services, "writes-vs-min")
}

// runFirstSync loads the objects, measures the references, then starts the controller
// and waits for its first sync. It runs once per env (the first sync happens once);
// its controller keeps running for the other sub-benchmarks and is stopped when the
// parent benchmark ends.
func (e *env) runFirstSync(b *testing.B) error {
	e.syncOnce.Do(func() { e.syncErr = e.doFirstSync(b) })
	return e.syncErr
}

func (e *env) doFirstSync(b *testing.B) error {
	if err := e.load(b); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stops []func()
	e.parent.Cleanup(func() {
		cancel()
		for _, stop := range stops {
			stop()
		}
	})
	f := &e.first
	var err error
	if f.listRef, err = e.listReference(ctx); err != nil {
		return err
	}
	if f.putRef, err = e.createReference(ctx); err != nil {
		return err
	}
	if e.watch, err = watchSlices(ctx, e.client(b), podsPerService); err != nil {
		return err
	}

	e.writes = &writeCounter{}
	client, err := kubernetes.NewForConfig(e.config(func(c *rest.Config) {
		c.QPS, c.Burst = controllerQPS, controllerBurst
		c.WrapTransport = e.writes.wrap
	}))
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	factory := informers.NewSharedInformerFactory(client, 0)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctrl := endpointslice.New(endpointslice.Config{Client: client, Informers: factory, Logger: log,
		Recorder: events.NewRecorder(ctx, client, "endpointslice-controller"), Registerer: reg})

	start := time.Now()
	factory.Start(ctx.Done())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		ctrl.Run(ctx, controllerWorkers)
	}()
	stops = append(stops, func() {
		closeWithin(e.parent, "EndpointSlice controller", func() { <-ran })
		closeWithin(e.parent, "informers", factory.Shutdown)
	})
	cacheDone := make(chan time.Duration, 1)
	go func() {
		cctx, ccancel := context.WithTimeout(ctx, cacheTimeout)
		defer ccancel()
		if res := factory.WaitForCacheSyncWithContext(cctx); res.Err != nil {
			cacheDone <- -1
			return
		}
		cacheDone <- time.Since(start)
	}()

	syncs := func() string { return counterValues(reg, "endpoint_slice_controller_syncs") }
	stopProgress := progress(start, func() string {
		complete, pods, _ := e.watch.progress()
		return fmt.Sprintf("%d/%d Services complete, %d pods in slices, writes: %s, syncs: %s", complete, services, pods, e.writes, syncs())
	})
	defer stopProgress()

	wctx, wcancel := context.WithTimeoutCause(ctx, syncTimeout, fmt.Errorf("first sync not done after %s", syncTimeout))
	defer wcancel()
	done, err := e.watch.waitComplete(wctx, services)
	if err != nil {
		_, pods, _ := e.watch.progress()
		return fmt.Errorf("first sync: %w; %d pods in slices; controller sent %s; syncs: %s", err, pods, e.writes, syncs())
	}
	f.wall = done.Sub(start)
	f.writes = e.writes.total()
	select {
	case f.cache = <-cacheDone:
	case <-wctx.Done():
		return fmt.Errorf("informer caches not filled within %s", cacheTimeout)
	}
	if f.cache < 0 {
		return fmt.Errorf("informer caches not filled within %s", cacheTimeout)
	}
	floor := f.listRef + f.putRef
	e.rp.Set(row{Metric: fmt.Sprintf("first sync %dx%d in %d ns: controller start → all slices ready (watched)", services, podsPerService, e.namespaces),
		Ours: ms(f.wall), Reference: "plain LIST + plain creates " + ms(floor), Ratio: ratio(float64(f.wall), float64(floor)), Goal: "-"})
	e.rp.Set(row{
		Metric:    "  of which informer caches filled",
		Ours:      ms(f.cache),
		Reference: fmt.Sprintf("plain LIST of %d pods %s", services*podsPerService, ms(f.listRef)),
		Ratio:     ratio(float64(f.cache), float64(f.listRef)),
		Goal:      "-",
	})
	e.rp.Set(row{
		Metric:    "  of which slices written after that",
		Ours:      ms(f.wall - f.cache),
		Reference: fmt.Sprintf("%d plain creates %s", services, ms(f.putRef)),
		Ratio:     ratio(float64(f.wall-f.cache), float64(f.putRef)),
		Goal:      "-",
	})
	e.rp.Note("references: the same %d slices (100 endpoints each) created by %d goroutines sharing one client limited as the controller's is (QPS %d, burst %d: %s of pure client-side waiting); LIST is one typed client-go List",
		services, controllerWorkers, controllerQPS, controllerBurst, ms(time.Duration(float64(max(services-controllerBurst, 0))/controllerQPS*float64(time.Second))))

	// The first sync's writes are final once the controller has gone quiet: it may
	// still be working through the informers' initial events.
	idle, idleErr := settle(ctx, start, e.writes, syncs)
	f.writes = e.writes.total()
	f.counts = e.writes.String()
	f.syncs = syncs()
	f.idle = idle
	e.rp.Set(row{Metric: "first sync: EndpointSlice API writes", Ours: fmt.Sprint(f.writes),
		Reference: fmt.Sprintf("minimum %d creates", services), Ratio: ratio(float64(f.writes), float64(services)), Goal: "= 1"})
	idleText := ms(idle)
	if idleErr != nil {
		idleText = "> " + idleText
	}
	e.rp.Set(row{Metric: "first sync: controller start → last write or sync (idle)", Ours: idleText,
		Reference: "all slices ready " + ms(f.wall), Ratio: ratio(float64(idle), float64(f.wall)), Goal: "~1"})
	e.rp.Note("first sync: %s; syncs by result: %s (%d Services)", f.counts, f.syncs, services)
	return idleErr
}

// progress prints what state() says to stderr every progressEvery until the returned
// func is called, so that a long run shows where it is.
func progress(start time.Time, state func() string) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(os.Stderr, "endpointslice bench: %s: %s\n", time.Since(start).Round(time.Second), state())
			}
		}
	}()
	return func() { close(done) }
}

// listReference times one typed List of all the pods: what filling the pod informer's
// cache costs at the least.
func (e *env) listReference(ctx context.Context) (time.Duration, error) {
	cs, err := kubernetes.NewForConfig(e.config(nil))
	if err != nil {
		return 0, err
	}
	start := time.Now()
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list pods: %w", err)
	}
	d := time.Since(start)
	if len(list.Items) != services*podsPerService {
		return 0, fmt.Errorf("list pods: %d items, want %d", len(list.Items), services*podsPerService)
	}
	return d, nil
}

// createReference times creating slices equal to the ones the controller will write
// (in another namespace, marked as someone else's), with the controller's worker count
// and client limits: the least time those writes can take from this client.
func (e *env) createReference(ctx context.Context) (time.Duration, error) {
	cs, err := kubernetes.NewForConfig(e.config(func(c *rest.Config) { c.QPS, c.Burst = controllerQPS, controllerBurst }))
	if err != nil {
		return 0, err
	}
	cls := make([]*kubernetes.Clientset, controllerWorkers)
	for i := range cls {
		cls[i] = cs
	}
	start := time.Now()
	_, err = benchreport.Parallel(ctx, cls, services, func(ctx context.Context, cs *kubernetes.Clientset, s int) error {
		if _, err := cs.DiscoveryV1().EndpointSlices(peerNamespace).Create(ctx, makePeerSlice(s), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create reference slice for %s: %w", serviceName(s), err)
		}
		return nil
	})
	return time.Since(start), err
}

// makePeerSlice builds a slice like the one the controller writes for Service s.
func makePeerSlice(s int) *discovery.EndpointSlice {
	eps := make([]discovery.Endpoint, podsPerService)
	for j := range eps {
		i := s*podsPerService + j
		eps[j] = discovery.Endpoint{
			Addresses:  []string{podIP(i)},
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(nodeName(i % nodeCount)),
			Zone:       ptr.To(string(rune('a' + (i%nodeCount)%3))),
			TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: peerNamespace, Name: podName(i), UID: "0b7e8a52-3f0e-4c4e-9d55-6d2b3a9c1f10"},
		}
	}
	return &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{GenerateName: serviceName(s) + "-", Namespace: peerNamespace, Labels: map[string]string{
			discovery.LabelServiceName: serviceName(s), discovery.LabelManagedBy: peerManager,
		}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
}

// settle waits until the controller has sent no EndpointSlice write and finished no
// sync for settleQuiet, and returns when its last write or sync happened, counted from
// start. After settleTimeout it returns the time so far and an error.
func settle(ctx context.Context, start time.Time, c *writeCounter, syncs func() string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	state := func() string { return fmt.Sprint(c.total(), " writes, syncs ", syncs()) }
	last, since := state(), time.Now()
	for time.Since(since) < settleQuiet {
		select {
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("controller still busy %s after all slices were ready (%s)", settleTimeout, last)
		case <-tick.C:
		}
		if s := state(); s != last {
			last, since = s, time.Now()
		}
	}
	return since.Sub(start), nil
}

// counterValues renders a counter vector of reg as "label=value ...".
func counterValues(reg *prometheus.Registry, name string) string {
	mfs, err := reg.Gather()
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			parts = append(parts, fmt.Sprintf("%s=%.0f", strings.Join(labels, ","), m.GetCounter().GetValue()))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// benchReadyFlip turns flips distinct pods not ready and then ready again, one at a
// time, timing each from just before its UpdateStatus to the arrival of the slice
// event that shows the change; after each pair it times the same write on a pod no
// Service selects until its own watch event arrives: the floor one hop of the chain
// costs on this server, measured under the same load.
func benchReadyFlip(b *testing.B, e *env) {
	if err := e.runFirstSync(b); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeoutCause(context.Background(), flipsTimeout, fmt.Errorf("%d flips not done after %s", flips, flipsTimeout))
	defer cancel()
	cs := e.client(b)
	floor, err := newFloorPod(ctx, cs)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	picks := rng.Perm(services * podsPerService)[:flips]
	before := e.writes.total()
	var m flipTimes
	stopProgress := progress(time.Now(), func() string { return fmt.Sprintf("flips: %d of %d done", m.done(), flips) })
	b.ResetTimer()
	flipErr := e.runFlips(ctx, cs, floor, picks, &m)
	b.StopTimer()
	stopProgress()
	if flipErr != nil && m.done() == 0 {
		b.Fatal(flipErr)
	}
	writes := e.writes.total() - before
	statusWrites := len(m.toReady) + len(m.toUnready)
	toReady, toUnready, floors := m.toReady, m.toUnready, m.floors
	label := fmt.Sprintf("%d flips", len(toReady))
	if len(toReady) < flips {
		label = fmt.Sprintf("only %d of %d flips", len(toReady), flips)
	}

	p50, p99 := percentile(toReady, 50), percentile(toReady, 99)
	u50, u99 := percentile(toUnready, 50), percentile(toUnready, 99)
	f50, f99 := percentile(floors, 50), percentile(floors, 99)
	b.ReportMetric(msf(p50), "ready-p50-ms")
	b.ReportMetric(msf(p99), "ready-p99-ms")
	b.ReportMetric(msf(u99), "unready-p99-ms")
	b.ReportMetric(msf(f50), "floor-p50-ms")
	b.ReportMetric(msf(f99), "floor-p99-ms")
	b.ReportMetric(ratio(float64(writes), float64(statusWrites)), "writes/flip")
	e.rp.Set(row{Metric: fmt.Sprintf("pod Ready write → slice shows it ready, p50 (%s)", label), Ours: ms(p50),
		Reference: "write → watch event p50 " + ms(f50), Ratio: ratio(float64(p50), float64(f50)), Goal: "-"})
	e.rp.Set(row{Metric: fmt.Sprintf("pod Ready write → slice shows it ready, p99 (%s)", label), Ours: ms(p99),
		Reference: fmt.Sprintf("goal %s (floor p99 %s)", ms(goalFlipP99), ms(f99)), Ratio: ratio(float64(p99), float64(goalFlipP99)), Goal: "<= 1"})
	e.rp.Set(row{Metric: "plain write → watch event (floor), p50 / p99", Ours: ms(f50) + " / " + ms(f99),
		Reference: "-", Ratio: math.NaN(), Goal: "-"})
	e.rp.Set(row{Metric: "EndpointSlice writes per readiness flip", Ours: fmt.Sprintf("%.2f", ratio(float64(writes), float64(statusWrites))),
		Reference: "minimum 1", Ratio: ratio(float64(writes), float64(statusWrites)), Goal: "= 1"})
	e.rp.Note("flips: not-ready write → slice shows it not ready p50 %s, p99 %s; the chain is two write → event hops (pod, then slice), so about 2x the floor is the least it can take",
		ms(u50), ms(u99))
	if flipErr != nil {
		b.Errorf("flips stopped early (the table shows those done): %v", flipErr)
	}
}

// flipTimes are the durations measured so far; done is safe to call while they grow.
type flipTimes struct {
	mu                         sync.Mutex
	toReady, toUnready, floors []time.Duration
}

func (m *flipTimes) done() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.floors)
}

func (m *flipTimes) add(to *[]time.Duration, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	*to = append(*to, d)
}

// runFlips flips each picked pod not ready then ready, then times one floor round
// trip, recording into m, and stops at the first error.
func (e *env) runFlips(ctx context.Context, cs kubernetes.Interface, floor *floorPod, picks []int, m *flipTimes) error {
	for _, i := range picks {
		ns, name := e.podNamespace(i), podName(i)
		if ready, ok := e.watch.isReady(ns + "/" + name); !ok || !ready {
			return fmt.Errorf("pod %s/%s: not ready in its slice before its flip (in a slice: %v)", ns, name, ok)
		}
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get pod %s/%s: %w", ns, name, err)
		}
		for _, ready := range []bool{false, true} {
			d, updated, err := e.flip(ctx, cs, pod, ready)
			if err != nil {
				return err
			}
			pod = updated
			if ready {
				m.add(&m.toReady, d)
			} else {
				m.add(&m.toUnready, d)
			}
		}
		d, err := floor.roundTrip(ctx, cs)
		if err != nil {
			return err
		}
		m.add(&m.floors, d)
	}
	return nil
}

// flip writes pod's Ready condition through UpdateStatus and returns the time until
// the slice watch shows the pod's endpoint with that readiness, and the written pod.
func (e *env) flip(ctx context.Context, cs kubernetes.Interface, pod *v1.Pod, ready bool) (time.Duration, *v1.Pod, error) {
	key := pod.Namespace + "/" + pod.Name
	seen := e.watch.expect(key, ready)
	setReady(pod, ready)
	start := time.Now()
	updated, err := cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		e.watch.forget(key)
		return 0, nil, fmt.Errorf("update status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	select {
	case at := <-seen:
		return at.Sub(start), updated, nil
	case <-ctx.Done():
		e.watch.forget(key)
		return 0, nil, context.Cause(ctx)
	case <-time.After(flipTimeout):
		e.watch.forget(key)
		_, _, werr := e.watch.progress()
		return 0, nil, fmt.Errorf("pod %s/%s: slice did not show ready=%v within %s (slice watch error: %v; controller sent %s)",
			pod.Namespace, pod.Name, ready, flipTimeout, werr, e.writes)
	}
}

// floorPod is a pod no Service selects, whose status writes are timed to the arrival
// of their own watch event.
type floorPod struct {
	pod    *v1.Pod
	events chan seenRV
}

type seenRV struct {
	rv string
	at time.Time
}

// newFloorPod creates the pod (Running, Ready) in floorNamespace and watches it until
// ctx ends.
func newFloorPod(ctx context.Context, cs kubernetes.Interface) (*floorPod, error) {
	api := cs.CoreV1().Pods(floorNamespace)
	p := makePod(floorNamespace, 0)
	p.Name, p.Labels = "floor", map[string]string{"app": "floor"}
	pod, err := api.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/floor: %w", floorNamespace, err)
	}
	setRunning(pod, services*podsPerService, true)
	if pod, err = api.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("update status of pod %s/floor: %w", floorNamespace, err)
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, pod.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return api.Watch(ctx, opts)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch pods of %s: %w", floorNamespace, err)
	}
	f := &floorPod{pod: pod, events: make(chan seenRV, 16)}
	go func() {
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				p, ok := ev.Object.(*v1.Pod)
				if !ok || ev.Type != watch.Modified {
					continue
				}
				select {
				case f.events <- seenRV{rv: p.ResourceVersion, at: time.Now()}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return f, nil
}

// roundTrip toggles the pod's Ready condition and returns the time from just before
// the write to the arrival of its watch event.
func (f *floorPod) roundTrip(ctx context.Context, cs kubernetes.Interface) (time.Duration, error) {
	ready := f.pod.Status.Conditions[0].Status != v1.ConditionTrue
	setReady(f.pod, ready)
	start := time.Now()
	updated, err := cs.CoreV1().Pods(floorNamespace).UpdateStatus(ctx, f.pod, metav1.UpdateOptions{})
	if err != nil {
		return 0, fmt.Errorf("update status of pod %s/floor: %w", floorNamespace, err)
	}
	f.pod = updated
	timeout := time.After(flipTimeout)
	for {
		select {
		case ev := <-f.events:
			if ev.rv == updated.ResourceVersion {
				return ev.at.Sub(start), nil
			}
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		case <-timeout:
			return 0, fmt.Errorf("pod %s/floor: no watch event for resourceVersion %s within %s", floorNamespace, updated.ResourceVersion, flipTimeout)
		}
	}
}
