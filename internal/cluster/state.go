package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/tranche/tranche/internal/clusternet"
)

// State is what DATA/cluster.json records about a local cluster: its network (node
// names, underlay addresses, pod subnets) and each node's zone. `tranche up` restores a
// cluster from it, `tranche node add|remove` change it, and every `tranche agent` reads
// it (--cluster-file) to learn its node's addresses and the other nodes'.
type State struct {
	// Topology is the cluster network, exactly as clusternet builds it.
	Topology clusternet.Topology `json:"topology"`
	// Zones maps a node name to its zone (label topology.kubernetes.io/zone); nodes
	// without a zone are absent.
	Zones map[string]string `json:"zones,omitempty"`
	// Name is the cluster's name (`tranche up --name`); files of older releases have
	// none.
	Name string `json:"name,omitempty"`
	// Listen is the API server's host address of the last start, which a restart
	// without --listen keeps.
	Listen string `json:"listen,omitempty"`
	// LoadBalancerPool is the load-balancer pool of the last start, which a restart
	// without --loadbalancer-pool keeps: NoPool for none, empty when not recorded.
	LoadBalancerPool string `json:"loadBalancerPool,omitempty"`
	// ProxyMode is the service proxy mode of the nodes' agents at the last start, which
	// a restart without --proxy-mode keeps; empty in files of older releases, which
	// ran nftables.
	ProxyMode string `json:"proxyMode,omitempty"`
	// IPVSScheduler is the IPVS scheduler of proxy mode ipvs, kept the same way.
	IPVSScheduler string `json:"ipvsScheduler,omitempty"`
	// Registries is the registries configuration file of this start (`--registries`),
	// which agents started later (`tranche node add`, restarts) are given too.
	Registries string `json:"registries,omitempty"`
	// ImageGC are the agents' image garbage collection settings of this start, which
	// agents started later are given too.
	ImageGC ImageGC `json:"imageGC,omitzero"`
}

// NoPool is the LoadBalancerPool State records for a cluster without load balancers.
const NoPool = "none"

// recordPool is what State.LoadBalancerPool records for pool.
func recordPool(pool string) string {
	if pool == "" {
		return NoPool
	}
	return pool
}

// recordedPool reads State.LoadBalancerPool: the pool, and whether one is recorded.
func recordedPool(rec string) (string, bool) {
	if rec == NoPool {
		return "", true
	}
	return rec, rec != ""
}

// LoadState reads a cluster.json written by `tranche up` and checks that its topology
// can be built.
func LoadState(path string) (State, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return State{}, fmt.Errorf("reading cluster state: %w", err)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return State{}, fmt.Errorf("cluster state %s: %w", path, err)
	}
	if err := s.Topology.Validate(); err != nil {
		return State{}, fmt.Errorf("cluster state %s: %w", path, err)
	}
	return s, nil
}

// saveState replaces path atomically, so an agent never reads half a file.
func saveState(path string, s State) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding cluster state: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing cluster state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing cluster state: %w", err)
	}
	return nil
}

// NodeName is the name `tranche up` gives its i-th node (0-based): tranche-1, tranche-2, ...
func NodeName(i int) string {
	return "tranche-" + strconv.Itoa(i+1)
}

// newState is the state of a new cluster of n nodes named NodeName(i), whose zones are
// handed out round robin from zones (none when zones is empty).
func newState(prefix string, n int, zones []string) (State, error) {
	if n < 1 {
		return State{}, fmt.Errorf("a cluster needs at least one node, not %d", n)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = NodeName(i)
	}
	topo, err := clusternet.NewTopology(prefix, names...)
	if err != nil {
		return State{}, err
	}
	s := State{Topology: topo}
	for i, name := range names {
		if len(zones) > 0 {
			s.setZone(name, zones[i%len(zones)])
		}
	}
	return s, nil
}

// setZone records node's zone; the empty zone removes it.
func (s *State) setZone(node, zone string) {
	if zone == "" {
		delete(s.Zones, node)
		return
	}
	if s.Zones == nil {
		s.Zones = map[string]string{}
	}
	s.Zones[node] = zone
}

// nodeNames returns the nodes' names in the topology's order.
func (s State) nodeNames() []string {
	var names []string
	for _, n := range s.Topology.Nodes {
		names = append(names, n.Name)
	}
	return names
}

// paths of the files of a cluster below its data directory.
type paths struct{ dir string }

func (p paths) state() string              { return filepath.Join(p.dir, "cluster.json") }
func (p paths) stateLock() string          { return filepath.Join(p.dir, "cluster.lock") }
func (p paths) pidFile() string            { return filepath.Join(p.dir, PIDFile) }
func (p paths) kubeconfig() string         { return filepath.Join(p.dir, "kubeconfig") }
func (p paths) pki() string                { return filepath.Join(p.dir, "pki") }
func (p paths) nodesDir() string           { return filepath.Join(p.dir, "nodes") }
func (p paths) nodeDir(node string) string { return filepath.Join(p.dir, "nodes", node) }
func (p paths) agentPID(node string) string {
	return filepath.Join(p.nodeDir(node), "agent.pid")
}

// recordedAgents returns the nodes below DATA/nodes that have an agent pid file, sorted.
func (p paths) recordedAgents() ([]string, error) {
	entries, err := os.ReadDir(p.nodesDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing agents: %w", err)
	}
	var nodes []string
	for _, e := range entries {
		if _, err := os.Stat(p.agentPID(e.Name())); err == nil {
			nodes = append(nodes, e.Name())
		}
	}
	slices.Sort(nodes)
	return nodes, nil
}
