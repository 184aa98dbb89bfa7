package overlay

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/netns"
)

// BenchmarkTunnel compares HTTP requests/s from one namespace to another over the VXLAN
// overlay (pod gateway to pod gateway through flannel.1) with the same requests over the
// plain link the two share (the path host-gw routes take), in one run: three rounds of
// 4000 keep-alive requests on 8 connections per side, alternating the order; it prints
// each side's median and the median of the rounds' ratios (goal of issue 22: >= 0.85).
// As root: go test -run '^$' -bench Tunnel -benchtime 1x ./internal/overlay/
func BenchmarkTunnel(b *testing.B) {
	ms := twoMachines(b, "ovb")
	connect(b, ms)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	for _, addr := range []string{"10.244.1.1:8080", "192.168.77.2:8080"} {
		ln, err := netns.Listen(ms[1].ns, "tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		go srv.Serve(ln)
	}
	b.Cleanup(func() { srv.Close() })
	const conns, perConn = 8, 500
	rate := func(addr string) float64 {
		tr := &http.Transport{MaxIdleConnsPerHost: conns, DialContext: func(_ context.Context, network, a string) (net.Conn, error) {
			return netns.Dial(ms[0].ns, network, a, 2*time.Second)
		}}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
		var wg sync.WaitGroup
		errs := make(chan error, conns)
		start := time.Now()
		for range conns {
			wg.Go(func() {
				for range perConn {
					resp, err := hc.Get("http://" + addr + "/")
					if err != nil {
						errs <- err
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatalf("%s: %v", addr, err)
		}
		return conns * perConn / time.Since(start).Seconds()
	}
	median := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
	for range b.N {
		var tunnel, link, ratio []float64
		for round := range 3 {
			var tu, li float64
			if round%2 == 0 {
				tu, li = rate("10.244.1.1:8080"), rate("192.168.77.2:8080")
			} else {
				li, tu = rate("192.168.77.2:8080"), rate("10.244.1.1:8080")
			}
			tunnel, link, ratio = append(tunnel, tu), append(link, li), append(ratio, tu/li)
		}
		b.ReportMetric(median(tunnel), "vxlan-req/s")
		b.ReportMetric(median(link), "link-req/s")
		b.ReportMetric(median(ratio), "vxlan/link")
		fmt.Printf("| path | req/s (median of 3) |\n|---|---|\n| VXLAN (flannel.1) | %.0f |\n| plain link (host-gw) | %.0f |\n| ratio (median of rounds) | %.2f (goal >= 0.85) |\n",
			median(tunnel), median(link), median(ratio))
	}
}
