package etcd

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestZapLoggerForwardsWarningsOnly(t *testing.T) {
	var buf bytes.Buffer
	lg := ZapLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	lg.Info("chatty", zap.String("ignored", "x"))
	lg.With(zap.String("member", "m1")).Warn("slow apply", zap.Int("took-ms", 120), zap.Error(errors.New("boom")))
	lg.Error("broken")

	want := []string{
		`level=WARN msg="slow apply" member=m1 took-ms=120 error=boom`,
		`level=ERROR msg=broken`,
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		_, rest, _ := strings.Cut(line, " ") // drop the time
		got = append(got, rest)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("slog output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	ZapLogger(nil).Error("discarded")
}
