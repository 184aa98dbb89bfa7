package clusternet

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPodIPs(t *testing.T) {
	ip := netip.MustParseAddr
	a, err := NewPodIPs(netip.MustParsePrefix("10.244.1.0/29")) // .2 to .6
	if err != nil {
		t.Fatal(err)
	}
	var got []netip.Addr
	for range 3 {
		x, err := a.Allocate()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, x)
	}
	cmpAddrs := cmp.Comparer(func(x, y netip.Addr) bool { return x == y })
	if diff := cmp.Diff([]netip.Addr{ip("10.244.1.2"), ip("10.244.1.3"), ip("10.244.1.4")}, got, cmpAddrs); diff != "" {
		t.Errorf("first allocations (-want +got):\n%s", diff)
	}

	// A released address is not reused before the range has gone round.
	a.Release(ip("10.244.1.2"))
	if err := a.Reserve(ip("10.244.1.6")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"10.244.1.5", "10.244.1.2"} {
		if x, err := a.Allocate(); err != nil || x != ip(want) {
			t.Errorf("Allocate = %s, %v; want %s", x, err, want)
		}
	}
	if x, err := a.Allocate(); err == nil {
		t.Errorf("Allocate on a full range gave %s", x)
	}
	if diff := cmp.Diff([]netip.Addr{ip("10.244.1.2"), ip("10.244.1.3"), ip("10.244.1.4"), ip("10.244.1.5"), ip("10.244.1.6")}, a.Allocated(), cmpAddrs); diff != "" {
		t.Errorf("Allocated (-want +got):\n%s", diff)
	}

	for _, bad := range []string{"10.244.1.1", "10.244.1.7", "10.244.2.3", "10.244.1.3"} {
		if err := a.Reserve(ip(bad)); err == nil {
			t.Errorf("Reserve(%s) succeeded", bad)
		}
	}
	a.Release(ip("10.9.9.9")) // foreign: no effect, no panic

	for _, bad := range []string{"10.244.1.0/31", "10.244.1.1/24", "fd00::/64"} {
		if _, err := NewPodIPs(netip.MustParsePrefix(bad)); err == nil {
			t.Errorf("NewPodIPs(%s) succeeded", bad)
		}
	}
	if _, err := NewPodIPs(netip.Prefix{}); err == nil {
		t.Errorf("NewPodIPs of the zero prefix succeeded")
	}
}

func TestPodIPsFullSlash24(t *testing.T) {
	a, err := NewPodIPs(netip.MustParsePrefix("10.244.0.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ; ; n++ {
		if _, err := a.Allocate(); err != nil {
			break
		}
	}
	if n != 253 {
		t.Errorf("a /24 gave %d pod addresses, want 253 (.2 to .254)", n)
	}
}
