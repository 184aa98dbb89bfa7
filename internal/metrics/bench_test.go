package metrics

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/agent/stats"
)

// memReader is a stats.Reader answering from memory: the benchmark measures what is
// done with the readings (runc's BenchmarkUsageRead measures reading the cgroup files).
type memReader struct{}

func (memReader) Read(string) (runc.Usage, error) {
	return runc.Usage{CPU: 123456789012, MemoryUsage: 50 << 20, WorkingSet: 40 << 20, RSS: 30 << 20}, nil
}

// BenchmarkScrapeCycle is one node's share of a scrape, both ends: the agent turning
// the readings of 50 one-container pods into /metrics/resource, and the API server
// decoding it and storing the batch. It reports the CPU it costs at one scrape every
// DefaultResolution as a percentage of one core.
func BenchmarkScrapeCycle(b *testing.B) {
	for _, pods := range []int{10, 50} {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			var cs []stats.Container
			for i := range pods {
				uid := types.UID(fmt.Sprintf("uid-%d", i))
				cs = append(cs, stats.Container{Namespace: "default", Pod: fmt.Sprintf("web-%d", i), PodUID: uid, Name: "app",
					Cgroup: "/tranche/n/pod" + string(uid) + "/c", PodCgroup: "/tranche/n/pod" + string(uid), StartedAt: time.Unix(1e9, 0)})
			}
			p, err := stats.New(stats.Config{NodeName: "n1", NodeCgroup: "/tranche/n", Reader: memReader{},
				Containers: func() []stats.Container { return append([]stats.Container(nil), cs...) }})
			if err != nil {
				b.Fatal(err)
			}
			store := &Store{Resolution: DefaultResolution}
			var buf bytes.Buffer
			for b.Loop() {
				s, err := p.Snapshot()
				if err != nil {
					b.Fatal(err)
				}
				buf.Reset()
				if err := stats.WriteResourceMetrics(&buf, s, false); err != nil {
					b.Fatal(err)
				}
				batch, err := DecodeResourceMetrics(&buf, "n1", time.Now())
				if err != nil {
					b.Fatal(err)
				}
				store.Add(batch)
			}
			perCycle := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(100*perCycle.Seconds()/DefaultResolution.Seconds(), "%core@15s")
		})
	}
}
