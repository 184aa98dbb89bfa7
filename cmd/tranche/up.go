package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tranche/tranche/internal/server"
)

const pidFile = "tranche.pid"

func upCmd() *cobra.Command {
	var dataDir, listen, logLevel string
	var detach bool
	var net serviceNetFlags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local cluster (for now: the API server and control plane)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if pid, ok := runningPID(dataDir); ok {
				return fmt.Errorf("a cluster is already running on %s (pid %d); stop it with `tranche down --data-dir %s`", dataDir, pid, dataDir)
			}
			kubeconfig := filepath.Join(dataDir, "kubeconfig")
			if detach {
				return startDetached(cmd, dataDir, kubeconfig)
			}
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dataDir, pidFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
				return err
			}
			defer os.Remove(filepath.Join(dataDir, pidFile))
			cfg := server.Config{DataDir: dataDir, Listen: listen, Logger: newLogger(logLevel)}
			if err := net.apply(&cfg); err != nil {
				return err
			}
			ready := make(chan struct{})
			errc := make(chan error, 1)
			fmt.Fprintf(out, "starting the API server on %s (data in %s)\n", listen, dataDir)
			go func() {
				errc <- server.Run(cmd.Context(), cfg, ready)
			}()
			select {
			case <-ready:
				fmt.Fprintf(out, "cluster ready\n\nexport KUBECONFIG=%s\n\n", kubeconfig)
			case err := <-errc:
				return err
			}
			return <-errc
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", defaultDataDir(), "directory of the cluster's data; starting again on it resumes the cluster")
	f.StringVar(&listen, "listen", "127.0.0.1:6443", "HTTPS address of the API server")
	f.BoolVar(&detach, "detach", false, "return once the cluster is ready and keep it running in the background")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	net.register(cmd)
	return cmd
}

// startDetached re-runs `tranche up` in the background and waits until it is ready.
func startDetached(cmd *cobra.Command, dataDir, kubeconfig string) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	logPath := filepath.Join(dataDir, "tranche.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// The child runs the same command line without --detach.
	args := []string{"up"}
	for _, a := range os.Args[2:] {
		if a != "--detach" && !strings.HasPrefix(a, "--detach=") {
			args = append(args, a)
		}
	}
	child := exec.Command(self, args...)
	child.Stdout, child.Stderr = logFile, logFile
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(logPath)
		if strings.Contains(string(data), "export KUBECONFIG=") {
			fmt.Fprintf(cmd.OutOrStdout(), "cluster ready (pid %d, log %s)\n\nexport KUBECONFIG=%s\n", child.Process.Pid, logPath, kubeconfig)
			return child.Process.Release()
		}
		if err := child.Process.Signal(syscall.Signal(0)); err != nil {
			return fmt.Errorf("tranche up failed; see %s", logPath)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("cluster not ready after 2 minutes; see %s", logPath)
}

// runningPID returns the pid of the cluster running on dataDir, if any.
func runningPID(dataDir string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(dataDir, pidFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return 0, false
	}
	return pid, true
}

func downCmd() *cobra.Command {
	var dataDir string
	var purge bool
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the local cluster (and with --purge delete its data)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if pid, ok := runningPID(dataDir); ok {
				if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
					return fmt.Errorf("stopping pid %d: %w", pid, err)
				}
				deadline := time.Now().Add(30 * time.Second)
				for syscall.Kill(pid, 0) == nil {
					if time.Now().After(deadline) {
						_ = syscall.Kill(pid, syscall.SIGKILL)
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				fmt.Fprintf(out, "stopped the cluster (pid %d)\n", pid)
			} else {
				fmt.Fprintln(out, "no cluster running on", dataDir)
			}
			if purge {
				if _, err := os.Stat(dataDir); errors.Is(err, os.ErrNotExist) {
					return nil
				}
				if err := os.RemoveAll(dataDir); err != nil {
					return err
				}
				fmt.Fprintln(out, "deleted", dataDir)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir(), "directory of the cluster's data")
	cmd.Flags().BoolVar(&purge, "purge", false, "also delete the data directory")
	return cmd
}
