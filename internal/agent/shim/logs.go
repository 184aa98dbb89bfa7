package shim

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"time"
)

// criTimeFormat is the timestamp of the CRI log format, nanoseconds always written.
const criTimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// Kubelet's defaults for containerLogMaxSize and containerLogMaxFiles.
const (
	DefaultLogMaxSize  = 10 << 20
	DefaultLogMaxFiles = 5
)

// maxLineSize is the longest log entry; a longer line is split into partial entries
// ("P") as container runtimes do, so one line never grows a buffer without bound.
const maxLineSize = 16 << 10

// LogPolicy is when a container instance's log is rotated and how much is kept, as
// kubelet's containerLogMaxSize and containerLogMaxFiles say.
type LogPolicy struct {
	// MaxSize is the size in bytes past which the log file is rotated.
	MaxSize int64
	// MaxFiles is how many files an instance's log may have, the one being written
	// included (at least 2).
	MaxFiles int
}

// Check says what is wrong with the policy, naming kubelet's settings.
func (p LogPolicy) Check() error {
	if p.MaxSize <= 0 {
		return fmt.Errorf("containerLogMaxSize must be positive, got %d bytes", p.MaxSize)
	}
	if p.MaxFiles < 2 {
		return fmt.Errorf("containerLogMaxFiles must be greater than 1, got %d", p.MaxFiles)
	}
	return nil
}

// criLog is one container instance's log file in the CRI format kubelet serves
// `kubectl logs` from: "<RFC3339Nano time> <stream> <F|P> <line>". Before an entry
// would be written to a file that has reached policy.MaxSize, the file is rotated:
// <path> becomes <path>.1, <path>.1 becomes <path>.2 and so on, the oldest beyond
// <path>.<MaxFiles-1> is removed, and a new <path> is started. Entries are never split
// across files.
type criLog struct {
	mu     sync.Mutex
	path   string
	f      *os.File
	size   int64
	policy LogPolicy
	now    func() time.Time
}

func openCRILog(path string, policy LogPolicy, now func() time.Time) (*criLog, error) {
	if err := policy.Check(); err != nil {
		return nil, fmt.Errorf("opening container log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("opening container log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening container log: %w", err)
	}
	return &criLog{path: path, f: f, size: st.Size(), policy: policy, now: now}, nil
}

// entry writes one log entry; tag is "F" for a full line, "P" for a partial one.
func (l *criLog) entry(stream, tag string, line []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	if l.size >= l.policy.MaxSize {
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

// rotate shifts the rotated files by one, dropping the oldest, keeps the full file as
// <path>.1 and starts an empty one; on failure it keeps writing to the current file
// rather than losing output.
func (l *criLog) rotate() {
	last := l.policy.MaxFiles - 1
	_ = os.Remove(fmt.Sprintf("%s.%d", l.path, last))
	for n := last - 1; n >= 1; n-- {
		_ = os.Rename(fmt.Sprintf("%s.%d", l.path, n), fmt.Sprintf("%s.%d", l.path, n+1))
	}
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

// flush logs what is left of an unterminated last line as a partial one ("P"), as
// containerd does, so that readers add no newline the program did not write.
func (w *streamWriter) flush() {
	if len(w.buf) > 0 {
		w.log.entry(w.stream, "P", w.buf)
		w.buf = nil
	}
}
