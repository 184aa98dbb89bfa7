// Package logging builds the structured logger of every tranche process (up, server,
// agent, shim, dns, ingress) and routes into it what the libraries they use log on
// their own: klog (client-go's reflectors, leader election, work queues) and the
// warnings API servers attach to responses, which client-go would otherwise print
// as "Warning: ..." lines on the terminal.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// Levels names the values of --log-level, for flag help and errors.
const Levels = "debug, info, warn or error"

// ParseLevel reads a --log-level value: debug, info, warn (or warning) or error, in
// any case.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level %q: want %s", s, Levels)
}

// New returns a text logger writing records of level and above to w, and routes klog
// into it, so that the libraries' messages share its format and its level. klog is
// process-wide: call New once per process, with the process's own logger.
func New(level string, w io.Writer) (*slog.Logger, error) {
	l, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
	klog.SetSlogLogger(log)
	return log, nil
}

// Open is New writing to the file at path, appended to and created (with its
// directory) when missing, or to stderr when path is "-". The returned func closes the
// file.
func Open(level, path string, stderr io.Writer) (*slog.Logger, func() error, error) {
	if _, err := ParseLevel(level); err != nil {
		return nil, nil, err
	}
	if path == "-" {
		log, err := New(level, stderr)
		return log, func() error { return nil }, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("log file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("log file: %w", err)
	}
	log, err := New(level, f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return log, f.Close, nil
}

// QuietWarnings makes a client configuration log the warnings the API server sends
// (a deprecated API version, mostly: the cluster's own clients still watch v1
// Endpoints, as kube-controller-manager does) at debug level on log instead of
// client-go's default, which prints every one of them; a nil log drops them. It
// returns rc.
func QuietWarnings(rc *rest.Config, log *slog.Logger) *rest.Config {
	rc.WarningHandler = nil
	rc.WarningHandlerWithContext = warningLogger{log: log}
	return rc
}

// warningLogger is a client-go warning handler logging at debug level.
type warningLogger struct{ log *slog.Logger }

var _ rest.WarningHandlerWithContext = warningLogger{}

// HandleWarningHeaderWithContext logs a "299" warning (the only code Kubernetes sends;
// others are not meant for clients, as client-go's own handlers decide).
func (w warningLogger) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, text string) {
	if code != 299 || text == "" || w.log == nil {
		return
	}
	w.log.DebugContext(ctx, "API server warning", "warning", text, "agent", agent)
}
