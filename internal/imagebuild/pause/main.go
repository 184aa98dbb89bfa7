// Command pause is the program of the catalog's pause image (registry.k8s.io/pause):
// it does nothing until SIGINT or SIGTERM, which end it with status 0, and reaps the
// children that are left to it when it is PID 1 of a shared PID namespace. It behaves
// as upstream's pause: `-v` prints the version, and a warning goes to stderr when it is
// not PID 1.
//
// It is its own small program, not the tranche binary started as /pause, because
// starting the tranche binary costs ~75 ms of CPU (its package initialisation and the
// page faults of 115 MB) against ~1 ms for this one, and a pod start-up benchmark
// starts hundreds of pause containers. `make build` compiles it into
// internal/imagebuild/prebuilt, where the tranche binary embeds it.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is the pause version this program stands for, the tag of the image.
const version = "3.10"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Printf("pause.go version: %s\n", version)
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", sig)
		os.Exit(0)
	}
}

// reap collects every child that has exited, without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
