package runtime

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"time"
)

// criTimeFormat is the timestamp of the CRI log format, nanoseconds always written.
const criTimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// maxLogSize is the size at which a container's log file is rotated (kubelet's
// containerLogMaxSize default).
const maxLogSize = 10 << 20

// maxLineSize is the longest log entry; a longer line is split into partial entries
// ("P") as container runtimes do, so one line never grows a buffer without bound.
const maxLineSize = 16 << 10

// criLog is one container instance's log file in the CRI format kubelet serves
// `kubectl logs` from: "<RFC3339Nano time> <stream> <F|P> <line>". When the file
// exceeds maxLogSize it is renamed to <path>.1 (replacing an older rotation) and a new
// file is started.
type criLog struct {
	mu   sync.Mutex
	path string
	f    *os.File
	size int64
	now  func() time.Time
}

func openCRILog(path string, now func() time.Time) (*criLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("opening container log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening container log: %w", err)
	}
	return &criLog{path: path, f: f, size: st.Size(), now: now}, nil
}

// entry writes one log entry; tag is "F" for a full line, "P" for a partial one.
func (l *criLog) entry(stream, tag string, line []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	if l.size >= maxLogSize {
		l.rotate()
	}
	var b bytes.Buffer
	b.WriteString(l.now().UTC().Format(criTimeFormat))
	b.WriteByte(' ')
	b.WriteString(stream)
	b.WriteByte(' ')
	b.WriteString(tag)
	b.WriteByte(' ')
	b.Write(line)
	b.WriteByte('\n')
	n, _ := l.f.Write(b.Bytes())
	l.size += int64(n)
}

// rotate keeps the full file as <path>.1 and starts an empty one; on failure it keeps
// writing to the current file rather than losing output.
func (l *criLog) rotate() {
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return
	}
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return
	}
	l.f.Close()
	l.f, l.size = f, 0
}

func (l *criLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// streamWriter splits one output stream (stdout or stderr) into log entries.
type streamWriter struct {
	log    *criLog
	stream string
	buf    []byte
}

// Write logs every complete line of p and keeps the rest for the next call.
func (w *streamWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.log.entry(w.stream, "F", w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	for len(w.buf) >= maxLineSize {
		w.log.entry(w.stream, "P", w.buf[:maxLineSize])
		w.buf = w.buf[maxLineSize:]
	}
	if len(w.buf) == 0 {
		w.buf = nil
	}
	return len(p), nil
}

// flush logs what is left of an unterminated last line.
func (w *streamWriter) flush() {
	if len(w.buf) > 0 {
		w.log.entry(w.stream, "F", w.buf)
		w.buf = nil
	}
}
