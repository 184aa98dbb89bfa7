// Command tranche is a Kubernetes-compatible cluster in one binary. This file only
// parses flags into config structs and calls each component's Run.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tranche/tranche/internal/agent/images/builtin"
	"github.com/tranche/tranche/internal/memtune"
)

func main() {
	if err := memtune.Tune(); err != nil {
		fmt.Fprintln(os.Stderr, "tranche: warning:", err)
	}
	// In the agnhost and pause images this binary is started as /agnhost or /pause.
	// That program handles signals itself: none are caught before it runs.
	if code, ok := builtin.Main(context.Background(), os.Args, os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{
		Use:           "tranche",
		Short:         "A Kubernetes-compatible cluster in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(versionCmd(), serverCmd(), upCmd(), downCmd(), lsCmd(), nodeCmd(), agentCmd(), shimCmd(), builtinCmd(), dnsCmd(), ingressCmd(), explainCmd(), imageCmd(), tokenCmd())
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "tranche:", err)
		os.Exit(1)
	}
}
