// Command selfexe stands in for the tranche binary in the runtime's tests: it serves
// `selfexe builtin NAME ARGS...` exactly as `tranche builtin` does, and, called as
// /agnhost or /pause in the catalog's images, what the tranche binary does then. It
// links quickly.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tranche/tranche/internal/agent/images/builtin"
)

func main() {
	// As the tranche binary: the programs of the images handle signals themselves.
	if code, ok := builtin.Main(context.Background(), os.Args, os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
	// PID 1 of a container: without handlers, SIGTERM would be ignored.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 3 || os.Args[1] != "builtin" {
		fmt.Fprintln(os.Stderr, "usage: selfexe builtin NAME [ARGS...]")
		os.Exit(2)
	}
	if err := builtin.Run(ctx, os.Args[2], os.Args[3:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
