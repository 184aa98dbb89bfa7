package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tranche/tranche/internal/agent/images/builtin"
)

// runAs runs the tranche binary as the program it was started as, when the images
// built by internal/imagebuild start it under another name: /agnhost (a link to
// /tranche in the agnhost image) runs the built-in agnhost CLI, `agnhost SUBCOMMAND
// ARGS...`, and /pause the pause server. handled is false for any other name, which
// is tranche's own CLI. code is the process's exit status.
func runAs(ctx context.Context, name string, args []string, stdout, stderr io.Writer) (code int, handled bool) {
	switch name {
	case "agnhost":
		if len(args) == 0 || !builtin.Has(args[0]) {
			what := "no subcommand given"
			if len(args) > 0 {
				what = fmt.Sprintf("unknown subcommand %q", args[0])
			}
			fmt.Fprintf(stderr, "agnhost: %s; this agnhost (tranche's built-in servers) knows: %s\n",
				what, strings.Join(builtin.Names(), ", "))
			return 2, true
		}
		return exitCode(builtin.Run(ctx, args[0], args[1:], stdout, stderr), "agnhost "+args[0], stderr), true
	case "pause":
		// The pause image takes no arguments, as upstream's ignores them.
		return exitCode(builtin.Run(ctx, "pause", nil, stdout, stderr), "pause", stderr), true
	}
	return 0, false
}

// exitCode turns a built-in server's result into an exit status: the code a server
// asked for (netexec's /exit), 1 with the error printed for a failure, 0 otherwise.
func exitCode(err error, what string, stderr io.Writer) int {
	var ee *builtin.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	default:
		fmt.Fprintf(stderr, "%s: %v\n", what, err)
		return 1
	}
}
