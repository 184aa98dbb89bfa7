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

	"github.com/tranche/tranche/internal/cluster"
)

func upCmd() *cobra.Command {
	var cfg cluster.Config
	var zones, logLevel string
	var detach bool
	var net serviceNetFlags
	var psa podSecurityFlags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local cluster: network namespaces, the API server and one agent per node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			cfg.Server.Logger = newLogger(logLevel)
			if err := net.apply(&cfg.Server); err != nil {
				return err
			}
			if err := psa.apply(&cfg.Server); err != nil {
				return err
			}
			cfg.Out = cmd.OutOrStdout()
			return cluster.Up(cmd.Context(), cfg, releaseWhenReady(cmd.Context(), cfg.Server.Logger))
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Nodes, "nodes", 1, "number of nodes of a new cluster (a restarted one keeps its nodes)")
	f.StringVar(&zones, "zones", "", "zones given to the nodes round robin, comma-separated (e.g. a,b,c)")
	f.StringVar(&cfg.DataDir, "data-dir", defaultDataDir(), "directory of the cluster's data; starting again on it resumes the cluster")
	f.StringVar(&cfg.Server.Listen, "listen", "127.0.0.1:6443", "HTTPS address of the API server on the host")
	f.BoolVar(&detach, "detach", false, "return once the cluster is ready and keep it running in the background")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringSliceVar(&cfg.UpstreamDNS, "upstream-dns", nil, "resolvers IP:port the cluster DNS forwards other names to (default: the host's, from /etc/resolv.conf)")
	// Tests run clusters beside a developer's own with a unique namespace prefix.
	f.StringVar(&cfg.Prefix, "netns-prefix", "", "prefix of the cluster's network namespace names (default tr-, or the one recorded in the data dir)")
	_ = f.MarkHidden("netns-prefix")
	registerHPASyncPeriod(cmd, &cfg.Server)
	registerInFlightLimits(cmd, &cfg.Server)
	net.register(cmd)
	psa.register(cmd)
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
	// The child runs the same command line without --detach.
	args := []string{"up"}
	for _, a := range os.Args[2:] {
		if a != "--detach" && !strings.HasPrefix(a, "--detach=") {
			args = append(args, a)
		}
	}
	child := exec.Command(self, args...)
	child.Stdout, child.Stderr = logFile, logFile
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
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
	return fmt.Errorf("cluster not ready after 3 minutes; see %s", logPath)
}

func downCmd() *cobra.Command {
	var cfg cluster.Config
	var purge bool
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the local cluster and remove its namespaces, processes and mounts (with --purge, its data too)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Out = cmd.OutOrStdout()
			return cluster.Down(cmd.Context(), cfg, purge)
		},
	}
	cmd.Flags().StringVar(&cfg.DataDir, "data-dir", defaultDataDir(), "directory of the cluster's data")
	cmd.Flags().BoolVar(&purge, "purge", false, "also delete the data directory")
	return cmd
}
