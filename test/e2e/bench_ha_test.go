package e2e

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/tranche/tranche/bench/benchcluster"
	clientv3 "go.etcd.io/etcd/client/v3"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// haBenchClients is how many clients write at once, through tranche and to etcd alike.
const haBenchClients = 16

// BenchmarkHA compares create throughput through two API servers over a 3-member etcd
// cluster on simulated machines with the raw put throughput of the same etcd cluster,
// with the same number of clients and values of the size tranche stores for one
// ConfigMap; it prints both and their ratio (issue 22's goal: >= 0.5). Every client
// runs in the test process and dials from inside a machine, as the servers do.
// Run it with `make bench-ha`.
func BenchmarkHA(b *testing.B) {
	prefix := fmt.Sprintf("bh%d-", runID)
	tb := testing.TB(b)
	l := newLAN(tb, prefix+"lan", netip.MustParsePrefix("192.168.93.0/24"), netip.Addr{})
	etcd := startEtcdCluster(tb, l, 3)
	servers := startMachineServers(tb, l, prefix, etcd, []string{"tre2e-bh-a", "tre2e-bh-b"}, "--log-level", "warn")
	ns := "bench-ha"
	servers[0].must(tb, "create", "namespace", ns)
	var clients []kubernetes.Interface
	for i := range haBenchClients {
		cfg := servers[i%len(servers)].restConfig(tb)
		cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit
		// Protobuf, as client-go's components (controllers, kubelet) speak to kube-apiserver.
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		clients = append(clients, kubernetes.NewForConfigOrDie(cfg))
	}
	data := map[string]string{"k": strings.Repeat("v", 256)}
	ctx := context.Background()

	// runParallel runs n operations split over haBenchClients goroutines.
	runParallel := func(b *testing.B, n int, op func(client, i int) error) {
		var next atomic.Int64
		var wg sync.WaitGroup
		var failed atomic.Value
		for c := range haBenchClients {
			wg.Go(func() {
				for i := next.Add(1); i <= int64(n); i = next.Add(1) {
					if err := op(c, int(i)); err != nil {
						failed.Store(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
	}

	// Where the CPU goes in each phase: the etcd members, the servers, this process (the
	// clients), and the machine's idle time; a phase that leaves no CPU idle is bounded
	// by the CPU its operations cost, whatever their latency.
	var groups []cpuGroup
	for _, e := range etcd.members {
		groups = append(groups, cpuGroup{"etcd " + e.name, netnsPIDs(tb, e.m.ns)})
	}
	for _, s := range servers {
		groups = append(groups, cpuGroup{"server " + s.host, netnsPIDs(tb, s.m.ns)})
	}
	var phases []cpuPhase
	var requests []map[string]float64 // per phase: etcd requests per operation, by method
	// Three seconds of nothing first: what every process spends anyway.
	quietFrom := sampleCPU(b, groups)
	time.Sleep(3 * time.Second)
	quiet := sampleCPU(b, groups).since(quietFrom, "quiet", 0)

	var round atomic.Int64
	var tranche, raw float64
	var valueSize int
	b.Run("tranche-create", func(b *testing.B) {
		r := round.Add(1)
		before, reqs := sampleCPU(b, groups), etcd.grpcHandled()
		profiled := profileServers(b, servers, b.N > 1)
		b.ResetTimer()
		runParallel(b, b.N, func(c, i int) error {
			cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d-%d", r, i)}, Data: data}
			_, err := clients[c].CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			return err
		})
		tranche = float64(b.N) / b.Elapsed().Seconds()
		profiled()
		if b.N > 1 { // not the first run of one operation
			phases = append(phases, sampleCPU(b, groups).since(before, "tranche creates", b.N))
			requests = append(requests, etcdRequestsSince(etcd, reqs, b.N))
		}
		b.ReportMetric(tranche, "creates/s")
	})
	cli := etcd.client()
	defer cli.Close()
	resp, err := cli.Get(ctx, "/registry/core/configmaps/"+ns+"/", clientv3.WithPrefix(), clientv3.WithLimit(1))
	if err != nil || len(resp.Kvs) == 0 {
		b.Fatalf("reading a stored ConfigMap from etcd: %v (%d keys)", err, len(resp.Kvs))
	}
	valueSize = len(resp.Kvs[0].Value)
	value := strings.Repeat("x", valueSize)
	b.Run("etcd-put", func(b *testing.B) {
		r := round.Add(1)
		before, reqs := sampleCPU(b, groups), etcd.grpcHandled()
		b.ResetTimer()
		runParallel(b, b.N, func(_, i int) error {
			_, err := cli.Put(ctx, fmt.Sprintf("/bench-ha/%d/%d", r, i), value)
			return err
		})
		raw = float64(b.N) / b.Elapsed().Seconds()
		if b.N > 1 { // not the first run of one operation
			phases = append(phases, sampleCPU(b, groups).since(before, "etcd puts", b.N))
			requests = append(requests, etcdRequestsSince(etcd, reqs, b.N))
		}
		b.ReportMetric(raw, "puts/s")
	})
	// The least any API server over etcd asks of it for a create, without the API server:
	// the same conditional transaction as tranche's (and kube-apiserver's) create, while
	// two watchers, one per server (their watch caches), follow the prefix with previous
	// values. It tells how much of the gap to raw puts is etcd's own work.
	var txns float64
	b.Run("etcd-create-txn-2-watchers", func(b *testing.B) {
		r := round.Add(1)
		prefix := fmt.Sprintf("/bench-ha-txn/%d/", r)
		wctx, cancel := context.WithCancel(ctx)
		var watching sync.WaitGroup
		for range servers {
			w := etcd.client()
			defer w.Close()
			ch := w.Watch(clientv3.WithRequireLeader(wctx), prefix, clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithCreatedNotify())
			<-ch // created
			watching.Go(func() {
				for range ch {
				}
			})
		}
		defer watching.Wait()
		defer cancel()
		before, reqs := sampleCPU(b, groups), etcd.grpcHandled()
		b.ResetTimer()
		runParallel(b, b.N, func(_, i int) error {
			key := fmt.Sprintf("%s%d", prefix, i)
			_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, value)).Else(clientv3.OpGet(key)).Commit()
			return err
		})
		txns = float64(b.N) / b.Elapsed().Seconds()
		if b.N > 1 {
			phases = append(phases, sampleCPU(b, groups).since(before, "etcd create txns, 2 watchers", b.N))
			requests = append(requests, etcdRequestsSince(etcd, reqs, b.N))
		}
		b.ReportMetric(txns, "txns/s")
	})
	if raw > 0 {
		fmt.Printf("HA create throughput, %d clients, %d-byte values: tranche %.0f creates/s, etcd %.0f puts/s, ratio %.2f (goal >= 0.5)\n",
			haBenchClients, valueSize, tranche, raw, tranche/raw)
		fmt.Printf("  etcd alone, the create transaction with two watchers: %.0f txns/s, %.2f of raw puts; tranche / that: %.2f\n",
			txns, txns/raw, tranche/txns)
		printCPUPhases(groups, quiet, phases)
		printEtcdRequests(phases, requests)
	}
}

// etcdRequestsSince is what the etcd cluster answered since before (grpcHandled),
// per operation of a phase of n.
func etcdRequestsSince(etcd *etcdCluster, before map[string]float64, n int) map[string]float64 {
	per := map[string]float64{}
	for method, v := range etcd.grpcHandled() {
		if d := v - before[method]; d > 0 {
			per[method] = d / float64(n)
		}
	}
	return per
}

// printEtcdRequests prints the etcd requests of each phase per operation, by gRPC
// method: what an operation asks of etcd besides its own write (the servers' reads,
// lease renewals, watch events).
func printEtcdRequests(phases []cpuPhase, requests []map[string]float64) {
	var methods []string
	for _, r := range requests {
		for m, v := range r {
			if v >= 0.005 && !slices.Contains(methods, m) {
				methods = append(methods, m)
			}
		}
	}
	slices.Sort(methods)
	tw := phaseTable("etcd requests per operation (all members)", phases)
	for _, m := range methods {
		fmt.Fprint(tw, m)
		for _, r := range requests {
			fmt.Fprintf(tw, "\t%.2f", r[m])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// cpuGroup is a set of processes whose CPU time is counted together.
type cpuGroup struct {
	name string
	pids []int
}

// cpuSample is the CPU time used so far by each group, by this process and by the
// whole machine (busy and idle), and when it was read.
type cpuSample struct {
	groups           []time.Duration
	self, busy, idle time.Duration
	at               time.Time
}

func sampleCPU(tb testing.TB, groups []cpuGroup) cpuSample {
	s := cpuSample{at: time.Now()}
	for _, g := range groups {
		var t time.Duration
		for _, pid := range g.pids {
			own, _, _ := benchcluster.ProcessCPU(pid) // a process gone counts nothing
			t += own
		}
		s.groups = append(s.groups, t)
	}
	own, _, err := benchcluster.ProcessCPU(os.Getpid())
	if err != nil {
		tb.Fatal(err)
	}
	s.self = own
	if s.busy, s.idle, err = benchcluster.MachineCPU(); err != nil {
		tb.Fatal(err)
	}
	return s
}

// cpuPhase is the CPU time spent during a phase of n operations that lasted wall.
type cpuPhase struct {
	name             string
	n                int
	wall             time.Duration
	groups           []time.Duration
	self, busy, idle time.Duration
}

func (s cpuSample) since(before cpuSample, name string, n int) cpuPhase {
	p := cpuPhase{name: name, n: n, wall: s.at.Sub(before.at), self: s.self - before.self, busy: s.busy - before.busy, idle: s.idle - before.idle}
	for i := range s.groups {
		p.groups = append(p.groups, s.groups[i]-before.groups[i])
	}
	return p
}

// less returns p without what the processes spend anyway (heartbeats, lease renewals,
// the other load of the machine), at the rate of the quiet phase q.
func (p cpuPhase) less(q cpuPhase) cpuPhase {
	scale := func(d time.Duration) time.Duration {
		return time.Duration(float64(d) * float64(p.wall) / float64(q.wall))
	}
	out := p
	out.groups = nil
	for i, g := range p.groups {
		out.groups = append(out.groups, g-scale(q.groups[i]))
	}
	out.self -= scale(q.self)
	out.busy -= scale(q.busy)
	return out
}

// total is the CPU time of the counted processes: the groups and this process.
func (p cpuPhase) total() time.Duration {
	t := p.self
	for _, g := range p.groups {
		t += g
	}
	return t
}

// printCPUPhases prints, for each phase, the CPU time per operation of each group, of
// all of them and of the whole machine, beyond what they spend in the quiet phase q;
// and the share of the machine left idle.
func printCPUPhases(groups []cpuGroup, q cpuPhase, phases []cpuPhase) {
	per := func(d time.Duration, n int) string {
		return fmt.Sprintf("%.0f", float64(d)/float64(n)/float64(time.Microsecond))
	}
	perSecond := func(d time.Duration) string {
		return fmt.Sprintf("%.0f", float64(d)/q.wall.Seconds()/float64(time.Millisecond))
	}
	var net []cpuPhase
	for _, p := range phases {
		net = append(net, p.less(q))
	}
	tw := phaseTable("CPU µs per operation, beyond the quiet rate\tquiet (ms/s)", net)
	for i, g := range groups {
		fmt.Fprintf(tw, "%s\t%s", g.name, perSecond(q.groups[i]))
		for _, p := range net {
			fmt.Fprintf(tw, "\t%s", per(p.groups[i], p.n))
		}
		fmt.Fprintln(tw)
	}
	for _, row := range []struct {
		name  string
		quiet time.Duration
		f     func(p cpuPhase) string
	}{
		{"clients (the benchmark's process)", q.self, func(p cpuPhase) string { return per(p.self, p.n) }},
		{"all of the above", q.total(), func(p cpuPhase) string { return per(p.total(), p.n) }},
		{"whole machine (every process)", q.busy, func(p cpuPhase) string { return per(p.busy, p.n) }},
	} {
		fmt.Fprintf(tw, "%s\t%s", row.name, perSecond(row.quiet))
		for _, p := range net {
			fmt.Fprintf(tw, "\t%s", row.f(p))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "machine idle during the phase\t%.0f%%", 100*float64(q.idle)/float64(q.idle+q.busy))
	for _, p := range phases {
		fmt.Fprintf(tw, "\t%.0f%%", 100*float64(p.idle)/float64(p.idle+p.busy))
	}
	fmt.Fprintln(tw)
	tw.Flush()
	if len(net) >= 2 && net[0].total() > 0 {
		// On a machine with no idle CPU, operations/s are the inverse of the CPU time per
		// operation.
		fmt.Printf("  with no CPU idle, creates/s / puts/s is at most the counted CPU per put / per create: %.2f\n",
			float64(net[1].total())/float64(net[1].n)/(float64(net[0].total())/float64(net[0].n)))
	}
}

// phaseTable starts a table on stdout whose header is first, then a column per phase.
func phaseTable(first string, phases []cpuPhase) *tabwriter.Writer {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, first)
	for _, p := range phases {
		fmt.Fprintf(tw, "\t%s", p.name)
	}
	fmt.Fprintln(tw)
	return tw
}

// profileServers, when HA_CPUPROFILE_DIR names a directory and on is true, fetches a
// 2-second CPU profile from each server's /debug/pprof/profile while the creates run and
// writes it there as <host>.pprof (`go tool pprof bin/tranche DIR/HOST.pprof`); the
// function it returns waits for the profiles. Without the variable it does nothing.
func profileServers(tb testing.TB, servers []*machineServer, on bool) (wait func()) {
	dir := os.Getenv("HA_CPUPROFILE_DIR")
	if dir == "" || !on {
		return func() {}
	}
	var wg sync.WaitGroup
	for _, s := range servers {
		rc := s.restConfig(tb)
		hc, err := rest.HTTPClientFor(rc)
		if err != nil {
			tb.Fatal(err)
		}
		url := rc.Host + "/debug/pprof/profile?seconds=" + os.Getenv("HA_CPUPROFILE_SECONDS")
		wg.Go(func() {
			time.Sleep(300 * time.Millisecond) // into the steady state
			resp, err := hc.Get(url)
			if err != nil {
				tb.Errorf("profiling %s: %v", s.host, err)
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err == nil && resp.StatusCode != 200 {
				err = fmt.Errorf("%s: %.200s", resp.Status, body)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, s.host+".pprof"), body, 0o644)
			}
			if err != nil {
				tb.Errorf("profiling %s: %v", s.host, err)
			}
		})
	}
	return wg.Wait
}
