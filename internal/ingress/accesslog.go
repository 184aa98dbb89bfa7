package ingress

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// LineBuffer batches whole log lines into few writes: the access log writes one line per
// request, and one write(2) to stderr per line was a syscall per request, taken under the
// handler's lock. Lines are kept whole (slog handlers write one line per Write call), none
// is dropped: a line that does not fit flushes what is buffered first, Run flushes every
// interval and once more when its context ends, and Flush can be called any time.
type LineBuffer struct {
	mu sync.Mutex
	w  *bufio.Writer
}

// NewLineBuffer returns a LineBuffer of size bytes over w.
func NewLineBuffer(w io.Writer, size int) *LineBuffer {
	return &LineBuffer{w: bufio.NewWriterSize(w, size)}
}

// Write buffers p, writing out what was buffered first when p does not fit.
func (b *LineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w.Available() < len(p) && b.w.Buffered() > 0 {
		if err := b.w.Flush(); err != nil {
			return 0, err
		}
	}
	return b.w.Write(p)
}

// Flush writes out every buffered line.
func (b *LineBuffer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.w.Flush()
}

// Run flushes every interval until ctx ends, then flushes a last time.
func (b *LineBuffer) Run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = b.Flush()
			return
		case <-tick.C:
			_ = b.Flush()
		}
	}
}

// NewAccessLogger returns the logger for access-log lines: text lines like the other
// logs of `tranche ingress`, tagged component=ingress, at level Info, written through a
// LineBuffer over w that flushes every 100 ms until ctx ends; flushed is closed when the
// last line has been written out (after ctx ends). The Proxy writes its lines through
// the logger's handler directly (see accessHandler), in the format slog's TextHandler
// gives them.
func NewAccessLogger(ctx context.Context, w io.Writer) (log *slog.Logger, flushed <-chan struct{}) {
	lb := NewLineBuffer(w, 64<<10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lb.Run(ctx, 100*time.Millisecond)
	}()
	text := slog.NewTextHandler(lb, nil).WithAttrs([]slog.Attr{slog.String("component", "ingress")})
	return slog.New(&accessHandler{Handler: text, lb: lb}), done
}

// accessHandler is the handler of NewAccessLogger's logger. Any record goes through
// slog's TextHandler; the Proxy's access lines are formatted by accessLine instead,
// which writes the same text without slog's per-record work (a caller lookup, an
// attribute slice, a generic formatter), a fifth of the proxy's CPU per request.
type accessHandler struct {
	slog.Handler
	lb    *LineBuffer
	bufs  sync.Pool // *[]byte
	stamp timestamps
}

// writeAccess writes the access line of x, answered at now.
func (h *accessHandler) writeAccess(now time.Time, x *exchange, elapsed time.Duration, ingress, backend string) {
	bp, _ := h.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	*bp = accessLine((*bp)[:0], &h.stamp, now, x, elapsed, ingress, backend)
	_, _ = h.lb.Write(*bp)
	h.bufs.Put(bp)
}

// accessLine appends to b the line slog's TextHandler writes for the access record of x
// (see Proxy.record), with the attribute component=ingress; ts formats now.
func accessLine(b []byte, ts *timestamps, now time.Time, x *exchange, elapsed time.Duration, ingress, backend string) []byte {
	b = append(b, "time="...)
	b = ts.append(b, now)
	b = append(b, " level=INFO msg=request component=ingress client="...)
	b = appendText(b, x.client)
	b = append(b, " method="...)
	b = appendText(b, x.method)
	b = append(b, " host="...)
	b = appendText(b, x.host)
	b = append(b, " path="...)
	b = appendText(b, x.path)
	b = append(b, " proto="...)
	b = appendText(b, x.proto)
	b = append(b, " status="...)
	b = strconv.AppendInt(b, int64(x.status), 10)
	b = append(b, " bytes="...)
	b = strconv.AppendInt(b, x.bytes, 10)
	b = append(b, " duration="...)
	b = append(b, elapsed.String()...)
	b = append(b, " ingress="...)
	b = appendText(b, ingress)
	b = append(b, " backend="...)
	b = appendText(b, backend)
	b = append(b, " endpoint="...)
	b = appendText(b, x.endpoint)
	return append(b, '\n')
}

// timestamps formats the time of access lines as slog's TextHandler does
// (2006-01-02T15:04:05.000Z07:00), keeping the formatted second of the last one:
// lines come by the thousand per second, and formatting a whole time was a sixth of
// the cost of a line.
type timestamps struct{ last atomic.Pointer[stamp] }

// stamp is one second, formatted: head up to its dot, zone after the milliseconds.
type stamp struct {
	sec        int64
	loc        *time.Location
	head, zone []byte
}

func (ts *timestamps) append(b []byte, t time.Time) []byte {
	t = t.Truncate(time.Millisecond)
	s := ts.last.Load()
	// A zone's offset changes on a whole second, so one second has one zone text.
	if s == nil || s.sec != t.Unix() || s.loc != t.Location() {
		s = &stamp{sec: t.Unix(), loc: t.Location(), head: t.AppendFormat(nil, "2006-01-02T15:04:05."), zone: t.AppendFormat(nil, "Z07:00")}
		ts.last.Store(s)
	}
	b = append(b, s.head...)
	ms := t.Nanosecond() / int(time.Millisecond)
	b = append(b, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, s.zone...)
}

// appendText appends s as slog's TextHandler writes a string value: quoted when it is
// empty or holds a space, '=', '"', a control character, or a rune that is not
// printable or not valid UTF-8.
func appendText(b []byte, s string) []byte {
	if needsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

// quoteASCII marks the ASCII bytes that make slog quote a string: controls, space,
// '=' and '"'.
var quoteASCII = func() (q [utf8.RuneSelf]bool) {
	for c := range q {
		q[c] = c <= ' ' || c == '=' || c == '"'
	}
	return q
}()

func needsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if quoteASCII[c] {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}
