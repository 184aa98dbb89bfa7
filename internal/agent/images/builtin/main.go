package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// Main runs the tranche binary as the program it was started as (argv[0]), when the
// images built by internal/imagebuild start it under another name: /agnhost (a link
// to /tranche in the agnhost image) runs the built-in agnhost CLI, `agnhost
// SUBCOMMAND ARGS...`, and /pause the pause server. handled is false for any other
// name, which is tranche's own CLI. code is the process's exit status.
func Main(ctx context.Context, argv []string, stdout, stderr io.Writer) (code int, handled bool) {
	if len(argv) == 0 {
		return 0, false
	}
	args := argv[1:]
	switch filepath.Base(argv[0]) {
	case "agnhost":
		if len(args) == 0 || !Has(args[0]) {
			what := "no subcommand given"
			if len(args) > 0 {
				what = fmt.Sprintf("unknown subcommand %q", args[0])
			}
			fmt.Fprintf(stderr, "agnhost: %s; this agnhost (tranche's built-in servers) knows: %s\n",
				what, strings.Join(Names(), ", "))
			return 2, true
		}
		return exitStatus(Run(ctx, args[0], args[1:], stdout, stderr), "agnhost "+args[0], stderr), true
	case "pause":
		// The pause image takes no arguments, as upstream's ignores them.
		return exitStatus(Run(ctx, "pause", nil, stdout, stderr), "pause", stderr), true
	}
	return 0, false
}

// exitStatus turns a built-in server's result into an exit status: the code a server
// asked for (netexec's /exit), 1 with the error printed for a failure, 0 otherwise.
func exitStatus(err error, what string, stderr io.Writer) int {
	var ee *ExitError
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
