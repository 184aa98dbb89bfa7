package main

import (
	"github.com/spf13/cobra"

	"github.com/tranche/tranche/internal/cluster"
	"github.com/tranche/tranche/internal/logging"
)

// nodeCmd is `tranche node add|remove`, which change the nodes of a running local cluster.
func nodeCmd() *cobra.Command {
	var cfg cluster.Config
	var names clusterNameFlags
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Add or remove a node of the running local cluster",
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return names.apply(cmd, &cfg)
		},
	}
	names.register(cmd.PersistentFlags(), "directory of the cluster's data")
	var zone, logLevel string
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a node (network namespace, credentials, agent) and wait until it is Ready",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Out = cmd.OutOrStdout()
			if _, err := logging.ParseLevel(logLevel); err != nil {
				return err
			}
			if cmd.Flags().Changed("log-level") {
				cfg.AgentLogLevel = logLevel
			}
			return cluster.AddNode(cmd.Context(), cfg, args[0], zone)
		},
	}
	add.Flags().StringVar(&zone, "zone", "", "the node's zone (label topology.kubernetes.io/zone)")
	add.Flags().StringVar(&logLevel, "log-level", "info", "the agent's log level: "+logging.Levels)
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
