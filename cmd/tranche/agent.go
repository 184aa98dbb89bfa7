package main

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tranche/tranche/internal/agent"
	"github.com/tranche/tranche/internal/apilookup"
	"github.com/tranche/tranche/internal/logging"
	"github.com/tranche/tranche/internal/memtune"
	"github.com/tranche/tranche/internal/overlay"
	"github.com/tranche/tranche/internal/proxy"
	"github.com/tranche/tranche/internal/registries"
)

func agentCmd() *cobra.Command {
	var cfg agent.NodeConfig
	var kubeconfig, networkKubeconfig, clusterFile, logLevel, dns, serviceCIDR, logMaxSize, registriesFile string
	var join joinFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node: register it, run its pods as OCI containers (runc), keep its status",
		Long: "Run a node agent in the network namespace that is the node. `tranche up` starts one per node;\n" +
			"on a real machine, run it with a kubeconfig for a node identity (system:node:NAME), or join with\n" +
			"--server, --token and --ca-cert-hash (from `tranche token create --print-join-command`).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.NodeName == "" && join.token != "" {
				// kubelet's default node name: the host name, lower-cased.
				host, err := os.Hostname()
				if err != nil {
					return fmt.Errorf("--node-name: %w", err)
				}
				cfg.NodeName = strings.ToLower(host)
			}
			if cfg.NodeName == "" || (kubeconfig == "") == (join.token == "") || clusterFile == "" || cfg.RootDir == "" {
				return fmt.Errorf("--node-name, --cluster-file, --root-dir and either --kubeconfig or --server with --token are required")
			}
			if !slices.Contains(overlay.Backends(), cfg.Backend) {
				return fmt.Errorf("--backend %q: want one of %s", cfg.Backend, strings.Join(overlay.Backends(), ", "))
			}
			if err := cfg.ImageGC.Validate(); err != nil {
				return err
			}
			log, err := logging.New(logLevel, os.Stderr)
			if err != nil {
				return err
			}
			cfg.Logger = log.With("node", cfg.NodeName)
			if join.token != "" {
				path, rotation, err := join.join(cmd.Context(), cfg.NodeName, cfg.RootDir, cfg.Logger)
				if err != nil {
					return err
				}
				defer rotation.Stop()
				kubeconfig = path
			}
			rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
			}
			logging.QuietWarnings(rc, cfg.Logger)
			rc.QPS, rc.Burst = 50, 100
			client, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return err
			}
			for _, s := range strings.Split(dns, ",") {
				if _, err := netip.ParseAddr(s); err != nil {
					return fmt.Errorf("--cluster-dns %q: %w", s, err)
				}
				cfg.ClusterDNS = append(cfg.ClusterDNS, s)
			}
			p, err := netip.ParsePrefix(serviceCIDR)
			if err != nil || !p.Addr().Is4() {
				return fmt.Errorf("--service-cluster-ip-range %q: want an IPv4 CIDR (e.g. 10.96.0.0/12)", serviceCIDR)
			}
			cfg.ServiceCIDR = p.Masked()
			q, err := resource.ParseQuantity(logMaxSize)
			if err != nil {
				return fmt.Errorf("--container-log-max-size %q: %w", logMaxSize, err)
			}
			cfg.Logs.MaxSize = q.Value()
			if cfg.ProxyMode, err = proxy.ParseMode(field.NewPath("--proxy-mode"), cfg.ProxyMode); err != nil {
				return err
			}
			if cfg.IPVSScheduler, err = proxy.ParseIPVSScheduler(field.NewPath("--ipvs-scheduler"), cfg.IPVSScheduler); err != nil {
				return err
			}
			if cfg.SelfExe, err = os.Executable(); err != nil {
				return err
			}
			if cfg.ClientCA = rc.TLSClientConfig.CAData; len(cfg.ClientCA) == 0 && rc.TLSClientConfig.CAFile != "" {
				if cfg.ClientCA, err = os.ReadFile(rc.TLSClientConfig.CAFile); err != nil {
					return fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
				}
			}
			if cfg.Registries, err = registries.Load(registriesFile); err != nil {
				return fmt.Errorf("--registries: %w", err)
			}
			if networkKubeconfig != "" {
				nc, err := clientcmd.BuildConfigFromFlags("", networkKubeconfig)
				if err != nil {
					return fmt.Errorf("--network-kubeconfig %s: %w", networkKubeconfig, err)
				}
				logging.QuietWarnings(nc, cfg.Logger)
				if cfg.NetworkClient, err = kubernetes.NewForConfig(nc); err != nil {
					return err
				}
			}
			cfg.ClusterFile = clusterFile
			cfg.Client = client
			cfg.Lookup = apilookup.New(client)
			cfg.Ready = memtune.ReleaseWhenReady(cmd.Context(), cfg.Logger)
			return agent.RunNode(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the node's identity")
	join.register(f)
	f.StringVar(&cfg.NodeName, "node-name", "", "name of this node (joining with --token: the host name by default)")
	f.StringVar(&clusterFile, "cluster-file", "", "the cluster's network layout (DATA/cluster.json)")
	f.StringVar(&cfg.RootDir, "root-dir", "", "directory for this node's pods (DATA/nodes/NAME)")
	f.StringVar(&cfg.PVRoot, "pv-root", "", "directory of local PersistentVolumes (default: DATA/pv, two levels above --root-dir)")
	f.StringVar(&cfg.ImageDir, "image-dir", "", "the host's image store, shared by its nodes (default: DATA/images, two levels above --root-dir)")
	f.StringVar(&cfg.Zone, "zone", "", "zone of this node (label topology.kubernetes.io/zone)")
	f.StringVar(&dns, "cluster-dns", "10.96.0.10", "DNS Service address(es) written into pods' resolv.conf, comma-separated")
	f.StringVar(&cfg.ClusterDomain, "cluster-domain", "cluster.local", "cluster domain")
	f.StringVar(&serviceCIDR, "service-cluster-ip-range", "10.96.0.0/12", "ClusterIP range the node's service proxy serves (the API server's)")
	f.StringVar(&cfg.ProxyMode, "proxy-mode", proxy.ModeNFTables, "which proxy mode the node's service proxy uses: "+strings.Join(proxy.Modes(), ", ")+
		" (kube-proxy's --proxy-mode); at start it removes the rules of the other modes")
	f.StringVar(&cfg.IPVSScheduler, "ipvs-scheduler", proxy.DefaultIPVSScheduler, "IPVS scheduler of --proxy-mode ipvs (kube-proxy's --ipvs-scheduler)")
	f.StringVar(&logLevel, "log-level", "info", logging.Levels)
	f.StringVar(&registriesFile, "registries", "", "registries configuration (k3s's registries.yaml shape: mirrors, endpoints, TLS, auth; see README)")
	f.StringVar(&logMaxSize, "container-log-max-size", "10Mi", "size at which a container's log file is rotated (kubelet's containerLogMaxSize)")
	f.IntVar(&cfg.Logs.MaxFiles, "container-log-max-files", 5, "log files kept per container instance, the current one included (kubelet's containerLogMaxFiles)")
	f.Int64Var(&cfg.PodMaxPids, "pod-max-pids", 4096, "pids.max of each pod's cgroup (kubelet's --pod-max-pids); -1 for none. "+
		"kubelet's default is none, which lets one pod's fork bomb exhaust the machine")
	f.StringVar(&cfg.Backend, "backend", overlay.BackendVXLAN, "how this node routes the other nodes' pod subnets: "+strings.Join(overlay.Backends(), ", ")+
		" (vxlan: flannel's VXLAN overlay, UDP 8472; host-gw: routes via the other nodes' addresses, which must share this node's link; none: `tranche up` routes them)")
	f.StringVar(&networkKubeconfig, "network-kubeconfig", "", "kubeconfig of the pod network's identity (user system:tranche:node-network), which reads every Node "+
		"as flannel's service account does; a node identity may read only its own Node (default: --kubeconfig)")
	registerImageGC(f, &cfg.ImageGC, &cfg.ImageGCPeriod)
	cmd.PreRun = func(*cobra.Command, []string) {
		data := filepath.Dir(filepath.Dir(filepath.Clean(cfg.RootDir)))
		if cfg.PVRoot == "" && cfg.RootDir != "" {
			cfg.PVRoot = filepath.Join(data, "pv")
		}
		if cfg.ImageDir == "" && cfg.RootDir != "" {
			cfg.ImageDir = filepath.Join(data, "images")
		}
	}
	return cmd
}
