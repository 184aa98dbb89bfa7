package logging

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

func TestParseLevel(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want slog.Level
		err  bool
	}{
		{in: "debug", want: slog.LevelDebug},
		{in: "info", want: slog.LevelInfo},
		{in: "INFO", want: slog.LevelInfo},
		{in: "warn", want: slog.LevelWarn},
		{in: "warning", want: slog.LevelWarn},
		{in: "error", want: slog.LevelError},
		{in: "", err: true},
		{in: "verbose", err: true},
		{in: "info+2", err: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseLevel(tc.in)
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), `--log-level "`+tc.in+`": want debug, info, warn or error`) {
					t.Fatalf("ParseLevel(%q) = %v, %v; want an error naming the flag and the levels", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseLevel(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestNewRoutesKlog: klog's messages (client-go's reflector errors) land in the
// process's logger, in its format, filtered by its level.
func TestNewRoutesKlog(t *testing.T) {
	var buf bytes.Buffer
	if _, err := New("warn", &buf); err != nil {
		t.Fatal(err)
	}
	defer klog.ClearLogger()
	klog.Info("an info line from a library")
	klog.Error("an error line from a library")
	klog.Flush()
	out := buf.String()
	if strings.Contains(out, "an info line") {
		t.Errorf("klog's info passed a warn-level logger:\n%s", out)
	}
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, `msg="an error line from a library"`) {
		t.Errorf("klog's error is not in the slog output:\n%s", out)
	}
	if _, err := New("loud", &buf); err == nil {
		t.Error("New accepted level loud")
	}
}

// TestOpen: a log file is appended to, "-" is standard error.
func TestOpen(t *testing.T) {
	defer klog.ClearLogger()
	path := filepath.Join(t.TempDir(), "dir", "tranche.log")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("earlier run\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log, closeLog, err := Open("info", path, nil)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("started")
	log.Debug("hidden")
	if err := closeLog(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if got := string(data); !strings.HasPrefix(got, "earlier run\n") || !strings.Contains(got, "msg=started") || strings.Contains(got, "hidden") {
		t.Errorf("log file:\n%s", got)
	}
	var stderr bytes.Buffer
	log, _, err = Open("debug", "-", &stderr)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("to stderr")
	if !strings.Contains(stderr.String(), `msg="to stderr"`) {
		t.Errorf("stderr: %q", stderr.String())
	}
	if _, _, err := Open("loud", path, nil); err == nil {
		t.Error("Open accepted level loud")
	}
}

// TestQuietWarnings: an API server's warning is logged at debug level only, not
// printed as client-go's default "Warning: ..." line.
func TestQuietWarnings(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))
		rc := QuietWarnings(&rest.Config{WarningHandler: rest.NewWarningWriter(&buf, rest.WarningWriterOptions{})}, log)
		if rc.WarningHandler != nil || rc.WarningHandlerWithContext == nil {
			t.Fatalf("handlers: %#v, %#v", rc.WarningHandler, rc.WarningHandlerWithContext)
		}
		const msg = "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"
		rc.WarningHandlerWithContext.HandleWarningHeaderWithContext(context.Background(), 299, "-", msg)
		rc.WarningHandlerWithContext.HandleWarningHeaderWithContext(context.Background(), 199, "-", "not for clients")
		out := buf.String()
		if strings.Contains(out, "Warning:") || strings.Contains(out, "not for clients") {
			t.Errorf("level %v: %q", level, out)
		}
		if got := strings.Contains(out, "level=DEBUG") && strings.Contains(out, msg); got != (level == slog.LevelDebug) {
			t.Errorf("level %v: debug record present %v:\n%s", level, got, out)
		}
	}
}
