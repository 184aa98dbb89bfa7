package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tranche/tranche/internal/agent/images/builtin"
)

// builtinCmd runs one of tranche's own test servers (pause, echo) outside an image.
// The agnhost image's subcommands, Kubernetes' own, run when this binary is started as
// agnhost (builtin.Main).
func builtinCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "builtin NAME [ARGS...]",
		Short:              "Run a built-in test server (" + strings.Join(builtin.Names(), ", ") + ")",
		Args:               cobra.MinimumNArgs(1),
		DisableFlagParsing: true,
		Hidden:             true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !builtin.Has(args[0]) {
				return fmt.Errorf("unknown built-in %q; known: %s", args[0], strings.Join(builtin.Names(), ", "))
			}
			return builtin.Run(cmd.Context(), args[0], args[1:], os.Stdout, os.Stderr)
		},
	}
}
