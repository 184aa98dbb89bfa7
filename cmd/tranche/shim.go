package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/agent/shim"
	"github.com/tranche/tranche/internal/logging"
)

// shimCmd is the per-node process that runs a node's containers for its agent (see
// internal/agent/shim); the agent starts it, users never do.
func shimCmd() *cobra.Command {
	var dir, runcRoot, logLevel string
	cmd := &cobra.Command{
		Use:    "shim",
		Short:  "Run a node's containers for its agent, outliving it (started by tranche agent)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" || runcRoot == "" {
				return fmt.Errorf("--dir and --runc-root are required")
			}
			bin, err := runc.Find()
			if err != nil {
				return err
			}
			log, err := logging.New(logLevel, os.Stderr)
			if err != nil {
				return err
			}
			log = log.With("component", "shim")
			l, err := shim.Listen(dir)
			if err != nil {
				return err
			}
			srv := &shim.Server{Runc: &runc.Runtime{Binary: bin, Root: runcRoot, Logger: log}, Logger: log}
			return srv.Serve(cmd.Context(), l)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "the shim's directory (its socket)")
	f.StringVar(&runcRoot, "runc-root", "", "runc's state directory, the agent's")
	f.StringVar(&logLevel, "log-level", "info", logging.Levels)
	return cmd
}
