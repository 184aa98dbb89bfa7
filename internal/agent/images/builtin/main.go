package builtin

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

// Main runs the tranche binary as the program it was started as (argv[0]), when the
// images built by internal/imagebuild start it under another name: /agnhost (a link to
// /tranche in the agnhost image) runs the agnhost CLI, `agnhost SUBCOMMAND ARGS...`
// (agnhost.go: upstream's subcommands and tranche's echo), /usr/bin/nc OpenBSD's netcat
// client (nc.go), /usr/bin/dig and /usr/bin/getent the DNS tools the e2e DNS specs run
// (dnstools.go), /usr/bin/wget busybox's wget with the -T that Debian's busybox lacks
// (wget.go), and /pause the pause server.
// handled is false for any other name, which is tranche's own CLI. code is the
// process's exit status.
//
// Tranche's own servers stop when ctx is cancelled or the process gets SIGINT or
// SIGTERM. Upstream's agnhost subcommands are programs, not functions: they may exit
// the process and they handle signals themselves, so call Main before installing
// signal handlers: until a subcommand installs its own, a SIGTERM must do what it does
// to upstream's image (end the process, or nothing to a container's PID 1), not cancel
// a context nobody watches. Handlers installed before are reset (agnhostMain), which
// leaves only a signal that arrives before that reset swallowed.
func Main(ctx context.Context, argv []string, stdout, stderr io.Writer) (code int, handled bool) {
	if len(argv) == 0 {
		return 0, false
	}
	switch filepath.Base(argv[0]) {
	case "agnhost", "agnhost-2":
		return agnhostMain(ctx, argv[1:], stdout, stderr), true
	case "wget":
		return wgetMain(ctx, argv[1:], stdout, stderr), true
	case "nc":
		return ncMain(ctx, argv[1:], os.Stdin, stdout, stderr), true
	case "dig":
		return digMain(ctx, argv[1:], ResolvConf, stdout, stderr), true
	case "getent":
		return getentMain(ctx, argv[1:], stdout, stderr), true
	case "sample-apiserver": // the e2e sample-apiserver image's program (sampleapiserver.go)
		return sampleAPIServerMain(ctx, argv[1:], stdout, stderr), true
	case "nnp": // the nonewprivs image's program
		return agnhostMain(ctx, []string{"nonewprivs"}, stdout, stderr), true
	case "pause":
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		// The pause image takes no arguments, as upstream's ignores them.
		return exitStatus(Run(ctx, "pause", nil, stdout, stderr), "pause", stderr), true
	}
	return 0, false
}

// exitStatus turns a built-in server's result into an exit status: 1 with the error
// printed for a failure, 0 otherwise.
func exitStatus(err error, what string, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", what, err)
	return 1
}
