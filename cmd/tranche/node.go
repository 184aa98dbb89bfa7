package main

import (
	"github.com/spf13/cobra"

	"github.com/tranche/tranche/internal/cluster"
)

// nodeCmd is `tranche node add|remove`, which change the nodes of a running local cluster.
func nodeCmd() *cobra.Command {
	var cfg cluster.Config
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Add or remove a node of the running local cluster",
	}
	cmd.PersistentFlags().StringVar(&cfg.DataDir, "data-dir", defaultDataDir(), "directory of the cluster's data")
	var zone, logLevel string
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a node (network namespace, credentials, agent) and wait until it is Ready",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Out = cmd.OutOrStdout()
			if cmd.Flags().Changed("log-level") {
				cfg.AgentLogLevel = logLevel
			}
			return cluster.AddNode(cmd.Context(), cfg, args[0], zone)
		},
	}
	add.Flags().StringVar(&zone, "zone", "", "the node's zone (label topology.kubernetes.io/zone)")
	add.Flags().StringVar(&logLevel, "log-level", "info", "the agent's log level: debug, info, warn or error")
	remove := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a node without draining it: stop its agent, delete the Node, remove its network",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Out = cmd.OutOrStdout()
			return cluster.RemoveNode(cmd.Context(), cfg, args[0])
		},
	}
	cmd.AddCommand(add, remove)
	return cmd
}
