package allocator

import (
	"fmt"
	"net/netip"
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

// TestRandomIPPrefersUpperBand: dynamic ClusterIPs come from above the static band (the
// first 16 hosts of a /24, 256 of a /16, as kube-apiserver's) until that part is full,
// then from the band; never the network, broadcast or first address of the cluster's
// range.
func TestRandomIPPrefersUpperBand(t *testing.T) {
	if got := []int{staticIPBand(256), staticIPBand(4096), staticIPBand(1 << 16), staticIPBand(16), staticIPBand(32)}; fmt.Sprint(got) != "[16 256 256 0 16]" {
		t.Errorf("static bands %v, want [16 256 256 0 16]", got)
	}
	a := &Services{}
	cidr := netip.MustParsePrefix("10.96.0.0/24") // band: .1-.16
	used := map[string]bool{}
	for i := range 253 {
		ip, ok := a.randomIP(cidr, true, used)
		if !ok {
			t.Fatalf("allocation %d: range full", i)
		}
		last := netip.MustParseAddr(ip).As4()[3]
		if last == 0 || last == 1 || last == 255 {
			t.Fatalf("allocation %d took %s", i, ip)
		}
		if inBand := last <= 16; inBand != (i >= 238) {
			t.Fatalf("allocation %d took %s: in the static band %v, want it only once the 238 addresses above are taken", i, ip, inBand)
		}
		used[ipKey(ip)] = true
	}
	if ip, ok := a.randomIP(cidr, true, used); ok {
		t.Fatalf("full range gave %s", ip)
	}
}
