package netprog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/internal/netns"
)

// The measurement method, shared by this package's benchmark (nodes of one `tranche up`)
// and test/e2e's BenchmarkMachinesNetworkProgramming (simulated machines): one gated pod
// behind a Service, pollers in every node's namespace, and the loop of changes.

const (
	// Gate is the pod's readiness gate: the benchmark sets its condition, so the pod
	// turns Ready (or not) at once, without waiting for a probe period.
	Gate = "bench.tranche.dev/ready"
	// PollEvery is the pause between two connection attempts of a poller: the
	// measurement's resolution.
	PollEvery = time.Millisecond
	// ChangeTimeout bounds each wait (the pod turning Ready, every node reaching it).
	ChangeTimeout = 30 * time.Second
	// GoalP99 is the goal for the p99 (upstream's nftables mode: 6.8 s on 100 nodes).
	GoalP99 = 100 * time.Millisecond
	// podName names both the pod and its Service.
	podName = "np"
)

// Target is the measured pod behind its Service, and the watch that follows its readiness.
type Target struct {
	// Addr is the Service's ClusterIP:80.
	Addr   string
	client kubernetes.Interface
	ns     string
	states <-chan PodState
	// slices follows the Service's EndpointSlices: ready is whether one of them has a
	// ready endpoint, at when the watch delivered it (the stage between the pod and the
	// proxies).
	slices <-chan PodState
}

// StartTarget creates, in namespace ns, Service np and its only endpoint, pod np (on
// node when it is not empty) held unready by Gate, and waits until the pod's containers
// are ready. The pod is deleted at once (no grace period) when tb's test ends, before the
// cleanups registered earlier (such as the cluster's or the agents' stop) run.
func StartTarget(tb testing.TB, ctx context.Context, client kubernetes.Interface, ns, node string) *Target {
	tb.Helper()
	svc, err := client.CoreV1().Services(ns).Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: podName},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": podName},
			Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Labels: map[string]string{"app": podName}},
		Spec: v1.PodSpec{
			NodeName:                      node,
			ReadinessGates:                []v1.PodReadinessGate{{ConditionType: Gate}},
			TerminationGracePeriodSeconds: new(int64),
			Containers: []v1.Container{{Name: podName, Image: "registry.k8s.io/e2e-test-images/agnhost:2.52",
				Args: []string{"netexec", "--http-port=8080", "--udp-port=-1"}}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		// Before the nodes stop: nothing waits for a graceful deletion.
		_ = client.CoreV1().Pods(ns).Delete(context.Background(), podName, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", podName).String()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.Stop)
	sw, err := client.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + podName})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(sw.Stop)
	t := &Target{Addr: net.JoinHostPort(svc.Spec.ClusterIP, "80"), client: client, ns: ns, states: readiness(w), slices: sliceReadiness(sw)}
	// The containers start; the gate holds the pod unready.
	waitFor(tb, t.states, func(s PodState) bool { return s.containersReady && !s.ready }, "the pod's containers ready, the pod not")
	return t
}

// Changes is what Measure saw.
type Changes struct {
	// ToReady and ToUnready are, per change, the time from the watch delivering the pod
	// Ready (unready) until every poller was accepted (refused).
	ToReady, ToUnready []time.Duration
	// ReadyAt is, per change to Ready and per poller (in Measure's order), the time
	// until that poller was accepted.
	ReadyAt [][]time.Duration
	// SliceAt is, per change to Ready, the time until the benchmark's watch on the
	// Service's EndpointSlices delivered the endpoint ready (negative when it came before
	// the pod's watch): what precedes it is the API and the EndpointSlice controller,
	// what follows it the slice's delivery to the proxies and their syncs.
	SliceAt []time.Duration
	// WatchedAt is, per change to Ready, when the pod's watch delivered it (the clock
	// time the others count from, to find a change in the components' logs).
	WatchedAt []time.Time
	// Early counts the changes every poller saw before the watch delivered them
	// (counted as 0).
	Early int
}

// Measure turns the target Ready and unready again n times through its gate's
// condition and times each change from every poller. Between the changes nothing waits.
func (t *Target) Measure(tb testing.TB, ctx context.Context, pollers []*Poller, n int) Changes {
	tb.Helper()
	setGate := func(status v1.ConditionStatus) {
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":%q}]}}`, Gate, status)
		if _, err := t.client.CoreV1().Pods(t.ns).Patch(ctx, podName, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			tb.Fatal(err)
		}
	}
	var c Changes
	for range n {
		for _, want := range []bool{true, false} {
			drain(t.states)
			drain(t.slices)
			if want {
				setGate(v1.ConditionTrue)
			} else {
				setGate(v1.ConditionFalse)
			}
			type reached struct {
				at  []time.Time
				err error
			}
			done := make(chan reached, 1)
			go func() { at, err := UntilAll(pollers, want); done <- reached{at, err} }()
			t0 := waitFor(tb, t.states, func(s PodState) bool { return s.ready == want }, fmt.Sprintf("the pod Ready=%v", want))
			r := <-done
			if r.err != nil {
				tb.Fatal(r.err)
			}
			// Every proxy had it: the slice was written, and its watch delivers it soon.
			sliceAt := waitFor(tb, t.slices, func(s PodState) bool { return s.ready == want }, fmt.Sprintf("the EndpointSlice's endpoint ready=%v", want))
			last := slices.MaxFunc(r.at, func(x, y time.Time) int { return x.Compare(y) })
			d := last.Sub(t0)
			if d < 0 {
				// Every node answered before the watch delivered the pod's change.
				c.Early++
				d = 0
			}
			if !want {
				c.ToUnready = append(c.ToUnready, d)
				continue
			}
			c.ToReady = append(c.ToReady, d)
			c.SliceAt = append(c.SliceAt, sliceAt.Sub(t0))
			c.WatchedAt = append(c.WatchedAt, t0)
			each := make([]time.Duration, len(r.at))
			for i, at := range r.at {
				each[i] = max(at.Sub(t0), 0)
			}
			c.ReadyAt = append(c.ReadyAt, each)
		}
	}
	return c
}

// ReadyFrom is ReadyAt of the pollers from..to-1 of every change, in one list.
func (c Changes) ReadyFrom(from, to int) []time.Duration {
	var d []time.Duration
	for _, each := range c.ReadyAt {
		d = append(d, each[from:to]...)
	}
	return d
}

// PodState is what the benchmark follows of its pod.
type PodState struct {
	ready, containersReady bool
	at                     time.Time // when the watch delivered it
}

// stamped turns a watch into states, stamped on arrival; state reads an event's (false:
// not one to deliver).
func stamped(w watch.Interface, state func(watch.Event) (PodState, bool)) <-chan PodState {
	ch := make(chan PodState, 64)
	go func() {
		defer close(ch)
		for ev := range w.ResultChan() {
			at := time.Now()
			if s, ok := state(ev); ok {
				s.at = at
				ch <- s
			}
		}
	}()
	return ch
}

// readiness turns the pod's watch into its readiness states.
func readiness(w watch.Interface) <-chan PodState {
	return stamped(w, func(ev watch.Event) (PodState, bool) {
		pod, ok := ev.Object.(*v1.Pod)
		if !ok {
			return PodState{}, false
		}
		var s PodState
		for _, cond := range pod.Status.Conditions {
			switch cond.Type {
			case v1.PodReady:
				s.ready = cond.Status == v1.ConditionTrue
			case v1.ContainersReady:
				s.containersReady = cond.Status == v1.ConditionTrue
			}
		}
		return s, true
	})
}

// sliceReadiness turns the watch on the Service's EndpointSlices into whether an
// endpoint is ready.
func sliceReadiness(w watch.Interface) <-chan PodState {
	return stamped(w, func(ev watch.Event) (PodState, bool) {
		sl, ok := ev.Object.(*discoveryv1.EndpointSlice)
		if !ok {
			return PodState{}, false
		}
		var st PodState
		for _, e := range sl.Endpoints {
			if ev.Type != watch.Deleted && e.Conditions.Ready != nil && *e.Conditions.Ready {
				st.ready = true
			}
		}
		return st, true
	})
}

// drain drops the states already delivered.
func drain(ch <-chan PodState) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// waitFor returns the arrival time of the first state matching ok.
func waitFor(tb testing.TB, ch <-chan PodState, ok func(PodState) bool, what string) time.Time {
	tb.Helper()
	timeout := time.After(ChangeTimeout)
	for {
		select {
		case s, open := <-ch:
			if !open {
				tb.Fatalf("waiting for %s: the watch ended", what)
			}
			if ok(s) {
				return s.at
			}
		case <-timeout:
			tb.Fatalf("waiting for %s: timed out after %s", what, ChangeTimeout)
		}
	}
}

// Poller opens TCP connections to the ClusterIP from inside one node's namespace, on a
// thread that stays there, until they are accepted (or refused).
type Poller struct {
	name string
	reqs chan pollReq
}

type pollReq struct {
	accepted bool // wanted outcome
	done     chan pollResult
}

type pollResult struct {
	at  time.Time
	err error
}

// NewPoller starts the poller of the node called name, whose network namespace is
// nsName, dialing target; Close stops it.
func NewPoller(name, nsName, target string) (*Poller, error) {
	p := &Poller{name: name, reqs: make(chan pollReq)}
	started := make(chan error, 1)
	go func() {
		err := netns.Do(nsName, func() error {
			started <- nil
			for req := range p.reqs {
				req.done <- pollUntil(target, req.accepted)
			}
			return nil
		})
		if err != nil {
			started <- err
		}
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// Close stops the poller.
func (p *Poller) Close() { close(p.reqs) }

// pollUntil dials target every PollEvery until a connection is accepted (accepted) or
// refused (!accepted), and returns when that was seen.
func pollUntil(target string, accepted bool) pollResult {
	deadline := time.Now().Add(ChangeTimeout)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp4", target, time.Second)
		at := time.Now()
		switch {
		case err == nil:
			conn.Close()
			if accepted {
				return pollResult{at: at}
			}
		case errors.Is(err, syscall.ECONNREFUSED):
			if !accepted {
				return pollResult{at: at}
			}
		default:
			return pollResult{err: fmt.Errorf("dialing %s: %w", target, err)}
		}
		time.Sleep(PollEvery)
	}
	return pollResult{err: fmt.Errorf("dialing %s: still not %s after %s", target, map[bool]string{true: "accepted", false: "refused"}[accepted], ChangeTimeout)}
}

// UntilAll polls from every node at once and returns when each saw the wanted outcome
// (a connection accepted, or refused), the times in the pollers' order.
func UntilAll(pollers []*Poller, accepted bool) ([]time.Time, error) {
	dones := make([]chan pollResult, len(pollers))
	for i, p := range pollers {
		dones[i] = make(chan pollResult, 1)
		p.reqs <- pollReq{accepted: accepted, done: dones[i]}
	}
	at := make([]time.Time, len(pollers))
	var errs []string
	for i, d := range dones {
		r := <-d
		if r.err != nil {
			errs = append(errs, pollers[i].name+": "+r.err.Error())
		}
		at[i] = r.at
	}
	if errs != nil {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return at, nil
}

// Percentile is the nearest-rank p-th percentile of d (0 when empty).
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// Row writes one tab-separated row of the table: name, p50, p99 and max of d, the goal
// for the p99 and the p99 as a fraction of it.
func Row(w io.Writer, name string, d []time.Duration, goal time.Duration) {
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%.2f\n", name, Ms(Percentile(d, 50)), Ms(Percentile(d, 99)), Ms(slices.Max(d)),
		Ms(goal), float64(Percentile(d, 99))/float64(goal))
}

// Ms formats d in milliseconds with one decimal.
func Ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// Slowest writes, for the n slowest changes to Ready, the time each stage ended, from
// the pod's watch delivering Ready: the Service's EndpointSlice delivered to the
// benchmark's watch, then each poller accepted (names in Measure's order). A reader sees
// whether the tail is before the slice (API, EndpointSlice controller) or after it (the
// slice's delivery to the proxies, their syncs), and on which node.
func Slowest(w io.Writer, c Changes, names []string, n int) {
	idx := make([]int, len(c.ToReady))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(c.ToReady[b], c.ToReady[a]) })
	fmt.Fprintf(w, "slowest changes to Ready (ms after the pod's watch)\tchange\tpod's watch at\tslice\t%s\t\n", strings.Join(names, "\t"))
	for _, i := range idx[:min(n, len(idx))] {
		fmt.Fprintf(w, "  %s\t%d\t%s\t%.1f", Ms(c.ToReady[i]), i+1, c.WatchedAt[i].Format("15:04:05.000"), float64(c.SliceAt[i])/float64(time.Millisecond))
		for _, d := range c.ReadyAt[i] {
			fmt.Fprintf(w, "\t%.1f", float64(d)/float64(time.Millisecond))
		}
		fmt.Fprintln(w, "\t")
	}
}

// ControllerSeries are the API server's /metrics series that tell how the EndpointSlice
// controller's syncs went (a sync on a cache that does not show its previous write yet
// is "stale" and retried later).
var ControllerSeries = []string{
	`endpoint_slice_controller_syncs{result="success"}`,
	`endpoint_slice_controller_syncs{result="stale"}`,
	`workqueue_retries_total{name="endpointslice"}`,
}

// Counters reads series (full names with labels, as /metrics writes them) from the API
// server's /metrics; a series not there counts 0.
func Counters(ctx context.Context, client kubernetes.Interface, series []string) (map[string]float64, error) {
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	return parseCounters(string(raw), series), nil
}

// parseCounters reads series from Prometheus' text format.
func parseCounters(text string, series []string) map[string]float64 {
	got := map[string]float64{}
	for line := range strings.Lines(text) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !slices.Contains(series, name) {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			got[name] = v
		}
	}
	return got
}

// NodeSeries are a node's proxy and policy /metrics series (on 127.0.0.1:10249 in its
// network namespace) that tell where a change's time went on the node: how many rule
// syncs ran and how long they took, and the proxy's own view of the programming latency
// (from the slice's last-change-trigger-time to its rules written).
var NodeSeries = []string{
	"kubeproxy_sync_proxy_rules_duration_seconds_count",
	"kubeproxy_sync_proxy_rules_duration_seconds_sum",
	"kubeproxy_network_programming_duration_seconds_count",
	"kubeproxy_network_programming_duration_seconds_sum",
	"tranche_networkpolicy_sync_duration_seconds_count",
	"tranche_networkpolicy_sync_duration_seconds_sum",
}

// NodeCounters reads series from the metrics listener of the node whose network
// namespace is nsName; a series not there counts 0.
func NodeCounters(nsName string, series []string) (map[string]float64, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			return netns.Dial(nsName, network, addr, 5*time.Second)
		}}}
	resp, err := hc.Get("http://127.0.0.1:10249/metrics")
	if err != nil {
		return nil, fmt.Errorf("node metrics in %s: %w", nsName, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = errors.New(resp.Status)
	}
	if err != nil {
		return nil, fmt.Errorf("node metrics in %s: %w", nsName, err)
	}
	return parseCounters(string(body), series), nil
}

// NodeBreakdown writes, for each node, what its proxy and policy enforcement did
// between the readings before and after: syncs and their mean duration, and the
// proxy's mean programming latency.
func NodeBreakdown(w io.Writer, names []string, before, after []map[string]float64) {
	fmt.Fprintln(w, "  on each node during the changes\tproxy syncs\tmean sync\tproxy's own latency (mean)\tpolicy syncs\tmean policy sync\t")
	mean := func(i int, sum, count string) string {
		n := after[i][count] - before[i][count]
		if n <= 0 {
			return "-"
		}
		return Ms(time.Duration((after[i][sum] - before[i][sum]) / n * float64(time.Second)))
	}
	for i, name := range names {
		fmt.Fprintf(w, "  %s\t%.0f\t%s\t%s\t%.0f\t%s\t\n", name,
			after[i]["kubeproxy_sync_proxy_rules_duration_seconds_count"]-before[i]["kubeproxy_sync_proxy_rules_duration_seconds_count"],
			mean(i, "kubeproxy_sync_proxy_rules_duration_seconds_sum", "kubeproxy_sync_proxy_rules_duration_seconds_count"),
			mean(i, "kubeproxy_network_programming_duration_seconds_sum", "kubeproxy_network_programming_duration_seconds_count"),
			after[i]["tranche_networkpolicy_sync_duration_seconds_count"]-before[i]["tranche_networkpolicy_sync_duration_seconds_count"],
			mean(i, "tranche_networkpolicy_sync_duration_seconds_sum", "tranche_networkpolicy_sync_duration_seconds_count"))
	}
}
