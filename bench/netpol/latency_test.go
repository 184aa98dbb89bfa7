package netpol

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tranche/tranche/bench/benchreport"
	"github.com/tranche/tranche/internal/netns"
)

const (
	// latencyNodes is the cluster's size (the 3 nodes).
	latencyNodes = 3
	// threadsPerTarget probe each server at once, each pausing a random 0-32 ms between
	// its attempts (random, so that the threads do not fall into step when attempts
	// start timing out together): about one attempt a millisecond while connections are
	// accepted, one every ~2 ms while they are dropped (each waits dialTimeout; an
	// accepted connection between two pods takes well under a millisecond).
	threadsPerTarget = 16
	dialTimeout      = 20 * time.Millisecond
	// confirm is how many attempts in a row must show the new state before it counts
	// as holding; changeTimeout bounds each change.
	confirm       = 3
	changeTimeout = 30 * time.Second
	// goalP99 is the goal.
	goalP99 = 100 * time.Millisecond
	// metricName is the engine's own histogram (from the object's last change).
	metricName = "tranche_networkpolicy_programming_duration_seconds"
	// syncMetric is the engine's sync histogram (its count: syncs done).
	syncMetric = "tranche_networkpolicy_sync_duration_seconds"
)

// attempt is one connection attempt of a prober.
type attempt struct {
	start time.Time
	ok    bool
}

// prober keeps opening TCP connections from a network namespace to one server, from
// threadsPerTarget threads that stay in the namespace, and records every attempt.
type prober struct {
	target string
	mu     sync.Mutex
	seen   []attempt
	stop   chan struct{}
	wg     sync.WaitGroup
}

func newProber(b *testing.B, nsName, target string) *prober {
	b.Helper()
	p := &prober{target: target, stop: make(chan struct{})}
	started := make(chan error, threadsPerTarget)
	for range threadsPerTarget {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			err := netns.Do(nsName, func() error {
				started <- nil
				for {
					select {
					case <-p.stop:
						return nil
					default:
					}
					a := attempt{start: time.Now()}
					if conn, err := net.DialTimeout("tcp4", target, dialTimeout); err == nil {
						// No TIME_WAIT left behind: thousands of attempts a second
						// would run out of ports.
						_ = conn.(*net.TCPConn).SetLinger(0)
						conn.Close()
						a.ok = true
					}
					p.mu.Lock()
					p.seen = append(p.seen, a)
					p.mu.Unlock()
					time.Sleep(rand.N(2 * threadsPerTarget * time.Millisecond))
				}
			})
			if err != nil {
				started <- err
			}
		}()
	}
	for range threadsPerTarget {
		if err := <-started; err != nil {
			b.Fatal(err)
		}
	}
	return p
}

func (p *prober) close() { close(p.stop); p.wg.Wait() }

// holdsSince returns when the state want began to hold for good after t0, as of now:
// the start of the first attempt of the last run of attempts (by start time) showing
// want, once that run is confirm long and every attempt started before it has ended
// (the run began more than a dial timeout ago). It forgets attempts older than t0.
func (p *prober) holdsSince(t0, now time.Time, want bool) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.seen[:0]
	for _, a := range p.seen {
		if !a.start.Before(t0) {
			kept = append(kept, a)
		}
	}
	p.seen = kept
	s := slices.Clone(kept)
	slices.SortFunc(s, func(x, y attempt) int { return x.start.Compare(y.start) })
	i := len(s)
	for i > 0 && s[i-1].ok == want {
		i--
	}
	if len(s)-i < confirm || now.Sub(s[i].start) < dialTimeout+50*time.Millisecond {
		return time.Time{}, false
	}
	return s[i].start, true
}

// summary counts the attempts kept, by outcome.
func (p *prober) summary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, a := range p.seen {
		if a.ok {
			n++
		}
	}
	return fmt.Sprintf("%d attempts accepted, %d not, since the change", n, len(p.seen)-n)
}

// untilAll waits until want holds on every prober and returns each one's delay after t0.
func untilAll(b *testing.B, probers []*prober, t0 time.Time, want bool, what string) []time.Duration {
	b.Helper()
	deadline := t0.Add(changeTimeout)
	out := make([]time.Duration, len(probers))
	for i, p := range probers {
		for {
			at, ok := p.holdsSince(t0, time.Now(), want)
			if ok {
				out[i] = at.Sub(t0)
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s: %s not %s after %s (%s)", what, p.target, map[bool]string{true: "accepted", false: "dropped"}[want], changeTimeout, p.summary())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return out
}

// BenchmarkPolicyProgramming measures policy programming latency on a fresh
// `tranche up --nodes 3`: three servers, one per node, probed without pause by a client
// pod; each round creates a deny-all policy over the servers, deletes it, then labels
// the client so that a standing allow-from-clients policy admits it, and removes the
// label. Each change is timed from the API's answer to the write until the new state
// holds for every server (so on every node's rules). It prints p50/p99 beside the goal.
func BenchmarkPolicyProgramming(b *testing.B) {
	rounds := envInt(b, "NETPOL_BENCH_ROUNDS", 50)
	e := start(b, "bnl", latencyNodes, "netpol")
	srv := map[string]string{"app": "srv"}
	var targets []string
	for i := 1; i <= latencyNodes; i++ {
		p := e.pod(b, fmt.Sprintf("srv-%d", i), fmt.Sprintf("tranche-%d", i), srv, true)
		targets = append(targets, hostPort(p.Status.PodIP, 8080))
	}
	client := e.pod(b, "client", "tranche-1", map[string]string{"app": "client"}, false)
	clientNS := e.podNS(client)
	for _, t := range targets {
		waitReach(b, clientNS, t, true)
	}
	var probers []*prober
	for _, t := range targets {
		p := newProber(b, clientNS, t)
		defer p.close()
		probers = append(probers, p)
	}
	before := scrapeAll(b, e)

	policies := e.client.NetworkingV1().NetworkPolicies(e.ns)
	label := func(v string) {
		patch := `{"metadata":{"labels":{"role":null}}}`
		if v != "" {
			patch = fmt.Sprintf(`{"metadata":{"labels":{"role":%q}}}`, v)
		}
		if _, err := e.client.CoreV1().Pods(e.ns).Patch(e.ctx, "client", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	rows := []string{"policy created (deny all) -> every node drops",
		"policy deleted -> every node accepts",
		"client pod labelled -> every node accepts",
		"label removed -> every node drops"}
	all := make([][]time.Duration, len(rows))  // the last node, per change
	each := make([][]time.Duration, len(rows)) // every node
	record := func(row int, d []time.Duration) {
		all[row] = append(all[row], slices.Max(d))
		each[row] = append(each[row], d...)
	}
	b.ResetTimer()
	for range rounds {
		e.createPolicy(b, ingressFrom(e.ns, "deny", srv, nil, 0))
		t0 := time.Now()
		record(0, untilAll(b, probers, t0, false, "deny created"))
		if err := policies.Delete(e.ctx, "deny", metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		t0 = time.Now()
		record(1, untilAll(b, probers, t0, true, "deny deleted"))

		// A policy admitting role=client (its creation is not timed: it is the first
		// row's case), then the client labelled and unlabelled.
		e.createPolicy(b, ingressFrom(e.ns, "clients", srv, map[string]string{"role": "client"}, 8080))
		untilAll(b, probers, time.Now(), false, "clients created")
		label("client")
		t0 = time.Now()
		record(2, untilAll(b, probers, t0, true, "client labelled"))
		label("")
		t0 = time.Now()
		record(3, untilAll(b, probers, t0, false, "label removed"))
		if err := policies.Delete(e.ctx, "clients", metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		untilAll(b, probers, time.Now(), true, "clients deleted")
	}
	b.StopTimer()
	after := scrapeAll(b, e)

	p99 := benchreport.Percentile(all[0], 99)
	b.ReportMetric(float64(p99)/float64(time.Millisecond), "create-p99-ms")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "policy programming, %d rounds on %d nodes\tp50\tp99\tmax\tgoal p99\tp99 / goal\n", rounds, latencyNodes)
	for i, name := range rows {
		for _, v := range []struct {
			name string
			d    []time.Duration
		}{{name, all[i]}, {"  the same, each node on its own", each[i]}} {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f\n", v.name, benchreport.Ms(benchreport.Percentile(v.d, 50)), benchreport.Ms(benchreport.Percentile(v.d, 99)), benchreport.Ms(slices.Max(v.d)),
				benchreport.Ms(goalP99), float64(benchreport.Percentile(v.d, 99))/float64(goalP99))
		}
	}
	var sum, count float64
	for i := range after {
		sum += after[i][0] - before[i][0]
		count += after[i][1] - before[i][1]
	}
	if count > 0 {
		fmt.Fprintf(tw, "%s (%d nodes, %.0f observations): mean\t%s\t-\t-\t-\t-\n", metricName, latencyNodes, count, benchreport.Ms(time.Duration(sum/count*float64(time.Second))))
	} else {
		fmt.Fprintf(tw, "%s: no observation\t-\t-\t-\t-\t-\n", metricName)
	}
	tw.Flush()
	fmt.Printf("  Each change is timed from the API's answer to the write, to the first connection attempt after which\n"+
		"  every attempt from the client (%d threads a server, %s timeout) shows the new state, for every server.\n"+
		"  The engine's metric starts at the object's last-change time, to the second: shown for reference.\n\n", threadsPerTarget, dialTimeout)
}

// scrapeAll reads sum and count of the engine's programming histogram on every node
// (0, 0 where the node serves none).
func scrapeAll(b *testing.B, e *env) [][2]float64 {
	b.Helper()
	var out [][2]float64
	for i := 1; i <= latencyNodes; i++ {
		out = append(out, scrapeSumCount(e.c.NodeNS(fmt.Sprintf("tranche-%d", i)), metricName))
	}
	return out
}

// scrapeSumCount fetches http://127.0.0.1:10249/metrics inside a node's namespace and
// returns name's _sum and _count.
func scrapeSumCount(nsName, name string) [2]float64 {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			return netns.Dial(nsName, network, addr, 2*time.Second)
		}}}
	var out [2]float64
	resp, err := hc.Get("http://127.0.0.1:10249/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		switch {
		case err != nil:
		case key == name+"_sum":
			out[0] = v
		case key == name+"_count":
			out[1] = v
		}
	}
	return out
}
