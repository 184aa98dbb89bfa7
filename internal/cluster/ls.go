package cluster

import (
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"k8s.io/client-go/tools/clientcmd"
)

// Info describes one cluster of the machine, as `tranche ls` shows it.
type Info struct {
	// Name is the cluster's name (recorded in cluster.json, else from its directory).
	Name string
	// DataDir is the cluster's data directory.
	DataDir string
	// PID is the `tranche up` process running the cluster, 0 when it is stopped.
	PID int
	// Nodes is the number of nodes in cluster.json.
	Nodes int
	// Prefix starts the names of the cluster's network namespaces.
	Prefix string
	// Listen is the API server's host address (recorded, else from the kubeconfig),
	// empty when unknown.
	Listen string
	// Pool is the recorded load-balancer pool, empty when none is recorded.
	Pool string
	// Kubeconfig is the admin kubeconfig `tranche up` writes.
	Kubeconfig string
}

// Running reports whether the cluster's `tranche up` process runs.
func (i Info) Running() bool { return i.PID > 0 }

// Known finds the clusters of this machine: the data directories holding a
// cluster.json beside the default one (DefaultDataDir(DefaultName) and its "-NAME"
// siblings), and the data directories of running clusters, wherever they are, from the
// namespace-prefix locks in LockDir. They are sorted by name, then data directory.
func Known() ([]Info, error) {
	base := defaultBase()
	dirs := []string{base}
	siblings, err := filepath.Glob(base + "-*")
	if err != nil {
		return nil, err
	}
	dirs = append(dirs, siblings...)
	locks, _ := filepath.Glob(filepath.Join(LockDir, "*cluster.lock"))
	for _, l := range locks {
		if ok, holder := held(l); ok {
			if _, dir, found := strings.Cut(holder, " "); found && dir != "" {
				dirs = append(dirs, dir)
			}
		}
	}
	seen := map[string]bool{}
	var out []Info
	for _, dir := range dirs {
		abs := absPath(dir)
		if seen[abs] {
			continue
		}
		seen[abs] = true
		if info, ok := inspect(dir); ok {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b Info) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.DataDir, b.DataDir)
	})
	return out, nil
}

// inspect reads the cluster in dir; false when dir holds no cluster.json.
func inspect(dir string) (Info, bool) {
	p := paths{dir: dir}
	s, err := LoadState(p.state())
	if err != nil {
		return Info{}, false
	}
	info := Info{Name: s.Name, DataDir: dir, Nodes: len(s.Topology.Nodes), Prefix: s.Topology.Prefix,
		Listen: s.Listen, Kubeconfig: p.kubeconfig()}
	if info.Name == "" {
		info.Name = nameFromDir(dir)
	}
	info.Pool, _ = recordedPool(s.LoadBalancerPool)
	if info.Listen == "" {
		info.Listen = kubeconfigHost(p.kubeconfig())
	}
	if ok, holder := held(p.pidFile()); ok {
		if pid, err := strconv.Atoi(firstField(holder)); err == nil && pid > 0 {
			info.PID = pid
		}
	}
	return info, true
}

// kubeconfigHost is the host:port of the current cluster's server in a kubeconfig,
// empty when it cannot be read.
func kubeconfigHost(path string) string {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return ""
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return ""
	}
	c, ok := cfg.Clusters[ctx.Cluster]
	if !ok {
		return ""
	}
	u, err := url.Parse(c.Server)
	if err != nil {
		return ""
	}
	return u.Host
}

// List writes the table of `tranche ls`: NAME, STATE (running or stopped), NODES, API
// URL and KUBECONFIG of every cluster Known finds.
func List(w io.Writer) error {
	known, err := Known()
	if err != nil {
		return fmt.Errorf("listing clusters: %w", err)
	}
	if len(known) == 0 {
		_, err = fmt.Fprintf(w, "no clusters (looked in %s, %s-* and the running clusters' locks in %s)\n", defaultBase(), defaultBase(), LockDir)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tNODES\tAPI URL\tKUBECONFIG")
	for _, k := range known {
		state, api := "stopped", "-"
		if k.Running() {
			state = "running"
		}
		if k.Listen != "" {
			api = "https://" + k.Listen
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", k.Name, state, k.Nodes, api, k.Kubeconfig)
	}
	return tw.Flush()
}
