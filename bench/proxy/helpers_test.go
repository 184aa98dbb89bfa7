package proxy

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tranche/tranche/internal/proxy"
	"sigs.k8s.io/knftables"
)

// feed hands services [from, to) with their EndpointSlices to p's event handlers.
func feed(p proxy.ModeProxier, from, to int) {
	for i := from; i < to; i++ {
		svc, slice := service(i)
		p.OnServiceAdd(svc)
		p.OnEndpointSliceAdd(slice)
	}
}

// timedSync runs one p.Sync inside ns ("" for a mode whose kernel is a fake: in this
// goroutine) and returns its wall-clock and CPU time (this process and the tools it ran).
// The events' garbage is collected first: it is not the sync's.
func timedSync(b *testing.B, ns string, p proxy.ModeProxier) (wall, cpu time.Duration) {
	b.Helper()
	runtime.GC()
	run := func() error {
		c0, t0 := cpuTime(b), time.Now()
		err := p.Sync(context.Background())
		wall, cpu = time.Since(t0), cpuTime(b)-c0
		return err
	}
	if ns == "" {
		if err := run(); err != nil {
			b.Fatal(err)
		}
		return wall, cpu
	}
	inNS(b, ns, run)
	return wall, cpu
}

// addOneTimes adds services [n, n+adds) one at a time, a sync after each, and returns
// each sync's wall-clock time.
func addOneTimes(b *testing.B, ns string, p proxy.ModeProxier, n int) []time.Duration {
	b.Helper()
	times := make([]time.Duration, 0, adds)
	for i := n; i < n+adds; i++ {
		feed(p, i, i+1)
		wall, _ := timedSync(b, ns, p)
		times = append(times, wall)
	}
	return times
}

// restoreIn runs `tool args...` inside ns with data on its standard input (iptables-restore,
// nft -f -) and returns its wall-clock and CPU time.
func restoreIn(b *testing.B, ns, tool string, data []byte, args ...string) (wall, cpu time.Duration) {
	b.Helper()
	inNS(b, ns, func() error {
		cmd := exec.Command(tool, args...)
		cmd.Stdin = bytes.NewReader(data)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		t0 := time.Now()
		err := cmd.Run()
		wall = time.Since(t0)
		if cmd.ProcessState != nil {
			cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		if err != nil {
			return fmt.Errorf("%s %s: %v: %s", tool, strings.Join(args, " "), err, tail(stderr.String()))
		}
		return nil
	})
	return wall, cpu
}

// nftProxier is an nftables-mode Proxier writing through real nft into a new network
// namespace named after name, which it returns.
func nftProxier(b *testing.B, name string) (*proxy.Proxier, string) {
	b.Helper()
	ns := newNS(b, name)
	var nft knftables.Interface
	inNS(b, ns, func() error {
		var err error
		nft, err = proxy.NewKernel()
		return err
	})
	p, err := proxy.NewProxier(nft, proxy.ProxierConfig{Config: config(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	return p, ns
}
