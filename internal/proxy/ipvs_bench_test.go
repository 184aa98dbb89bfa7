package proxy

import (
	"fmt"
	"testing"
)

// BenchmarkIPVSSync plans, diffs and applies to the fakes (FakeIPVS, FakeIPVSDevice,
// FakeIPVSRules) a full sync of N services with 10 endpoints each, then a partial sync
// after one endpoint change, then one after one added service. The netlink batch
// itself cannot be measured on a kernel without IP_VS: the fake's cost stands in for
// it. Compare with BenchmarkSync (the nftables mode against knftables.Fake).
func BenchmarkIPVSSync(b *testing.B) {
	load := func(f *ipvsFixture, n int) {
		for i := range n {
			f.p.OnServiceAdd(makeService("bench", fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.%d.%d", 1+i/250, 1+i%250), nil))
			f.p.OnEndpointSliceAdd(benchSlice(i, 0))
		}
	}
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("full/services=%d", n), func(b *testing.B) {
			for b.Loop() {
				f := newIPVSFixture(b, IPVSOptions{})
				load(f, n)
				f.sync(b)
			}
		})
		b.Run(fmt.Sprintf("partial/services=%d", n), func(b *testing.B) {
			f := newIPVSFixture(b, IPVSOptions{})
			load(f, n)
			f.sync(b)
			i := 0
			for b.Loop() {
				i++
				f.p.OnEndpointSliceUpdate(nil, benchSlice(0, i%2))
				f.sync(b)
			}
		})
		b.Run(fmt.Sprintf("add-one/services=%d", n), func(b *testing.B) {
			f := newIPVSFixture(b, IPVSOptions{})
			load(f, n)
			f.sync(b)
			i := n
			for b.Loop() {
				f.p.OnServiceAdd(makeService("bench", fmt.Sprintf("s%d", i), fmt.Sprintf("10.97.%d.%d", i/250%250, 1+i%250), nil))
				f.p.OnEndpointSliceAdd(benchSlice(i, 0))
				f.sync(b)
				i++
			}
		})
	}
}
