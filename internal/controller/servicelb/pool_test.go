package servicelb

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParsePool(t *testing.T) {
	cases := []struct {
		name      string
		in        string
		first     string
		count     int
		contains  []string
		excludes  []string
		wantError string
	}{
		{name: "default /24 leaves out network and broadcast", in: DefaultPool, first: "127.0.10.1", count: 254,
			contains: []string{"127.0.10.1", "127.0.10.254"}, excludes: []string{"127.0.10.0", "127.0.10.255", "127.0.11.1"}},
		{name: "/31 keeps both", in: "127.0.10.0/31", first: "127.0.10.0", count: 2},
		{name: "single address", in: "192.0.2.7", first: "192.0.2.7", count: 1},
		{name: "comma list of address, range and CIDR", in: "127.0.20.9, 127.0.20.1-127.0.20.3,127.0.30.0/30", first: "127.0.20.1", count: 6,
			contains: []string{"127.0.20.2", "127.0.20.9", "127.0.30.1", "127.0.30.2"}, excludes: []string{"127.0.20.4", "127.0.30.3"}},
		{name: "ipv6 prefix", in: "fd00::/126", first: "fd00::", count: 4},
		{name: "empty is the empty pool", in: "  ", count: 0},
		{name: "garbage", in: "127.0.10.0/24,nope", wantError: `entry "nope": not an address`},
		{name: "bad CIDR", in: "127.0.10.0/33", wantError: "not a CIDR"},
		{name: "reversed range", in: "127.0.10.9-127.0.10.1", wantError: "must not be above"},
		{name: "mixed-family range", in: "127.0.10.1-::1", wantError: "one address family"},
		{name: "empty entry", in: "127.0.10.1,,127.0.10.2", wantError: "empty entry"},
		{name: "overlap", in: "127.0.10.0/24,127.0.10.7", wantError: "overlaps"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePool(tc.in)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("ParsePool(%q) error = %v, want one containing %q", tc.in, err, tc.wantError)
				}
				if !strings.Contains(err.Error(), tc.in) {
					t.Fatalf("error %q does not quote the pool", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			addrs := slices.Collect(p.Addrs())
			if len(addrs) != tc.count {
				t.Fatalf("%d addresses, want %d: %v", len(addrs), tc.count, addrs)
			}
			if p.Empty() != (tc.count == 0) {
				t.Fatalf("Empty() = %v with %d addresses", p.Empty(), tc.count)
			}
			if tc.count > 0 && addrs[0].String() != tc.first {
				t.Fatalf("first address %s, want %s", addrs[0], tc.first)
			}
			if !slices.IsSortedFunc(addrs, netip.Addr.Compare) {
				t.Fatalf("addresses not ascending: %v", addrs)
			}
			for _, a := range tc.contains {
				if !p.Contains(netip.MustParseAddr(a)) {
					t.Errorf("pool %s does not contain %s", p, a)
				}
			}
			for _, a := range tc.excludes {
				if p.Contains(netip.MustParseAddr(a)) {
					t.Errorf("pool %s contains %s", p, a)
				}
			}
		})
	}
}
