// Command selfexe stands in for the tranche binary in the runtime's tests: it serves
// `selfexe builtin NAME ARGS...` exactly as `tranche builtin` does, and links quickly.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/tranche/tranche/internal/agent/images/builtin"
)

func main() {
	if len(os.Args) < 3 || os.Args[1] != "builtin" {
		fmt.Fprintln(os.Stderr, "usage: selfexe builtin NAME [ARGS...]")
		os.Exit(2)
	}
	if err := builtin.Run(context.Background(), os.Args[2], os.Args[3:], os.Stdout, os.Stderr); err != nil {
		if e, ok := err.(*builtin.ExitError); ok {
			os.Exit(e.Code)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
