// Package nftsession writes nftables through one long-lived `nft -i` per user instead
// of an nft process per transaction: Session for text, Table for a knftables.Interface
// whose transactions go through a Session. The agent's four tables (the service
// proxy's, hostPorts', the network policies' and the overlay's masquerade) use it.
package nftsession

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Session is one long-lived `nft -i` to which transactions are sent, instead of
// starting an nft process for each. Starting nft (a dozen shared libraries)
// is what a small sync costs: on the simulated machines of test/e2e's
// BenchmarkMachinesNetworkProgramming, nft processes took 53% of the CPU while the
// proxies followed one endpoint turning Ready and unready, and a sync took 100 ms on
// average; one transaction through the session takes well under a millisecond (see
// BenchmarkNFTSession).
//
// nft's interactive mode runs each input line as one transaction (all of it or, on an
// error, none of it; newlines and semicolons separate commands alike), reports errors
// on stderr and says nothing on success. So a transaction is written as one line, and
// followed by a marker line, deliberately not a command: nft reports it as a syntax
// error quoting the line, and once that report has come, the transaction's own report
// (if any) came before it.
//
// nft runs in the network namespace of the thread that calls Run; a Run from another
// namespace replaces the process.
type Session struct {
	path string

	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  *os.File
	stderr chan []byte // chunks read from nft's stderr; closed when it ends
	netns  uint64      // the network namespace (inode) nft runs in
	buf    []byte      // stderr read past the last marker
	off    error       // set when nft -i does not answer as expected: never used again
	sent   int         // transactions sent to this process
	bytes  int         // and their bytes
	marker int
}

// NewSession returns a Session running the nft at path; it starts nft on its first Run.
func NewSession(path string) *Session { return &Session{path: path} }

// sessionMaxTransactions, sessionMaxBytes and sessionMaxLine bound what goes through
// one nft process: interactive nft keeps every line in its history, so a process is
// replaced after that many transactions or bytes, and a transaction longer than
// sessionMaxLine (a full sync of thousands of services) goes through `nft -f -` as
// before.
const (
	sessionMaxTransactions = 1000
	sessionMaxBytes        = 16 << 20
	sessionMaxLine         = 1 << 20
)

// sessionAnswerTimeout bounds the wait for nft's answer to one transaction; past it the
// process is replaced and the transaction counts as failed.
const sessionAnswerTimeout = 2 * time.Minute

// ErrUnusable says the transaction did not go through the session and may be run
// another way (`nft -f -`).
var ErrUnusable = errors.New("nft session unusable")

// Run sends text (nft commands, one per line: a command is never split over lines, as
// knftables and the proxy write them) as one transaction and returns nft's
// error report, if any. An error wrapping ErrUnusable means nothing was sent.
func (s *Session) Run(ctx context.Context, text string) error {
	line := strings.ReplaceAll(strings.TrimRight(text, "\n"), "\n", "; ")
	if len(line) > sessionMaxLine {
		return fmt.Errorf("%w: a transaction of %d bytes", ErrUnusable, len(line))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ns, err := threadNetns()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnusable, err)
	}
	if s.cmd != nil && (s.netns != ns || s.sent >= sessionMaxTransactions || s.bytes+len(line) > sessionMaxBytes) {
		s.stopLocked()
	}
	if s.off != nil {
		return fmt.Errorf("%w: %v", ErrUnusable, s.off)
	}
	if s.cmd == nil {
		if err := s.startLocked(ns); err != nil {
			return fmt.Errorf("%w: %v", ErrUnusable, err)
		}
		// The first marker alone: an nft that does not report it as this one does is
		// not used (the caller runs nft -f instead).
		if err := s.sendLocked(ctx, "", 10*time.Second); err != nil {
			s.stopLocked()
			if ctx.Err() == nil {
				s.off = fmt.Errorf("nft -i did not answer as expected: %w", err)
			}
			return fmt.Errorf("%w: %v", ErrUnusable, err)
		}
	}
	return s.sendLocked(ctx, line, sessionAnswerTimeout)
}

// sendLocked sends line (nothing when empty) and a marker, and returns nft's report on
// line as an error, if it reported one; it waits up to timeout for the report.
func (s *Session) sendLocked(ctx context.Context, line string, timeout time.Duration) error {
	s.marker++
	s.sent++
	s.bytes += len(line)
	marker := "tranche-transaction-end-" + strconv.Itoa(s.marker)
	// A write that nft does not take (a full pipe) ends with ctx.
	stop := context.AfterFunc(ctx, func() { s.stdin.SetWriteDeadline(time.Now()) })
	if line != "" {
		line += "\n"
	}
	_, err := io.WriteString(s.stdin, line+marker+"\n")
	stop()
	if err != nil {
		s.stopLocked()
		return fmt.Errorf("nft -i: sending the transaction: %w", err)
	}
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	report, err := s.awaitLocked(wait, marker)
	if err != nil {
		// Whether the transaction ran is unknown: the caller's next sync is full.
		s.stopLocked()
		return err
	}
	if strings.Contains(report, "Error:") {
		report = strings.TrimSpace(report)
		if len(report) > 4000 {
			report = report[:4000] + " [...]"
		}
		return fmt.Errorf("nft -i: %s", report)
	}
	return nil
}

// awaitLocked reads nft's stderr until the report of marker and returns what came
// before that report.
func (s *Session) awaitLocked(ctx context.Context, marker string) (string, error) {
	for {
		// The marker's report: "Error: <syntax error>\n<marker>\n<caret line>\n".
		text := string(s.buf)
		if i := strings.Index(text, "\n"+marker+"\n"); i >= 0 {
			if end := strings.IndexByte(text[i+len(marker)+2:], '\n'); end >= 0 {
				before := text[:i]
				if j := strings.LastIndexByte(before, '\n'); j >= 0 {
					before = before[:j+1]
				} else {
					before = "" // the marker's own "Error:" line only
				}
				s.buf = append(s.buf[:0], text[i+len(marker)+2+end+1:]...)
				return before, nil
			}
		}
		select {
		case chunk, ok := <-s.stderr:
			if !ok {
				return "", fmt.Errorf("nft -i ended during a transaction: %s", strings.TrimSpace(string(s.buf)))
			}
			s.buf = append(s.buf, chunk...)
		case <-ctx.Done():
			return "", fmt.Errorf("nft -i: %w", ctx.Err())
		}
	}
}

// startLocked starts nft -i in the calling thread's network namespace ns.
func (s *Session) startLocked(ns uint64) error {
	cmd := exec.Command(s.path, "-i")
	// nft reads and writes its line history in $HOME/.nft.history: not the host's.
	cmd.Env = append(os.Environ(), "HOME=/dev/null")
	// Pipes of our own: os.Pipe's ends take deadlines.
	stdinR, stdin, err := os.Pipe()
	if err != nil {
		return err
	}
	stderr, stderrW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdin.Close()
		return err
	}
	cmd.Stdin, cmd.Stderr, cmd.Stdout = stdinR, stderrW, io.Discard // a prompt, perhaps
	err = cmd.Start()
	stdinR.Close()
	stderrW.Close()
	if err != nil {
		stdin.Close()
		stderr.Close()
		return fmt.Errorf("starting nft -i: %w", err)
	}
	ch := make(chan []byte, 16)
	go func() {
		defer close(ch)
		defer stderr.Close()
		for {
			b := make([]byte, 64<<10)
			n, err := stderr.Read(b)
			if n > 0 {
				ch <- b[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	s.cmd, s.stdin, s.stderr, s.netns, s.buf, s.sent, s.bytes = cmd, stdin, ch, ns, nil, 0, 0
	return nil
}

// stopLocked ends the process: at the end of its input nft exits (as it does when the
// proxy's process ends), else it is killed after a second.
func (s *Session) stopLocked() {
	if s.cmd == nil {
		return
	}
	s.stdin.Close()
	kill := time.AfterFunc(time.Second, func() { _ = s.cmd.Process.Kill() })
	for range s.stderr {
	}
	kill.Stop()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Close ends the session's process, if any (a later Run starts another).
func (s *Session) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

// threadNetns identifies the calling thread's network namespace.
func threadNetns() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}
