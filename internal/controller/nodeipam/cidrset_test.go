package nodeipam

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustSet(t *testing.T, cluster string, mask int) *cidrSet {
	t.Helper()
	s, err := newCIDRSet(netip.MustParsePrefix(cluster), mask)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewCIDRSetRejects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster netip.Prefix
		mask    int
	}{
		{"invalid cluster", netip.Prefix{}, 24},
		{"mask shorter than cluster", netip.MustParsePrefix("10.244.0.0/16"), 15},
		{"mask longer than address", netip.MustParsePrefix("10.244.0.0/16"), 33},
		{"too many subnets", netip.MustParsePrefix("10.0.0.0/8"), 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := newCIDRSet(tc.cluster, tc.mask); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestSubnetAndIndex(t *testing.T) {
	for _, tc := range []struct {
		cluster string
		mask    int
		i       int
		want    string
	}{
		{"10.244.0.0/16", 24, 0, "10.244.0.0/24"},
		{"10.244.0.0/16", 24, 1, "10.244.1.0/24"},
		{"10.244.0.0/16", 24, 255, "10.244.255.0/24"},
		{"10.244.0.0/16", 26, 5, "10.244.1.64/26"},
		{"10.244.0.0/24", 24, 0, "10.244.0.0/24"},
		{"10.0.0.0/8", 20, 17, "10.1.16.0/20"},
		{"fd00:10:244::/48", 64, 258, "fd00:10:244:102::/64"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			s := mustSet(t, tc.cluster, tc.mask)
			got := s.subnet(tc.i)
			if got.String() != tc.want {
				t.Fatalf("subnet(%d) = %v, want %s", tc.i, got, tc.want)
			}
			if back := s.index(got.Addr()); back != tc.i {
				t.Fatalf("index(%v) = %d, want %d", got.Addr(), back, tc.i)
			}
		})
	}
}

func TestCovered(t *testing.T) {
	s := mustSet(t, "10.244.0.0/16", 24)
	for _, tc := range []struct {
		cidr string
		want []int
	}{
		{"10.244.3.0/24", []int{3}},
		{"10.244.3.128/25", []int{3}},
		{"10.244.4.0/23", []int{4, 5}},
		{"10.244.7.9/24", []int{7}},
		{"10.245.0.0/24", nil},
		{"fd00::/64", nil},
	} {
		t.Run(tc.cidr, func(t *testing.T) {
			if d := cmp.Diff(tc.want, s.covered(netip.MustParsePrefix(tc.cidr))); d != "" {
				t.Fatalf("(-want +got):\n%s", d)
			}
		})
	}
	if got := len(s.covered(netip.MustParsePrefix("10.0.0.0/8"))); got != 256 {
		t.Fatalf("a prefix around the cluster covers %d subnets, want 256", got)
	}
}

// op is one step on a cidrSet: allocate for node, release node, or occupy
// cidrs for node; want is the subnet allocate returns ("" for none) or the
// comma-free conflict list occupy returns.
type op struct {
	verb  string
	node  string
	cidrs []string
	want  string
}

func TestCIDRSetSequences(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster string
		mask    int
		ops     []op
	}{{
		name: "lowest free first, in order", cluster: "10.244.0.0/16", mask: 24,
		ops: []op{
			{verb: "allocate", node: "a", want: "10.244.0.0/24"},
			{verb: "allocate", node: "b", want: "10.244.1.0/24"},
			{verb: "allocate", node: "c", want: "10.244.2.0/24"},
		},
	}, {
		name: "allocating twice keeps the node's subnet", cluster: "10.244.0.0/16", mask: 24,
		ops: []op{
			{verb: "allocate", node: "a", want: "10.244.0.0/24"},
			{verb: "allocate", node: "a", want: "10.244.0.0/24"},
			{verb: "allocate", node: "b", want: "10.244.1.0/24"},
		},
	}, {
		name: "a freed subnet is reused", cluster: "10.244.0.0/16", mask: 24,
		ops: []op{
			{verb: "allocate", node: "a", want: "10.244.0.0/24"},
			{verb: "allocate", node: "b", want: "10.244.1.0/24"},
			{verb: "allocate", node: "c", want: "10.244.2.0/24"},
			{verb: "release", node: "b"},
			{verb: "allocate", node: "d", want: "10.244.1.0/24"},
			{verb: "allocate", node: "e", want: "10.244.3.0/24"},
		},
	}, {
		name: "occupied subnets are skipped", cluster: "10.244.0.0/16", mask: 24,
		ops: []op{
			{verb: "occupy", node: "x", cidrs: []string{"10.244.0.0/24"}},
			{verb: "occupy", node: "y", cidrs: []string{"10.244.2.0/23"}},
			{verb: "occupy", node: "z", cidrs: []string{"192.168.0.0/24"}},
			{verb: "allocate", node: "a", want: "10.244.1.0/24"},
			{verb: "allocate", node: "b", want: "10.244.4.0/24"},
		},
	}, {
		name: "occupy conflicts are reported, not taken", cluster: "10.244.0.0/16", mask: 24,
		ops: []op{
			{verb: "occupy", node: "x", cidrs: []string{"10.244.0.0/24"}},
			{verb: "occupy", node: "y", cidrs: []string{"10.244.0.0/24"}, want: "x"},
			{verb: "release", node: "y"},
			{verb: "allocate", node: "a", want: "10.244.1.0/24"},
		},
	}, {
		name: "occupy replaces what the node held", cluster: "10.244.0.0/16", mask: 24,
		ops: []op{
			{verb: "allocate", node: "a", want: "10.244.0.0/24"},
			{verb: "occupy", node: "a", cidrs: []string{"10.244.9.0/24"}},
			{verb: "allocate", node: "b", want: "10.244.0.0/24"},
		},
	}, {
		name: "full range", cluster: "10.244.0.0/23", mask: 24,
		ops: []op{
			{verb: "allocate", node: "a", want: "10.244.0.0/24"},
			{verb: "allocate", node: "b", want: "10.244.1.0/24"},
			{verb: "allocate", node: "c", want: ""},
			{verb: "release", node: "a"},
			{verb: "allocate", node: "c", want: "10.244.0.0/24"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSet(t, tc.cluster, tc.mask)
			for i, o := range tc.ops {
				var got string
				switch o.verb {
				case "allocate":
					if p, ok := s.allocate(o.node); ok {
						got = p.String()
					}
				case "release":
					s.release(o.node)
				case "occupy":
					var cidrs []netip.Prefix
					for _, c := range o.cidrs {
						cidrs = append(cidrs, netip.MustParsePrefix(c))
					}
					for _, other := range s.occupy(o.node, cidrs) {
						got += other
					}
				}
				if got != o.want {
					t.Fatalf("step %d (%s %s) = %q, want %q", i, o.verb, o.node, got, o.want)
				}
			}
		})
	}
}
