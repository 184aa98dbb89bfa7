package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkPut16 measures raw etcd put throughput against the embedded server with 16
// concurrent writers on one client, the ceiling the API server's create path is compared
// with. It reports puts/s besides ns/op.
func BenchmarkPut16(b *testing.B) {
	const writers = 16
	client := startEmbedded(b).Client()
	ctx := context.Background()
	value := make([]byte, 1024) // about the size of a small serialized object
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if _, err := client.Put(ctx, fmt.Sprintf("/bench/%d/%d", w, i), string(value)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "puts/s")
}
