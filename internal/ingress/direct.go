package ingress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// directTransport is an HTTP/1.1 client for plain requests to endpoints: it writes the
// request and reads the answer on the calling goroutine, where http.Transport hands
// each request across a writer and a reader goroutine per connection; on a busy machine
// those wake-ups were most of the proxy's latency. Requests it does not handle (protocol
// upgrades, Expect: 100-continue) go to fallback.
type directTransport struct {
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	fallback http.RoundTripper
	maxIdle  int
	idleTime time.Duration

	mu        sync.Mutex
	idle      map[string][]*backendConn
	lastSweep time.Time
}

type backendConn struct {
	conn net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	used time.Time
	// deadline is the one last set on conn; setting it is a call into the poller, so it
	// is skipped when unchanged (no deadline, the common case).
	deadline time.Time
}

func (bc *backendConn) setDeadline(t time.Time) {
	if !t.Equal(bc.deadline) {
		_ = bc.conn.SetDeadline(t)
		bc.deadline = t
	}
}

func (t *directTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" || req.Header.Get("Upgrade") != "" || req.Header.Get("Expect") != "" {
		return t.fallback.RoundTrip(req)
	}
	addr := req.URL.Host
	var body *replayBody
	if req.Body != nil && req.Body != http.NoBody {
		body = &replayBody{r: req.Body}
		req.Body = body
	}
	for {
		bc, reused, err := t.get(req.Context(), addr)
		if err != nil {
			return nil, err
		}
		resp, early, err := t.exchange(bc, req, body)
		if err == nil {
			return resp, nil
		}
		bc.conn.Close()
		if cerr := req.Context().Err(); cerr != nil {
			// Cancelled (the client left, say) rather than failed: the error says so.
			return nil, fmt.Errorf("%w: %w", cerr, err)
		}
		// A kept-alive connection the backend closed meanwhile fails before any byte of
		// the answer arrives: the backend never processed the request, whatever its
		// method, so it goes again on another connection when its body can be sent again
		// (as net/http's Transport does).
		if !reused || !early {
			return nil, err
		}
		if body != nil {
			if !body.rewind() {
				return nil, err
			}
		}
	}
}

// exchange sends req on bc and reads the answer's head. early reports a failure before
// any byte of the answer arrived.
func (t *directTransport) exchange(bc *backendConn, req *http.Request, body *replayBody) (resp *http.Response, early bool, err error) {
	dl, _ := req.Context().Deadline()
	bc.setDeadline(dl)
	// Cancelling the request (client gone) must unblock the read below. A connection
	// whose request was cancelled is closed, never reused, so bc.deadline stays right.
	stop := context.AfterFunc(req.Context(), func() { _ = bc.conn.SetDeadline(time.Unix(1, 0)) })
	if err := req.Write(bc.bw); err != nil {
		stop()
		if body != nil && body.err != nil {
			// The client's body failed (say, over the size limit): say so, not that the
			// backend did; net/http hides this error's type.
			return nil, false, body.err
		}
		return nil, true, err
	}
	if err := bc.bw.Flush(); err != nil {
		stop()
		return nil, true, err
	}
	if _, err := bc.br.Peek(1); err != nil {
		stop()
		return nil, true, err
	}
	resp, err = http.ReadResponse(bc.br, req)
	if err != nil {
		stop()
		return nil, false, err
	}
	resp.Body = &pooledBody{body: resp.Body, t: t, bc: bc, addr: req.URL.Host, stop: stop,
		reusable: !resp.Close && !req.Close && resp.StatusCode != http.StatusSwitchingProtocols}
	return resp, false, nil
}

func (t *directTransport) get(ctx context.Context, addr string) (*backendConn, bool, error) {
	t.mu.Lock()
	for conns := t.idle[addr]; len(conns) > 0; conns = t.idle[addr] {
		bc := conns[len(conns)-1]
		t.idle[addr] = conns[:len(conns)-1]
		if time.Since(bc.used) < t.idleTime {
			t.mu.Unlock()
			return bc, true, nil
		}
		bc.conn.Close()
	}
	t.mu.Unlock()
	c, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	c = newRawConn(c)
	return &backendConn{conn: c, br: bufio.NewReaderSize(c, 4096), bw: bufio.NewWriterSize(c, 4096)}, false, nil
}

func (t *directTransport) put(addr string, bc *backendConn) {
	bc.used = time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idle == nil {
		t.idle = map[string][]*backendConn{}
	}
	// Endpoints go away (pods replaced) and nobody asks for their connections again:
	// now and then, close what idled too long everywhere.
	if bc.used.Sub(t.lastSweep) > t.idleTime/2 {
		t.lastSweep = bc.used
		for a, conns := range t.idle {
			kept := conns[:0]
			for _, c := range conns {
				if bc.used.Sub(c.used) < t.idleTime {
					kept = append(kept, c)
				} else {
					c.conn.Close()
				}
			}
			if len(kept) == 0 {
				delete(t.idle, a)
			} else {
				t.idle[a] = kept
			}
		}
	}
	if len(t.idle[addr]) >= t.maxIdle {
		bc.conn.Close()
		return
	}
	t.idle[addr] = append(t.idle[addr], bc)
}

// pooledBody returns the connection to the pool once the answer was read to its end,
// and closes it otherwise.
type pooledBody struct {
	body     io.ReadCloser
	t        *directTransport
	bc       *backendConn
	addr     string
	stop     func() bool
	reusable bool
	eof      bool
	closed   bool
}

func (b *pooledBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof = true
	}
	return n, err
}

func (b *pooledBody) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	err := b.body.Close()
	if b.stop() && b.eof && b.reusable && err == nil && b.bc.br.Buffered() == 0 {
		b.t.put(b.addr, b.bc)
		return nil
	}
	b.bc.conn.Close()
	return err
}

// replayKeep is how much of a request body replayBody keeps to send it again.
const replayKeep = 64 << 10

// replayBody is a request body that can be sent once more as long as no more than
// replayKeep bytes of it were read: it keeps what it gave out. It also remembers the
// error reading the client's body.
type replayBody struct {
	r    io.ReadCloser
	kept []byte
	// over is set once more than replayKeep bytes were read: no replay then.
	over bool
	// pos is where Read is in kept after a rewind; len(kept) reads from r again.
	pos int
	eof bool
	err error
}

func (b *replayBody) Read(p []byte) (int, error) {
	if b.pos < len(b.kept) {
		n := copy(p, b.kept[b.pos:])
		b.pos += n
		return n, nil
	}
	if b.eof {
		return 0, io.EOF
	}
	n, err := b.r.Read(p)
	if !b.over {
		if len(b.kept)+n > replayKeep {
			b.over, b.kept = true, nil
		} else {
			b.kept = append(b.kept, p[:n]...)
		}
		b.pos = len(b.kept)
	}
	switch {
	case errors.Is(err, io.EOF):
		b.eof = true
	case err != nil:
		b.err = err
	}
	return n, err
}

// Close leaves the client's body open: writing a request closes its body, and a replay
// may still need to read the rest of it; the server closes it when the request ends.
func (b *replayBody) Close() error { return nil }

// rewind makes the next Read start the body again; false when that is not possible.
func (b *replayBody) rewind() bool {
	if b.over || b.err != nil {
		return false
	}
	b.pos = 0
	return true
}
