package etcd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// dialTimeout bounds the first connection to etcd.
const dialTimeout = 5 * time.Second

// Dial connects to the etcd members at endpoints (URLs such as http://127.0.0.1:2379 or
// unix:///path/etcd.sock), logging the client's warnings and errors to logger (nil:
// discarded). It fails when no member answers within a few seconds; ctx bounds only that
// first contact, not the client's life.
func Dial(ctx context.Context, endpoints []string, logger *slog.Logger) (*clientv3.Client, error) {
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: dialTimeout,
		Logger:      ZapLogger(logger),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd %v: %w", endpoints, err)
	}
	sctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if _, err := client.Get(sctx, "/", clientv3.WithCountOnly()); err != nil {
		client.Close()
		return nil, fmt.Errorf("connect to etcd %v: %w", endpoints, err)
	}
	return client, nil
}

// ZapLogger returns a zap logger for etcd's server and client that forwards warnings and
// errors to logger and drops everything below, so etcd's chatty info logs never reach
// stdout. The caller names the component (logger.With("component", "etcd")). A nil logger
// discards everything.
func ZapLogger(logger *slog.Logger) *zap.Logger {
	if logger == nil {
		return zap.NewNop()
	}
	return zap.New(&slogCore{logger: logger})
}

// slogCore is a zapcore.Core writing to a slog.Logger at warn level and above.
type slogCore struct {
	logger *slog.Logger
	attrs  []any
}

// Enabled implements zapcore.LevelEnabler.
func (c *slogCore) Enabled(level zapcore.Level) bool { return level >= zapcore.WarnLevel }

// With implements zapcore.Core.
func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	attrs := append(append([]any(nil), c.attrs...), fieldAttrs(fields)...)
	return &slogCore{logger: c.logger, attrs: attrs}
}

// Check implements zapcore.Core.
func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// Write implements zapcore.Core.
func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	level := slog.LevelWarn
	if e.Level >= zapcore.ErrorLevel {
		level = slog.LevelError
	}
	args := append(append([]any(nil), c.attrs...), fieldAttrs(fields)...)
	c.logger.Log(context.Background(), level, e.Message, args...)
	return nil
}

// Sync implements zapcore.Core; slog handlers do not buffer.
func (c *slogCore) Sync() error { return nil }

// fieldAttrs converts zap fields to slog key/value pairs through zap's own encoder, so
// every field type keeps its value.
func fieldAttrs(fields []zapcore.Field) []any {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]any, 0, 2*len(enc.Fields))
	for _, f := range fields {
		if v, ok := enc.Fields[f.Key]; ok {
			attrs = append(attrs, f.Key, v)
		}
	}
	return attrs
}
