package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/cluster"
	"github.com/tranche/tranche/internal/logging"
	"github.com/tranche/tranche/internal/memtune"
	"github.com/tranche/tranche/internal/proxy"
	"github.com/tranche/tranche/internal/registries"
)

func upCmd() *cobra.Command {
	var cfg cluster.Config
	var zones, logLevel, logFile, proxyMode, ipvsScheduler string
	var detach bool
	var net serviceNetFlags
	var psa podSecurityFlags
	var names clusterNameFlags
	var imageGC imageGCFlags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local cluster: network namespaces, the API server and one agent per node",
		Long: "Start a local cluster. Without --name it is the cluster \"tranche\" on the default data dir,\n" +
			"network namespaces tr-*, API server 127.0.0.1:6443 and load balancers 127.0.10.0/24. With --name NAME\n" +
			"another one starts beside it on the data dir " + cluster.DefaultDataDir("NAME") + ", with a namespace prefix,\n" +
			"API port and load-balancer pool of its own, chosen on its first start and kept by restarts; flags override them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := names.apply(cmd, &cfg); err != nil {
				return err
			}
			if err := imageGC.apply(cmd, &cfg); err != nil {
				return err
			}
			if _, err := logging.ParseLevel(logLevel); err != nil {
				return err
			}
			// Checked before --detach, so that the mistake is told at once. Unset, the
			// proxy mode and scheduler are the recorded ones (else nftables).
			var err error
			if cmd.Flags().Changed("proxy-mode") {
				if cfg.ProxyMode, err = proxy.ParseMode(field.NewPath("--proxy-mode"), proxyMode); err != nil {
					return err
				}
			}
			if cmd.Flags().Changed("ipvs-scheduler") {
				if cfg.IPVSScheduler, err = proxy.ParseIPVSScheduler(field.NewPath("--ipvs-scheduler"), ipvsScheduler); err != nil {
					return err
				}
			}
			if cfg.Registries != "" {
				if cfg.Registries, err = filepath.Abs(cfg.Registries); err != nil {
					return err
				}
				if _, err := registries.Load(cfg.Registries); err != nil {
					return fmt.Errorf("--registries: %w", err)
				}
			}
			if pid, ok := cluster.Running(cfg.DataDir); ok {
				return fmt.Errorf("a cluster is already running on %s (pid %d); stop it with `tranche down --data-dir %s`", cfg.DataDir, pid, cfg.DataDir)
			}
			if detach {
				return startDetached(cmd, cfg.DataDir, filepath.Join(cfg.DataDir, "kubeconfig"))
			}
			if !cmd.Flags().Changed("nodes") {
				// A restored cluster keeps its nodes; only an explicit --nodes is compared.
				cfg.Nodes = 0
			}
			if zones != "" {
				cfg.Zones = strings.Split(zones, ",")
			}
			if cmd.Flags().Changed("log-level") {
				cfg.AgentLogLevel = logLevel
			}
			// The terminal shows progress lines; the components' log goes to a file.
			if logFile == "" {
				logFile = filepath.Join(cfg.DataDir, "tranche.log")
			}
			log, closeLog, err := logging.Open(logLevel, logFile, os.Stderr)
			if err != nil {
				return err
			}
			defer closeLog()
			cfg.Server.Logger = log
			if err := net.apply(&cfg.Server); err != nil {
				return err
			}
			// Unset, the API address and the pool are the recorded ones or the name's.
			if !cmd.Flags().Changed("listen") {
				cfg.Server.Listen = ""
			}
			if cmd.Flags().Changed("loadbalancer-pool") {
				cfg.LoadBalancerPool = &net.lbPool
			}
			if err := psa.apply(&cfg.Server); err != nil {
				return err
			}
			cfg.Out = cmd.OutOrStdout()
			if logFile != "-" {
				fmt.Fprintf(cfg.Out, "log: %s\n", logFile)
			}
			return cluster.Up(cmd.Context(), cfg, memtune.ReleaseWhenReady(cmd.Context(), cfg.Server.Logger))
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Nodes, "nodes", 1, "number of nodes of a new cluster (a restarted one keeps its nodes)")
	f.StringVar(&zones, "zones", "", "zones given to the nodes round robin, comma-separated (e.g. a,b,c)")
	names.register(f, "directory of the cluster's data; starting again on it resumes the cluster")
	f.StringVar(&cfg.Server.Listen, "listen", cluster.DefaultListen, "HTTPS address of the API server on the host (default for another --name: a free port from 6444, recorded)")
	f.StringVar(&proxyMode, "proxy-mode", proxy.ModeNFTables, "the nodes' service proxy mode: "+strings.Join(proxy.Modes(), ", ")+
		"; a restart without it keeps the recorded one, another one switches every node (its old rules are removed)")
	f.StringVar(&cfg.Registries, "registries", "", "registries configuration given to every node's agent (k3s's registries.yaml shape: mirrors, endpoints, TLS, auth; see README)")
	f.StringVar(&ipvsScheduler, "ipvs-scheduler", proxy.DefaultIPVSScheduler, "IPVS scheduler of --proxy-mode ipvs (recorded like the mode)")
	f.BoolVar(&detach, "detach", false, "return once the cluster is ready and keep it running in the background")
	f.StringVar(&logLevel, "log-level", "info", logging.Levels)
	f.StringVar(&logFile, "log-file", "", "file the API server, controllers and etcd log to (default DATA/tranche.log; - for standard error, as the background process of --detach does)")
	f.StringSliceVar(&cfg.UpstreamDNS, "upstream-dns", nil, "resolvers IP:port the cluster DNS forwards other names to (default: the host's, from /etc/resolv.conf)")
	// Tests run clusters beside a developer's own with a unique namespace prefix.
	f.StringVar(&cfg.Prefix, "netns-prefix", "", "prefix of the cluster's network namespace names (default tr-, one chosen for another --name, or the one recorded in the data dir)")
	_ = f.MarkHidden("netns-prefix")
	registerHPASyncPeriod(cmd, &cfg.Server)
	registerNodeMonitorGracePeriod(cmd, &cfg.Server)
	registerInFlightLimits(cmd, &cfg.Server)
	f.DurationVar(&cfg.Server.CompactInterval, "compact-interval", 0, "how often etcd history is compacted (default 5m)")
	net.register(cmd)
	psa.register(cmd)
	imageGC.register(cmd)
	return cmd
}

// startDetached re-runs `tranche up` in the background and waits until it is ready.
func startDetached(cmd *cobra.Command, dataDir, kubeconfig string) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	logPath := filepath.Join(dataDir, "tranche.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	start, _ := logFile.Seek(0, 2)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// The child runs the same command line without --detach. Its standard error is
	// the log file already, where its components log unless told otherwise.
	args := []string{"up"}
	for _, a := range os.Args[2:] {
		if a != "--detach" && !strings.HasPrefix(a, "--detach=") {
			args = append(args, a)
		}
	}
	if !cmd.Flags().Changed("log-file") {
		args = append(args, "--log-file", "-")
	}
	child := exec.Command(self, args...)
	child.Stdout, child.Stderr = logFile, logFile
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if cmd.Context().Err() != nil {
			stopStarting(child.Process)
			return fmt.Errorf("interrupted before the cluster was ready; it was stopped (see %s)", logPath)
		}
		data, _ := os.ReadFile(logPath)
		if int64(len(data)) < start {
			start = 0 // the log was truncated: all of it is this run's
		}
		data = data[start:]
		if strings.Contains(string(data), "export KUBECONFIG=") {
			fmt.Fprintf(cmd.OutOrStdout(), "cluster ready (pid %d, log %s)\n\nexport KUBECONFIG=%s\n", child.Process.Pid, logPath, kubeconfig)
			return child.Process.Release()
		}
		var st syscall.WaitStatus
		if pid, _ := syscall.Wait4(child.Process.Pid, &st, syscall.WNOHANG, nil); pid == child.Process.Pid {
			return fmt.Errorf("tranche up failed; see %s:\n%s", logPath, strings.TrimSpace(string(data)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopStarting(child.Process)
	return fmt.Errorf("cluster not ready after 3 minutes; it was stopped (see %s)", logPath)
}

// stopStarting stops the background `tranche up` that never became ready as `tranche
// down` stops one (SIGTERM, on which it removes its namespaces, processes and mounts; its
// group killed after a minute), so that an interrupted or failed start leaves nothing
// running, and reaps it.
func stopStarting(child *os.Process) {
	cluster.StopGroup(child.Pid, time.Minute)
	_, _ = child.Wait()
}

func downCmd() *cobra.Command {
	var cfg cluster.Config
	var purge bool
	var names clusterNameFlags
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the local cluster and remove its namespaces, processes and mounts (with --purge, its data too)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := names.apply(cmd, &cfg); err != nil {
				return err
			}
			cfg.Out = cmd.OutOrStdout()
			return cluster.Down(cmd.Context(), cfg, purge)
		},
	}
	names.register(cmd.Flags(), "directory of the cluster's data")
	cmd.Flags().BoolVar(&purge, "purge", false, "also delete the data directory")
	return cmd
}

// lsCmd is `tranche ls`: the local clusters of this machine.
func lsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the local clusters of this machine: name, state, nodes, API server and kubeconfig",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cluster.List(cmd.OutOrStdout())
		},
	}
}

// clusterNameFlags are --name and --data-dir, which every command on a local cluster
// takes: the data dir defaults to the named cluster's.
type clusterNameFlags struct {
	name, dataDir string
}

func (n *clusterNameFlags) register(f *pflag.FlagSet, dataDirHelp string) {
	f.StringVar(&n.name, "name", cluster.DefaultName, "name of the local cluster, a DNS label; each name has its own data dir, network namespaces, API port and load-balancer pool")
	f.StringVar(&n.dataDir, "data-dir", "", dataDirHelp+" (default "+cluster.DefaultDataDir(cluster.DefaultName)+", or "+
		cluster.DefaultDataDir("NAME")+" for another --name)")
}

// apply validates --name and sets cfg.Name (only when given) and cfg.DataDir.
func (n *clusterNameFlags) apply(cmd *cobra.Command, cfg *cluster.Config) error {
	if err := cluster.ValidateName(n.name); err != nil {
		return err
	}
	if cmd.Flags().Changed("name") {
		cfg.Name = n.name
	}
	cfg.DataDir = n.dataDir
	if cfg.DataDir == "" {
		cfg.DataDir = cluster.DefaultDataDir(n.name)
	}
	return nil
}
