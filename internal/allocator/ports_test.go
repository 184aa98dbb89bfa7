package allocator

import (
	"fmt"
	"testing"
)

// TestRandomPortPrefersUpperBand: dynamic NodePorts come from above the static band
// (the lowest 86 ports of 30000-32767, as kube-apiserver's) until that part is full,
// then from the band; a range under 16 ports has no band.
func TestRandomPortPrefersUpperBand(t *testing.T) {
	if got := []int{staticPortBand(2768), staticPortBand(100), staticPortBand(10000), staticPortBand(15)}; fmt.Sprint(got) != "[86 16 128 0]" {
		t.Errorf("static bands %v, want [86 16 128 0]", got)
	}
	a := &Services{Ports: PortRange{First: 30000, Last: 30099}} // band: 30000-30015
	used := map[string]bool{}
	for i := range 100 {
		p, ok := a.randomPort(used, nil)
		if !ok {
			t.Fatalf("allocation %d: range full", i)
		}
		if i < 84 && p < 30016 {
			t.Fatalf("allocation %d took %d of the static band while the rest had free ports", i, p)
		}
		if i >= 84 && p >= 30016 {
			t.Fatalf("allocation %d took %d, want the static band once the rest is full", i, p)
		}
		used[portKey(p)] = true
	}
	if p, ok := a.randomPort(used, nil); ok {
		t.Errorf("a full range gave %d", p)
	}
}
