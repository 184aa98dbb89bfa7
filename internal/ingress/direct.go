package ingress

import (
	"bufio"
	"context"
	"errors"
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
	for {
		bc, reused, err := t.get(req.Context(), addr)
		if err != nil {
			return nil, err
		}
		resp, err := t.exchange(bc, req)
		if err == nil {
			return resp, nil
		}
		bc.conn.Close()
		// A kept-alive connection the backend closed meanwhile: nothing was processed
		// when the request has no body and no answer came; try a fresh connection.
		if reused && (req.Body == nil || req.Body == http.NoBody) && req.Context().Err() == nil {
			continue
		}
		return nil, err
	}
}

func (t *directTransport) exchange(bc *backendConn, req *http.Request) (*http.Response, error) {
	dl, _ := req.Context().Deadline()
	bc.setDeadline(dl)
	// Cancelling the request (client gone) must unblock the read below. A connection
	// whose request was cancelled is closed, never reused, so bc.deadline stays right.
	stop := context.AfterFunc(req.Context(), func() { _ = bc.conn.SetDeadline(time.Unix(1, 0)) })
	var body *bodyReader
	if req.Body != nil && req.Body != http.NoBody {
		body = &bodyReader{ReadCloser: req.Body}
		req.Body = body
	}
	if err := req.Write(bc.bw); err != nil {
		stop()
		if body != nil && body.err != nil {
			// The client's body failed (say, over the size limit): say so, not that the
			// backend did; net/http hides this error's type.
			return nil, body.err
		}
		return nil, err
	}
	if err := bc.bw.Flush(); err != nil {
		stop()
		return nil, err
	}
	resp, err := http.ReadResponse(bc.br, req)
	if err != nil {
		stop()
		return nil, err
	}
	resp.Body = &pooledBody{body: resp.Body, t: t, bc: bc, addr: req.URL.Host, stop: stop,
		reusable: !resp.Close && !req.Close && resp.StatusCode != http.StatusSwitchingProtocols}
	return resp, nil
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

// bodyReader remembers the error reading the client's body.
type bodyReader struct {
	io.ReadCloser
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = err
	}
	return n, err
}
