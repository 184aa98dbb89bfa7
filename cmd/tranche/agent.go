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
	"k8s.io/client-go/util/certificate"

	"github.com/tranche/tranche/internal/agent"
	"github.com/tranche/tranche/internal/agent/bootstrap"
	"github.com/tranche/tranche/internal/apilookup"
	"github.com/tranche/tranche/internal/logging"
	"github.com/tranche/tranche/internal/memtune"
	"github.com/tranche/tranche/internal/netns"
	"github.com/tranche/tranche/internal/nodeconfig"
	"github.com/tranche/tranche/internal/overlay"
	"github.com/tranche/tranche/internal/proxy"
	"github.com/tranche/tranche/internal/registries"
)

func agentCmd() *cobra.Command {
	var cfg agent.NodeConfig
	var kubeconfig, networkKubeconfig, clusterFile, logLevel, dns, serviceCIDR, logMaxSize, registriesFile, nodeIP string
	var join joinFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node: register it, run its pods as OCI containers (runc), keep its status",
		Long: "Run a node agent in the network namespace that is the node. `tranche up` starts one per node;\n" +
			"on a real machine, run it with a kubeconfig for a node identity (system:node:NAME), or join with\n" +
			"--server, --token and --ca-cert-hash (from `tranche token create --print-join-command`). Without\n" +
			"--cluster-file, the network namespace the agent runs in is the node (its pod bridge, routes, nftables\n" +
			"rules), its pod subnet comes from the Node's spec.podCIDR and the cluster's settings from\n" +
			"kube-system/kubelet-config and kube-proxy; the host's root namespace only with " + agent.TakeHostNetworkFlag + ".",
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
			if cfg.NodeName == "" || (kubeconfig == "") == (join.token == "") || (clusterFile == "" && join.token == "") || cfg.RootDir == "" {
				return fmt.Errorf("--node-name, --cluster-file, --root-dir and --kubeconfig, or --server with --token, are required")
			}
			if clusterFile == "" && !cfg.TakeHostNetwork && netns.IsRootNamespace() {
				// Said before joining, so a refused machine leaves nothing behind.
				return fmt.Errorf("%w: the agent makes the network namespace it runs in its node (pod bridge, veths, routes, nftables rules); "+
					"pass %s on a machine that is to be the node, or run the agent in a network namespace of its own", netns.ErrRootNamespace, agent.TakeHostNetworkFlag)
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
			// The rotating certificates of a joined node: its own and its pod network's.
			var nodeCerts, networkCerts certificate.Manager
			if join.token != "" {
				path, rotation, err := join.join(cmd.Context(), cfg.NodeName, cfg.RootDir, cfg.Logger)
				if err != nil {
					return err
				}
				defer rotation.Stop()
				kubeconfig, nodeCerts = path, rotation
				if networkKubeconfig == "" && cfg.Backend != overlay.BackendNone {
					path, rotation, err := bootstrap.NetworkIdentity(cmd.Context(), bootstrap.Config{NodeName: cfg.NodeName, Dir: cfg.RootDir, Logger: cfg.Logger})
					if err != nil {
						return err
					}
					defer rotation.Stop()
					networkKubeconfig, networkCerts = path, rotation
				}
			}
			rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
			}
			if cfg.ClientCA = rc.TLSClientConfig.CAData; len(cfg.ClientCA) == 0 && rc.TLSClientConfig.CAFile != "" {
				if cfg.ClientCA, err = os.ReadFile(rc.TLSClientConfig.CAFile); err != nil {
					return fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
				}
			}
			if nodeCerts != nil {
				if err := bootstrap.FollowCertificate(cmd.Context(), rc, nodeCerts, cfg.Logger); err != nil {
					return err
				}
			}
			logging.QuietWarnings(rc, cfg.Logger)
			rc.QPS, rc.Burst = 50, 100
			client, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return err
			}
			if clusterFile == "" {
				if err := machineSettings(cmd, &cfg, client, rc.Host, nodeIP, &dns); err != nil {
					return err
				}
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
			if cfg.Registries, err = registries.Load(registriesFile); err != nil {
				return fmt.Errorf("--registries: %w", err)
			}
			if networkKubeconfig != "" {
				nc, err := clientcmd.BuildConfigFromFlags("", networkKubeconfig)
				if err != nil {
					return fmt.Errorf("--network-kubeconfig %s: %w", networkKubeconfig, err)
				}
				logging.QuietWarnings(nc, cfg.Logger)
				if networkCerts != nil {
					if err := bootstrap.FollowCertificate(cmd.Context(), nc, networkCerts, cfg.Logger); err != nil {
						return err
					}
				}
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
	f.StringVar(&cfg.RootDir, "root-dir", "", "directory for this node's pods (DATA/nodes/NAME; joining with --token: "+defaultMachineRootDir+", as kubelet's /var/lib/kubelet)")
	f.StringVar(&nodeIP, "node-ip", "", "the node's address (without --cluster-file; default: this machine's address on the route to the API server, as kubelet)")
	f.BoolVar(&cfg.TakeHostNetwork, strings.TrimPrefix(agent.TakeHostNetworkFlag, "--"), false, "let the agent make the host's root network namespace its node (a real machine): "+
		"pod bridge, veths, routes and nftables rules as kubelet, kube-proxy and flannel add them; without it the agent refuses to run there")
	f.StringVar(&cfg.PVRoot, "pv-root", "", "directory of local PersistentVolumes (default: DATA/pv, two levels above --root-dir; without --cluster-file: --root-dir/pv)")
	f.StringVar(&cfg.ImageDir, "image-dir", "", "the host's image store, shared by its nodes (default: DATA/images, two levels above --root-dir; without --cluster-file: --root-dir/images)")
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
		"as flannel's service account does; a node identity may read only its own Node (default: --kubeconfig; joining with --token: "+
		"a certificate the agent requests through a CertificateSigningRequest, below --root-dir)")
	registerImageGC(f, &cfg.ImageGC, &cfg.ImageGCPeriod)
	cmd.PreRun = func(*cobra.Command, []string) {
		if cfg.RootDir == "" && join.token != "" {
			cfg.RootDir = defaultMachineRootDir
		}
		data := filepath.Dir(filepath.Dir(filepath.Clean(cfg.RootDir)))
		if clusterFile == "" {
			// A machine of its own keeps everything below its root directory.
			data = cfg.RootDir
		}
		if cfg.PVRoot == "" && cfg.RootDir != "" {
			cfg.PVRoot = filepath.Join(data, "pv")
		}
		if cfg.ImageDir == "" && cfg.RootDir != "" {
			cfg.ImageDir = filepath.Join(data, "images")
		}
	}
	return cmd
}

// defaultMachineRootDir is a joined agent's --root-dir, as kubelet's /var/lib/kubelet.
const defaultMachineRootDir = "/var/lib/tranche/agent"

// machineSettings fills what --cluster-file carries for `tranche up`'s agents from the
// server, for an agent that is a machine of its own: the cluster CIDR, DNS and domain
// (internal/nodeconfig; --cluster-dns and --cluster-domain given on the command line
// win) and the node's address (--node-ip, else the address on the route to server).
func machineSettings(cmd *cobra.Command, cfg *agent.NodeConfig, client kubernetes.Interface, server, nodeIP string, dns *string) error {
	s, err := nodeconfig.Read(cmd.Context(), client)
	if err != nil {
		return err
	}
	cfg.ClusterCIDR = s.ClusterCIDR
	if !cmd.Flags().Changed("cluster-dns") && len(s.ClusterDNS) > 0 {
		*dns = strings.Join(s.ClusterDNS, ",")
	}
	if !cmd.Flags().Changed("cluster-domain") && s.ClusterDomain != "" {
		cfg.ClusterDomain = s.ClusterDomain
	}
	if nodeIP != "" {
		if cfg.NodeIP, err = netip.ParseAddr(nodeIP); err != nil || !cfg.NodeIP.Is4() {
			return fmt.Errorf("--node-ip %q: want an IPv4 address", nodeIP)
		}
		return nil
	}
	cfg.NodeIP, err = agent.NodeIPFor(server)
	return err
}
