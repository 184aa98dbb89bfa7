package proxy

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStaleFlows(t *testing.T) {
	cip := netip.MustParseAddr("10.96.0.10")
	a := netip.MustParseAddrPort("10.244.1.2:5353")
	b := netip.MustParseAddrPort("10.244.2.2:5353")
	tests := []struct {
		name     string
		old, cur []frontend
		want     []StaleFlow
	}{
		{name: "unchanged", old: []frontend{{dst: cip, port: 53, endpoints: []netip.AddrPort{a}}},
			cur: []frontend{{dst: cip, port: 53, endpoints: []netip.AddrPort{a}}}},
		{name: "endpoint replaced", old: []frontend{{dst: cip, port: 53, endpoints: []netip.AddrPort{a}}},
			cur:  []frontend{{dst: cip, port: 53, endpoints: []netip.AddrPort{b}}},
			want: []StaleFlow{{Dst: cip, Port: 53, Endpoint: a}}},
		{name: "scaled to zero", old: []frontend{{dst: cip, port: 53, endpoints: []netip.AddrPort{a, b}}},
			cur:  []frontend{{dst: cip, port: 53}},
			want: []StaleFlow{{Dst: cip, Port: 53, Endpoint: a}, {Dst: cip, Port: 53, Endpoint: b}}},
		{name: "service deleted", old: []frontend{{dst: cip, port: 53, endpoints: []netip.AddrPort{a}}, {port: 30053, endpoints: []netip.AddrPort{a}}},
			want: []StaleFlow{{Dst: cip, Port: 53, Endpoint: a}, {Port: 30053, Endpoint: a}}},
		{name: "first endpoint", old: []frontend{{dst: cip, port: 53}}, cur: []frontend{{dst: cip, port: 53, endpoints: []netip.AddrPort{a}}},
			want: []StaleFlow{{Dst: cip, Port: 53}}},
		{name: "new service", cur: []frontend{{dst: cip, port: 53, endpoints: []netip.AddrPort{a}}},
			want: []StaleFlow{{Dst: cip, Port: 53}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, staleFlows(tc.old, tc.cur), cmp.Comparer(func(x, y netip.Addr) bool { return x == y }),
				cmp.Comparer(func(x, y netip.AddrPort) bool { return x == y })); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestMatchesStale(t *testing.T) {
	cip := netip.MustParseAddr("10.96.0.10")
	flows := []StaleFlow{{Dst: cip, Port: 53, Endpoint: netip.MustParseAddrPort("10.244.1.2:5353")}, {Port: 30053}}
	ap := netip.MustParseAddrPort
	tests := []struct {
		name          string
		fwdDst, reply netip.AddrPort
		want          bool
	}{
		{"translated to the removed endpoint", ap("10.96.0.10:53"), ap("10.244.1.2:5353"), true},
		{"translated to another endpoint", ap("10.96.0.10:53"), ap("10.244.2.2:5353"), false},
		{"another service port", ap("10.96.0.10:54"), ap("10.244.1.2:5353"), false},
		{"untranslated NodePort flow", ap("10.240.0.10:30053"), ap("10.240.0.10:30053"), true},
		{"translated NodePort flow", ap("10.240.0.10:30053"), ap("10.244.2.2:5353"), false},
	}
	for _, tc := range tests {
		if got := matchesStale(flows, tc.fwdDst, tc.reply); got != tc.want {
			t.Errorf("%s: got %v", tc.name, got)
		}
	}
}
