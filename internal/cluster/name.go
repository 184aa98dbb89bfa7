package cluster

import (
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tranche/tranche/internal/controller/servicelb"
	"github.com/tranche/tranche/internal/netns"
)

// Several clusters can run side by side on one machine, each under a name (`tranche up
// --name NAME`, like kind's). The default cluster, DefaultName, has today's defaults:
// data directory /var/lib/tranche (as root), namespace prefix tr-, API server on
// 127.0.0.1:6443 and load balancers from 127.0.10.0/24. Any other cluster NAME lives in
// the sibling directory /var/lib/tranche-NAME (never below the default one, whose `down
// --purge` and mount clean-up cover everything below it), and gets a namespace prefix,
// an API port and a load-balancer pool no other known cluster of the machine uses,
// chosen on its first start and recorded in its cluster.json so that a restart keeps
// them. Explicit flags win over both.

// DefaultName is the name of the cluster of the default data directory.
const DefaultName = "tranche"

// DefaultListen is the API server's host address of the default cluster.
const DefaultListen = "127.0.0.1:6443"

// ValidateName checks that name is a DNS label (RFC 1123: at most 63 lowercase letters,
// digits and '-', starting and ending with a letter or digit), as a cluster name is
// part of a directory name and of printed commands.
func ValidateName(name string) error {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("--name %q: a cluster name must be a DNS label: %s", name, strings.Join(msgs, "; "))
	}
	return nil
}

// nameOr returns name, or DefaultName when it is empty.
func nameOr(name string) string {
	if name == "" {
		return DefaultName
	}
	return name
}

// defaultBase is the default cluster's data directory: /var/lib/tranche for root, else
// $XDG_DATA_HOME/tranche (or ~/.local/share/tranche).
func defaultBase() string {
	if os.Geteuid() == 0 {
		return "/var/lib/tranche"
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "tranche")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "share", "tranche")
}

// DefaultDataDir is the data directory of the cluster called name: the default one for
// DefaultName (or ""), its sibling "tranche-NAME" for any other name.
func DefaultDataDir(name string) string {
	return dataDirBeside(defaultBase(), name)
}

func dataDirBeside(base, name string) string {
	if name = nameOr(name); name == DefaultName {
		return base
	}
	return base + "-" + name
}

// nameFromDir is the name of the cluster in dir when cluster.json records none: that
// of its default directory ("tranche" or "tranche-NAME"), else the directory's base
// name.
func nameFromDir(dir string) string {
	base := filepath.Base(filepath.Clean(dir))
	if n, ok := strings.CutPrefix(base, DefaultName+"-"); ok && n != "" {
		return n
	}
	return base
}

// namedPrefix is the candidate namespace prefix number attempt of a cluster called
// name other than DefaultName: "tn", six hex digits of a hash of the name and "-".
// All have the same length and end in '-', so none is the beginning of another (names
// are matched by prefix when a cluster is cleaned up), nor of tr- or of the test
// clusters' prefixes.
func namedPrefix(name string, attempt int) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	if attempt > 0 {
		h.Write([]byte("#" + strconv.Itoa(attempt)))
	}
	return fmt.Sprintf("tn%06x-", h.Sum32()&0xffffff)
}

// addresses are what distinguishes a cluster's resources on the machine.
type addresses struct {
	prefix, listen, pool string
}

// taken says which addresses other clusters of the machine hold.
type taken struct {
	// prefix reports whether a namespace prefix overlaps one in use.
	prefix func(string) bool
	// port reports whether a TCP port of 127.0.0.1 is in use.
	port func(int) bool
	// pool reports whether an address is in another cluster's load-balancer pool.
	pool func(netip.Addr) bool
}

// chooseAddresses picks a new cluster's addresses: today's defaults for DefaultName,
// else the first namespace prefix, API port (from 6444) and 127.0.N.0/24 pool (from
// N=11) that t does not report taken.
func chooseAddresses(name string, t taken) (addresses, error) {
	if nameOr(name) == DefaultName {
		return addresses{prefix: DefaultPrefix, listen: DefaultListen, pool: servicelb.DefaultPool}, nil
	}
	var a addresses
	for i := 0; i < 100 && a.prefix == ""; i++ {
		if p := namedPrefix(name, i); !t.prefix(p) {
			a.prefix = p
		}
	}
	for port := 6444; port < 6444+1000 && a.listen == ""; port++ {
		if !t.port(port) {
			a.listen = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(port)).String()
		}
	}
	for n := 11; n < 255 && a.pool == ""; n++ {
		free := true
		for host := 1; host < 255 && free; host++ {
			free = !t.pool(netip.AddrFrom4([4]byte{127, 0, byte(n), byte(host)}))
		}
		if free {
			a.pool = fmt.Sprintf("127.0.%d.0/24", n)
		}
	}
	if a.prefix == "" || a.listen == "" || a.pool == "" {
		return a, fmt.Errorf("cluster %q: no free namespace prefix, API port or load-balancer pool left (%+v); give --netns-prefix, --listen and --loadbalancer-pool", name, a)
	}
	return a, nil
}

// machineTaken is what the machine's other clusters (those Known finds, except the one
// in dataDir) and its other programs hold: recorded prefixes and namespaces present,
// recorded API addresses and ports in use, recorded load-balancer pools.
func machineTaken(dataDir string) taken {
	self := absPath(dataDir)
	var prefixes []string
	ports := map[int]bool{}
	var pools []servicelb.Pool
	known, _ := Known()
	for _, k := range known {
		if absPath(k.DataDir) == self {
			continue
		}
		prefixes = append(prefixes, k.Prefix)
		if _, port, err := net.SplitHostPort(k.Listen); err == nil {
			p, _ := strconv.Atoi(port)
			ports[p] = true
		}
		if pool, err := servicelb.ParsePool(k.Pool); err == nil {
			pools = append(pools, pool)
		}
	}
	return taken{
		prefix: func(p string) bool {
			for _, q := range prefixes {
				if q != "" && (strings.HasPrefix(q, p) || strings.HasPrefix(p, q)) {
					return true
				}
			}
			names, err := netns.List(p)
			return err != nil || len(names) > 0
		},
		port: func(port int) bool {
			if ports[port] {
				return true
			}
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				return true
			}
			l.Close()
			return false
		},
		pool: func(a netip.Addr) bool {
			for _, p := range pools {
				if p.Contains(a) {
					return true
				}
			}
			return false
		},
	}
}
