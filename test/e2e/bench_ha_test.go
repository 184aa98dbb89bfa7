package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
	prefix := fmt.Sprintf("bh%d-", os.Getpid()%1000)
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

	var round atomic.Int64
	var tranche, raw float64
	var valueSize int
	b.Run("tranche-create", func(b *testing.B) {
		r := round.Add(1)
		b.ResetTimer()
		runParallel(b, b.N, func(c, i int) error {
			cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d-%d", r, i)}, Data: data}
			_, err := clients[c].CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			return err
		})
		tranche = float64(b.N) / b.Elapsed().Seconds()
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
		b.ResetTimer()
		runParallel(b, b.N, func(_, i int) error {
			_, err := cli.Put(ctx, fmt.Sprintf("/bench-ha/%d/%d", r, i), value)
			return err
		})
		raw = float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(raw, "puts/s")
	})
	if raw > 0 {
		fmt.Printf("HA create throughput, %d clients, %d-byte values: tranche %.0f creates/s, etcd %.0f puts/s, ratio %.2f (goal >= 0.5)\n",
			haBenchClients, valueSize, tranche, raw, tranche/raw)
	}
}
