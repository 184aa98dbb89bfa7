package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tranche/tranche/internal/apiserver"
)

// Version is the tranche release, set with -ldflags "-X main.Version=...".
var Version = "dev"

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the tranche version and the Kubernetes API level it serves",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "tranche %s (Kubernetes API %s)\n", Version, apiserver.KubernetesVersion.GitVersion)
			return nil
		},
	}
}
