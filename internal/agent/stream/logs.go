package stream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
)

// logOptions are the query parameters of a log request (PodLogOptions).
type logOptions struct {
	follow, previous, timestamps bool
	// tailLines < 0 means all lines; limitBytes <= 0 means no limit.
	tailLines  int64
	limitBytes int64
	since      time.Time
}

func parseLogOptions(q url.Values, now time.Time) (logOptions, error) {
	o := logOptions{follow: isTrue(q.Get("follow")), previous: isTrue(q.Get("previous")), timestamps: isTrue(q.Get("timestamps")), tailLines: -1}
	if v := q.Get("tailLines"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return o, fmt.Errorf("tailLines %q: must be a non-negative integer", v)
		}
		o.tailLines = n
	}
	if v := q.Get("limitBytes"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return o, fmt.Errorf("limitBytes %q: must be a positive integer", v)
		}
		o.limitBytes = n
	}
	if v := q.Get("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return o, fmt.Errorf("sinceSeconds %q: must be a positive integer", v)
		}
		o.since = now.Add(-time.Duration(n) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return o, fmt.Errorf("sinceTime %q: must be an RFC 3339 time", v)
		}
		if o.since.IsZero() || t.After(o.since) {
			o.since = t
		}
	}
	return o, nil
}

// entry is one line of a CRI log file: "<RFC3339Nano time> <stream> <F|P> <content>".
type entry struct {
	t       time.Time
	partial bool
	content []byte
}

func parseEntry(line []byte) (entry, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	ts, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return entry{}, fmt.Errorf("log line without a timestamp: %q", line)
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return entry{}, fmt.Errorf("log line timestamp %q: %w", ts, err)
	}
	_, rest, ok = bytes.Cut(rest, []byte(" "))
	if !ok {
		return entry{}, fmt.Errorf("log line without a stream: %q", line)
	}
	tag, content, _ := bytes.Cut(rest, []byte(" "))
	return entry{t: t, partial: string(tag) == "P", content: content}, nil
}

// logWriter writes entries as `kubectl logs` shows them, within limitBytes.
type logWriter struct {
	w         io.Writer
	opts      logOptions
	written   int64
	midLine   bool
	exhausted bool
}

var errLimit = errors.New("log byte limit reached")

func (lw *logWriter) write(e entry) error {
	if !lw.opts.since.IsZero() && e.t.Before(lw.opts.since) {
		return nil
	}
	var b []byte
	if lw.opts.timestamps && !lw.midLine {
		b = append(b, e.t.UTC().Format(time.RFC3339Nano)...)
		b = append(b, ' ')
	}
	b = append(b, e.content...)
	if !e.partial {
		b = append(b, '\n')
	}
	lw.midLine = e.partial
	if lw.opts.limitBytes > 0 && lw.written+int64(len(b)) >= lw.opts.limitBytes {
		b = b[:lw.opts.limitBytes-lw.written]
		lw.exhausted = true
	}
	n, err := lw.w.Write(b)
	lw.written += int64(n)
	if err != nil {
		return err
	}
	if lw.exhausted {
		return errLimit
	}
	return nil
}

// serveLogs answers containerLogs: the whole file, its tail or what is newer than a
// time, and with follow what the container writes until it stops running.
func (s *Server) serveLogs(w http.ResponseWriter, r *http.Request, uid types.UID, container string) {
	opts, err := parseLogOptions(r.URL.Query(), time.Now())
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	path, err := s.cfg.Runtime.LogPath(uid, container, opts.previous)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		badRequest(w, "container %q: %v", container, err)
		return
	}
	skip := int64(0)
	if opts.tailLines >= 0 {
		total, err := countLines(f)
		if err != nil {
			f.Close()
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		skip = max(total-opts.tailLines, 0)
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			f.Close()
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if wsstream.IsWebSocketRequest(r) {
		s.serveLogsWebSocket(w, r, f, path, uid, container, opts, skip)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	s.copyLog(r.Context(), w, rc.Flush, f, path, uid, container, opts, skip)
}

// serveLogsWebSocket serves the log over a WebSocket, as kube-apiserver streams
// pods/log to WebSocket clients (wsstream's reader protocols: binary.k8s.io, its
// base64 form, or none): each chunk of the log is one message, and the connection is
// closed at its end.
func (s *Server) serveLogsWebSocket(w http.ResponseWriter, r *http.Request, f *os.File, path string, uid types.UID, container string, opts logOptions, skip int64) {
	ctx, cancel := context.WithCancel(r.Context())
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.copyLog(ctx, pw, func() error { return nil }, f, path, uid, container, opts, skip)
		pw.Close()
	}()
	if err := wsstream.NewReader(pr, true, wsstream.NewDefaultReaderProtocols()).Copy(w, r); err != nil {
		s.log.Debug("streaming a log over a websocket", "container", container, "err", err)
	}
	cancel()
	pr.CloseWithError(io.ErrClosedPipe)
	<-done
}

// copyLog writes the log in f (at path) to out from entry skip on, flushing at each
// end of what is written so far, and with follow goes on with what the container
// writes until it stops running or ctx ends. It closes f and any file it opens after
// a rotation.
func (s *Server) copyLog(ctx context.Context, out io.Writer, flush func() error, f *os.File, path string, uid types.UID, container string, opts logOptions, skip int64) {
	defer func() { f.Close() }()
	lw := &logWriter{w: out, opts: opts}
	rd := bufio.NewReaderSize(f, 64<<10)
	var pending []byte
	follow := opts.follow && !opts.previous
	for {
		line, err := rd.ReadBytes('\n')
		pending = append(pending, line...)
		if err == nil {
			e, perr := parseEntry(pending)
			pending = pending[:0]
			if perr != nil {
				continue
			}
			if skip > 0 {
				if !e.partial {
					skip--
				}
				continue
			}
			if werr := lw.write(e); werr != nil {
				return
			}
			continue
		}
		if !errors.Is(err, io.EOF) {
			return
		}
		// End of what is written so far.
		_ = flush()
		if !follow {
			return
		}
		next, done := s.followNext(ctx, f, path, uid, container)
		if done {
			// One last read of what the instance wrote before it stopped.
			if next == nil {
				follow = false
				continue
			}
			return
		}
		if next != nil {
			f.Close()
			f, rd, pending = next, bufio.NewReaderSize(next, 64<<10), pending[:0]
		}
	}
}

// followNext waits for more log output. It returns a newly opened file when the log was
// rotated, and done when the container no longer runs or ctx ended (next is then nil
// only for a final read of the current file).
func (s *Server) followNext(ctx context.Context, f *os.File, path string, uid types.UID, container string) (next *os.File, done bool) {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return f, true
	case <-t.C:
	}
	if cur, err := s.cfg.Runtime.LogPath(uid, container, false); err != nil || cur != path || !s.cfg.Runtime.ContainerRunning(uid, container) {
		return nil, true
	}
	st1, err1 := f.Stat()
	st2, err2 := os.Stat(path)
	if err1 == nil && err2 == nil && !os.SameFile(st1, st2) {
		// Rotated: what is left of the old file was read at EOF; go on with the new.
		if nf, err := os.Open(path); err == nil {
			return nf, false
		}
	}
	return nil, false
}

// countLines counts the complete log lines of a CRI log file.
func countLines(f *os.File) (int64, error) {
	rd := bufio.NewReaderSize(f, 64<<10)
	var n int64
	for {
		line, err := rd.ReadSlice('\n')
		if err == nil {
			if e, perr := parseEntry(line); perr == nil && !e.partial {
				n++
			}
			continue
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = rd.ReadSlice('\n')
			}
			if err == nil {
				n++
				continue
			}
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		return n, err
	}
}
