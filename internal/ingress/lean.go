package ingress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"
)

// The lean path serves the common HTTP/1.1 exchange itself: a keep-alive request with no
// body, a Content-Length body or a chunked one, no protocol upgrade and no Expect. It
// reads the request head out of the connection's buffer without building an
// http.Request, writes it to a kept backend connection with the hop-by-hop headers
// removed and X-Forwarded-For/Host/Proto set, and copies the answer back with its
// framing, flushing whenever the backend has nothing more buffered (so streams stream).
// On the first request of a connection it does not handle (HTTP/1.0, an upgrade, Expect,
// a head larger than its buffer or than the header limit, anything net/http would refuse
// or treat specially), it hands the connection, with what it buffered, to net/http's
// server and the general path (Proxy.ServeHTTP) for the rest of the connection's life.
// net/http cost more per request than the proxying itself: a goroutine wake-up for the
// background read, a Request, a header map, a context and a cloned request per exchange.

const (
	// leanHeadMax is the largest request head the lean path reads; larger ones go to
	// net/http, which applies MaxHeaderBytes (431).
	leanHeadMax = 8 << 10
	// respHeadMax is the largest answer head read from a backend, a deliberate limit:
	// a larger head gets the client a 502 and a Warn log line naming the backend and
	// the limit, as nginx answers 502 ("upstream sent too big header") past
	// proxy_buffer_size, 4 or 8 kB by default. The backend connection's 4 kB buffer
	// grows to it when a head does not fit (cookies, say); net/http's client would
	// allow 10 MB.
	respHeadMax = 64 << 10
	// idleTimeout and headerTimeout are those of the net/http server too.
	idleTimeout   = 120 * time.Second
	headerTimeout = 30 * time.Second
	// idleSlack is how much shorter than idleTimeout the idle timeout of a busy
	// connection may be.
	idleSlack = 10 * time.Second
)

// front accepts the connections of one listener for the lean path.
type front struct {
	p   *Proxy
	tls *tls.Config // nil: plain HTTP
	// maxHead is the largest request head served here: the smaller of leanHeadMax and
	// the server's MaxHeaderBytes.
	maxHead int
	handoff *connListener
	log     *slog.Logger

	closing atomic.Bool
	mu      sync.Mutex
	conns   map[*leanConn]struct{}
	wg      sync.WaitGroup
	// stopWatch ends watch (abort.go) once shutdown is done; watchDone tells it ended.
	stopWatch, watchDone chan struct{}
}

// Connection states: only an idle connection (waiting for a request) is closed at once
// when the server shuts down; an active one finishes its exchange first.
const (
	stateIdle int32 = iota
	stateActive
	stateClosed
)

type leanConn struct {
	f        *front
	c        net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	state    atomic.Int32
	client   string // RemoteAddr, as the access log shows it
	clientIP string // for X-Forwarded-For
	proto    string // X-Forwarded-Proto
	// Strings of the previous request, reused when the next one has the same bytes:
	// keep-alive clients mostly ask the same host, often the same path.
	lastHost, lastPath string
	fields             []field
	resp               []field
	tokens             [][]byte
	// out holds the request for the backend: head, and body when it can be replayed.
	out bytes.Buffer
	// deadline is the read deadline set last on c.
	deadline time.Time
	// raw is the client's TCP connection, under TLS if any, for the front's checks
	// that the client is still there (abort.go); nil when it is not a socket.
	raw syscall.RawConn
	// inflight is the backend connection of the request in flight once it was sent,
	// since when that request started (UnixNano; MaxInt64: its client is not checked).
	inflight atomic.Pointer[backendConn]
	since    atomic.Int64
	// bodyW writes request bodies that may not be kept whole (see send).
	bodyW *bufio.Writer
	// x is the exchange in flight (see exchange).
	x exchange
}

func (lc *leanConn) setReadDeadline(t time.Time) {
	if !t.Equal(lc.deadline) {
		_ = lc.c.SetReadDeadline(t)
		lc.deadline = t
	}
}

// field is one header line, both parts pointing into a read buffer.
type field struct{ name, value []byte }

// serve accepts connections until ln is closed.
func (f *front) serve(ln net.Listener) error {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if f.closing.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of file descriptors and the like: wait a little, as net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			f.log.Warn("accepting a connection", "err", err, "retryIn", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		lc := &leanConn{f: f, c: newRawConn(c)}
		f.mu.Lock()
		if f.closing.Load() {
			f.mu.Unlock()
			c.Close()
			continue
		}
		f.conns[lc] = struct{}{}
		f.wg.Add(1)
		f.mu.Unlock()
		go lc.serve()
	}
}

// shutdown closes idle connections now and waits for active ones to finish their
// exchange until ctx ends, then closes them and their backend connections.
func (f *front) shutdown(ctx context.Context) {
	f.mu.Lock()
	f.closing.Store(true)
	for lc := range f.conns {
		if lc.state.CompareAndSwap(stateIdle, stateClosed) {
			_ = lc.c.SetReadDeadline(time.Unix(1, 0))
		}
	}
	f.mu.Unlock()
	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		f.mu.Lock()
		for lc := range f.conns {
			lc.c.Close()
			// An exchange waits for its backend, not for the client.
			lc.abandon()
		}
		f.mu.Unlock()
		<-done
	}
	close(f.stopWatch)
	<-f.watchDone
}

func (lc *leanConn) serve() {
	f := lc.f
	handed := false
	defer func() {
		if !handed {
			lc.c.Close()
		}
		f.mu.Lock()
		delete(f.conns, lc)
		f.mu.Unlock()
		f.wg.Done()
	}()
	lc.proto = "http"
	if sc, ok := lc.c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			lc.raw = rc
		}
	}
	if f.tls != nil {
		tc := tls.Server(lc.c, f.tls)
		lc.c = tc
		_ = tc.SetDeadline(time.Now().Add(headerTimeout))
		if err := tc.Handshake(); err != nil {
			f.log.Debug("TLS handshake", "client", tc.RemoteAddr().String(), "err", err)
			return
		}
		_ = tc.SetDeadline(time.Time{})
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			handed = f.handoff.push(tc)
			return
		}
		lc.proto = "https"
	}
	lc.client = lc.c.RemoteAddr().String()
	lc.clientIP = lc.client
	if h, _, err := net.SplitHostPort(lc.client); err == nil {
		lc.clientIP = h
	}
	lc.br = bufio.NewReaderSize(lc.c, leanHeadMax)
	lc.bw = bufio.NewWriterSize(lc.c, 4<<10)
	for {
		lc.state.Store(stateIdle)
		if f.closing.Load() {
			return
		}
		head, err := lc.readHead()
		if !lc.state.CompareAndSwap(stateIdle, stateActive) {
			return
		}
		if err == nil {
			err = lc.exchange(head)
		}
		if err != nil {
			if errors.Is(err, errHandOff) {
				handed = lc.handOff()
			}
			return
		}
	}
}

var (
	errHandOff = errors.New("hand the connection to net/http")
	errClose   = errors.New("close the connection")
)

// readHead waits for a whole request head in the buffer and returns it, unread. A head
// that does not fit in maxHead, or that arrives with bare LF line ends, is errHandOff.
func (lc *leanConn) readHead() ([]byte, error) {
	// Re-arming the idle timeout is a call into the poller's timers: done only when the
	// deadline set last is more than idleSlack short of a full idle timeout, so a busy
	// connection does it every few seconds rather than for every request.
	if next := time.Now().Add(idleTimeout); lc.deadline.IsZero() || next.Sub(lc.deadline) > idleSlack {
		lc.setReadDeadline(next)
	}
	n := 1
	for first := true; ; first = false {
		buf, err := lc.br.Peek(n)
		if err != nil {
			if len(buf) > 0 && errors.Is(err, bufio.ErrBufferFull) {
				return nil, errHandOff
			}
			return nil, err
		}
		buf, _ = lc.br.Peek(lc.br.Buffered())
		if i := bytes.Index(buf, crlfcrlf); i >= 0 && i+4 <= lc.f.maxHead {
			return buf[:i+4], nil
		}
		if len(buf) >= lc.f.maxHead || bytes.Contains(buf, lflf) {
			return nil, errHandOff
		}
		if first {
			// The head came in pieces: from now on the header timeout applies.
			lc.setReadDeadline(time.Now().Add(headerTimeout))
		}
		n = len(buf) + 1
	}
}

var (
	crlf     = []byte("\r\n")
	crlfcrlf = []byte("\r\n\r\n")
	lflf     = []byte("\n\n")
)

// handOff gives the connection with what is buffered to net/http's server.
func (lc *leanConn) handOff() bool {
	if lc.bw.Flush() != nil {
		return false
	}
	return lc.f.handoff.push(&prefixConn{Conn: lc.c, r: lc.br, tls: lc.f.tls != nil})
}

// request is a parsed request head; its slices point into the connection's buffer.
type request struct {
	line, method, target []byte
	// unescaped is the path of a target with escapes, decoded; "" without escapes.
	unescaped     string
	host          []byte
	contentLength int64 // -1: none
	chunked       bool
	close         bool // Connection: close, or the connection must close after the answer
	teTrailers    bool
	// headLen is how much of the head is still in the buffer (0 once discarded);
	// bodyDone is set once the body, if any, was read.
	headLen  int
	bodyDone bool
	// bodyStarted is set once reading the body began: what is left of it is unknown.
	bodyStarted bool
}

// parseRequest parses head, or returns false when the lean path does not handle it.
func (lc *leanConn) parseRequest(head []byte, rq *request) bool {
	i := bytes.Index(head, crlf)
	line := head[:i]
	rq.line = head[:i+2]
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 {
		return false
	}
	rq.method = line[:sp]
	rest := line[sp+1:]
	sp = bytes.IndexByte(rest, ' ')
	if sp <= 0 || string(rest[sp+1:]) != "HTTP/1.1" || rest[0] != '/' || !validToken(rq.method) {
		return false
	}
	rq.target = rest[:sp]
	// A '#' has no place in a request target: net/http escapes it (%23) for the
	// backend, which might otherwise read a fragment the routing did not see.
	for _, c := range rq.target {
		if c <= ' ' || c == 0x7f || c == '#' {
			return false
		}
	}
	if path, _, _ := bytes.Cut(rq.target, []byte{'?'}); bytes.IndexByte(path, '%') >= 0 {
		// Escapes are decoded for routing as net/http decodes them, and a path it
		// refuses (a bad escape) goes to it.
		u, err := url.ParseRequestURI(string(rq.target))
		if err != nil {
			return false
		}
		rq.unescaped = u.Path
	}
	var ok bool
	if lc.fields, ok = parseFields(head[i+2:len(head)-2], lc.fields[:0]); !ok {
		return false
	}
	rq.contentLength = -1
	hosts := 0
	lc.tokens = lc.tokens[:0]
	for _, fl := range lc.fields {
		switch {
		case bytes.EqualFold(fl.name, hdrHost):
			hosts++
			rq.host = fl.value
		case bytes.EqualFold(fl.name, hdrContentLength):
			if rq.contentLength >= 0 {
				return false
			}
			// Leading zeros are left to net/http, which sends the backend the
			// number rewritten, not the bytes received.
			if rq.contentLength = parseLength(fl.value); rq.contentLength < 0 || (len(fl.value) > 1 && fl.value[0] == '0') {
				return false
			}
		case bytes.EqualFold(fl.name, hdrTransferEncoding):
			if rq.chunked || !bytes.EqualFold(fl.value, valChunked) {
				return false
			}
			rq.chunked = true
		case bytes.EqualFold(fl.name, hdrUpgrade), bytes.EqualFold(fl.name, hdrExpect):
			return false
		case bytes.EqualFold(fl.name, hdrConnection):
			lc.tokens = appendTokens(lc.tokens, fl.value)
		case bytes.EqualFold(fl.name, hdrTE):
			for _, t := range bytes.Split(fl.value, comma) {
				if bytes.EqualFold(bytes.TrimSpace(t), valTrailers) {
					rq.teTrailers = true
				}
			}
		}
	}
	// A Host net/http's server refuses (400 "malformed Host header") would otherwise
	// reach a backend: it goes to net/http too.
	if hosts != 1 || !httpguts.ValidHostHeader(string(rq.host)) || (rq.chunked && rq.contentLength >= 0) {
		return false
	}
	for _, t := range lc.tokens {
		if bytes.EqualFold(t, valClose) {
			rq.close = true
		}
	}
	return true
}

// exchange serves one request whose head is buffered: nil when the connection may serve
// another, errHandOff or errClose otherwise. The slices of the parsed head are valid
// until the body is read; only the strings of x are used after that.
func (lc *leanConn) exchange(head []byte) error {
	rq := request{headLen: len(head)}
	if !lc.parseRequest(head, &rq) {
		return errHandOff
	}
	p := lc.f.p
	// The exchange goes where the heap would take it (a large body's spill keeps it): the
	// connection's, reused, rather than an allocation per request.
	x := &lc.x
	*x = exchange{start: time.Now(), client: lc.client, proto: "HTTP/1.1", method: methodString(rq.method)}
	x.host = lc.str(&lc.lastHost, rq.host)
	if rq.unescaped != "" {
		x.path = rq.unescaped
	} else {
		path, _, _ := bytes.Cut(rq.target, []byte{'?'})
		x.path = lc.str(&lc.lastPath, path)
	}
	x.ingress, x.backend = p.route(p.table.Load(), x.host, x.path)
	keep := lc.serveRequest(&rq, head, x)
	p.record(context.Background(), x)
	if !keep {
		return errClose
	}
	return nil
}

// serveRequest forwards the request or answers it with one of our pages; false when the
// connection must be closed.
func (lc *leanConn) serveRequest(rq *request, head []byte, x *exchange) bool {
	p := lc.f.p
	be := x.backend
	max := p.cfg.MaxBodyBytes
	switch {
	case be == nil:
		return lc.page(rq, x, http.StatusNotFound, notFound(x.host, x.path))
	case be.Missing != "":
		return lc.page(rq, x, http.StatusServiceUnavailable, "backend unavailable: "+be.Missing)
	case max > 0 && rq.contentLength > max:
		rq.close = true // rather than read a body this large to keep the connection
		return lc.page(rq, x, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes exceeds the limit of %d", rq.contentLength, max))
	}
	x.endpoint = be.Pick()
	if x.endpoint == "" {
		return lc.page(rq, x, http.StatusServiceUnavailable, "backend "+be.Name()+" has no ready endpoint")
	}
	bc, err := lc.send(rq, head, x)
	if err != nil {
		if errors.Is(err, errClientGone) {
			return lc.clientGone(x)
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			rq.close = true
			return lc.page(rq, x, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds the limit of %d bytes", tooBig.Limit))
		}
		var ce clientError
		if errors.As(err, &ce) {
			// A broken body, or the client went away (then nobody reads this).
			rq.close = true
			return lc.page(rq, x, http.StatusBadRequest, "reading the request body: "+ce.Error())
		}
		p.cfg.Logger.Warn("backend failed", "backend", be.Name(), "endpoint", x.endpoint, "err", err)
		return lc.page(rq, x, http.StatusBadGateway, "backend "+be.Name()+" failed")
	}
	return lc.relay(rq, bc, x)
}

// clientGone ends an exchange whose client left before the answer began: the front
// closed the backend connection (abort.go); the connection is closed too.
func (lc *leanConn) clientGone(x *exchange) bool {
	x.status = statusClientClosed
	lc.f.p.cfg.Logger.Debug("client closed its connection before the answer; closed the backend connection too",
		"client", x.client, "backend", x.backend.Name(), "endpoint", x.endpoint)
	return false
}

// clientError is a failure reading the client's request body.
type clientError struct{ error }

func (e clientError) Unwrap() error { return e.error }

// send writes the request to an endpoint and waits for the first byte of the answer.
// Connecting, or a fresh connection breaking before the answer, fails over to other
// endpoints as the general path does (idempotent methods without a body, up to
// Attempts endpoints, each tried once). A body of up to replayKeep bytes, with a
// Content-Length or chunked, is read whole before it is sent (nginx buffers request
// bodies too), so that a kept connection failing before any byte of the answer arrived
// can be replaced by a fresh one and the request sent again: the backend never processed
// it, whatever its method (as net/http's Transport does when it can have the body again,
// GetBody). A larger body is sent as it arrives and cannot be sent again: its request
// fails with 502 on such a connection, as net/http's does when the body cannot be rewound.
func (lc *leanConn) send(rq *request, head []byte, x *exchange) (*backendConn, error) {
	p := lc.f.p
	t := p.direct
	hasBody := rq.chunked || rq.contentLength > 0
	lc.out.Reset()
	lc.writeHead(&lc.out, rq)
	// The head's slices go stale from here on: the buffer is read further.
	_, _ = lc.br.Discard(len(head))
	rq.headLen = 0
	defer func() {
		if lc.out.Cap() > 16<<10 {
			lc.out = bytes.Buffer{}
		}
	}()
	// bc is set when the body went out as it arrived: too large to keep.
	var bc *backendConn
	if hasBody {
		// A body may take long to come; the idle and header timeouts do not apply to it.
		lc.setReadDeadline(time.Time{})
		rq.bodyStarted = true
		var err error
		if bc, err = lc.readBody(rq, x); err != nil {
			return nil, err
		}
		rq.bodyDone = true
	}
	replayable := bc == nil
	tried := []string{x.endpoint}
	for {
		reused := false
		if bc == nil {
			var err error
			bc, reused, err = t.get(context.Background(), x.endpoint)
			if err != nil {
				if len(tried) < p.cfg.Attempts && !hasBody && idempotent(x.method) {
					if next := x.backend.PickOther(tried); next != "" {
						tried = append(tried, next)
						x.endpoint = next
						continue
					}
				}
				return nil, err
			}
			bc.setDeadline(time.Time{})
			_, _ = bc.bw.Write(lc.out.Bytes())
		}
		lc.watch(bc, x.start)
		err := bc.bw.Flush()
		if err == nil {
			_, err = bc.br.Peek(1)
		}
		if err != nil {
			bc.conn.Close()
			if !lc.settle(bc) {
				return nil, errClientGone
			}
			if reused && replayable {
				bc = nil
				continue
			}
			// A fresh connection that broke before any byte of the answer: the
			// endpoint may have processed the request, which only an idempotent one
			// allows sending again, to another endpoint (nginx's proxy_next_upstream
			// error).
			if len(tried) < p.cfg.Attempts && !hasBody && idempotent(x.method) {
				if next := x.backend.PickOther(tried); next != "" {
					tried = append(tried, next)
					x.endpoint = next
					bc = nil
					continue
				}
			}
			return nil, err
		}
		return bc, nil
	}
}

// readBody reads the request body after the head in lc.out when it is at most
// replayKeep bytes; a larger one goes to a backend connection as it arrives, which
// readBody returns.
func (lc *leanConn) readBody(rq *request, x *exchange) (*backendConn, error) {
	if !rq.chunked && rq.contentLength <= replayKeep {
		n := int(rq.contentLength)
		lc.out.Grow(n)
		b := lc.out.AvailableBuffer()[:n]
		if _, err := io.ReadFull(lc.br, b); err != nil {
			return nil, clientError{err}
		}
		_, _ = lc.out.Write(b)
		return nil, nil
	}
	// A chunked body's length is known at its end: it is kept until it passes
	// replayKeep, then spilled. A longer Content-Length spills at once.
	sp := &spill{lc: lc, x: x, kept: lc.out.Len(), keep: replayKeep}
	if !rq.chunked {
		sp.keep = 0
	}
	if lc.bodyW == nil {
		lc.bodyW = bufio.NewWriterSize(sp, 4<<10)
	} else {
		lc.bodyW.Reset(sp)
	}
	pp := pipe{dst: lc.bodyW, src: lc.br, pool: lc.f.p.buffers}
	var err error
	if rq.chunked {
		_, err = pp.chunked(lc.f.p.cfg.MaxBodyBytes)
	} else {
		_, err = pp.copyN(rq.contentLength)
	}
	if err == nil {
		if err = lc.bodyW.Flush(); err != nil {
			err = writeError{err}
		}
	}
	lc.bodyW.Reset(nil)
	if err != nil {
		if sp.bc != nil {
			sp.bc.conn.Close()
		}
		var re readError
		if errors.As(err, &re) {
			return nil, clientError{re.error}
		}
		return nil, err
	}
	return sp.bc, nil
}

// spill is where readBody writes a body: after the head in lc.out until it would pass
// keep bytes there, then to a backend connection, with what was kept first.
type spill struct {
	lc *leanConn
	x  *exchange
	// kept is where the body starts in lc.out, keep how much of it may be kept.
	kept, keep int
	bc         *backendConn
}

func (s *spill) Write(b []byte) (int, error) {
	out := &s.lc.out
	if s.bc == nil {
		if out.Len()-s.kept+len(b) <= s.keep {
			return out.Write(b)
		}
		bc, _, err := s.lc.f.p.direct.get(context.Background(), s.x.endpoint)
		if err != nil {
			return 0, err
		}
		bc.setDeadline(time.Time{})
		s.bc = bc
		if _, err := bc.conn.Write(out.Bytes()); err != nil {
			return 0, err
		}
		out.Reset()
	}
	return s.bc.conn.Write(b)
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// writeHead writes the request line and headers for the backend: hop-by-hop headers
// and those the Connection header names are left out, X-Forwarded-For gets the client's
// address appended, X-Forwarded-Host and -Proto are ours.
func (lc *leanConn) writeHead(w *bytes.Buffer, rq *request) {
	_, _ = w.Write(rq.line)
	var xff [][]byte
	for _, fl := range lc.fields {
		switch {
		case hopByHop(fl.name) || named(lc.tokens, fl.name) ||
			bytes.EqualFold(fl.name, hdrXFHost) || bytes.EqualFold(fl.name, hdrXFProto):
			continue
		case bytes.EqualFold(fl.name, hdrXFF):
			xff = append(xff, fl.value)
			continue
		}
		writeField(w, fl.name, fl.value)
	}
	_, _ = w.WriteString("X-Forwarded-For: ")
	for _, v := range xff {
		_, _ = w.Write(v)
		_, _ = w.WriteString(", ")
	}
	_, _ = w.WriteString(lc.clientIP)
	_, _ = w.WriteString("\r\nX-Forwarded-Host: ")
	_, _ = w.Write(rq.host)
	_, _ = w.WriteString("\r\nX-Forwarded-Proto: ")
	_, _ = w.WriteString(lc.proto)
	_, _ = w.Write(crlf)
	if rq.chunked {
		_, _ = w.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if rq.teTrailers {
		_, _ = w.WriteString("Te: trailers\r\n")
	}
	_, _ = w.Write(crlf)
}

func writeField(w interface {
	io.Writer
	io.StringWriter
}, name, value []byte) {
	_, _ = w.Write(name)
	_, _ = w.WriteString(": ")
	_, _ = w.Write(value)
	_, _ = w.Write(crlf)
}

// relay copies the backend's answer (and any 1xx before it) to the client and returns
// bc to the pool when the answer ended cleanly; false when the client connection must be
// closed.
func (lc *leanConn) relay(rq *request, bc *backendConn, x *exchange) bool {
	t := lc.f.p.direct
	for {
		var rh responseHead
		err := lc.readResponseHead(bc, &rh)
		if err != nil {
			bc.conn.Close()
			if !lc.settle(bc) {
				return lc.clientGone(x)
			}
			if errors.Is(err, errRespHeadTooLarge) {
				lc.f.p.cfg.Logger.Warn("backend answer head too large, answering 502", "backend", x.backend.Name(), "endpoint", x.endpoint, "limitBytes", respHeadMax)
			} else {
				lc.f.p.cfg.Logger.Warn("backend failed", "backend", x.backend.Name(), "endpoint", x.endpoint, "err", err)
			}
			rq.close = true
			return lc.page(rq, x, http.StatusBadGateway, "backend "+x.backend.Name()+" failed")
		}
		if rh.status >= 100 && rh.status < 200 {
			// 100 Continue, 103 Early Hints: the client gets them as they come.
			lc.writeResponseHead(&rh, nil, false)
			_, _ = bc.br.Discard(rh.size)
			if err := lc.bw.Flush(); err != nil {
				bc.conn.Close()
				lc.settle(bc)
				x.status = rh.status
				return false
			}
			continue
		}
		x.status = rh.status
		noBody := x.method == http.MethodHead || rh.status == http.StatusNoContent || rh.status == http.StatusNotModified
		untilClose := !noBody && !rh.chunked && rh.contentLength < 0
		lc.writeResponseHead(&rh, rq, untilClose)
		_, _ = bc.br.Discard(rh.size)
		pp := pipe{dst: lc.bw, src: bc.br, pool: lc.f.p.buffers}
		switch {
		case noBody:
		case rh.chunked:
			x.bytes, err = pp.chunked(0)
		case untilClose:
			x.bytes, err = pp.chunkUntilEOF()
		default:
			x.bytes, err = pp.copyN(rh.contentLength)
		}
		if err != nil {
			bc.conn.Close()
			// When the front closed bc, the client left after the head (nginx too logs
			// the status it sent then).
			lc.settle(bc)
			var re readError
			if errors.As(err, &re) {
				lc.f.p.cfg.Logger.Warn("backend answer cut short", "backend", x.backend.Name(), "endpoint", x.endpoint, "err", err)
			}
			// The client saw a head and part of a body: only closing tells it the answer
			// is incomplete.
			return false
		}
		if !lc.settle(bc) {
			// The front closed bc as the answer ended: the client left.
			return false
		}
		if rh.close || untilClose || bc.br.Buffered() > 0 {
			bc.conn.Close()
		} else {
			t.put(x.endpoint, bc)
		}
		if lc.br.Buffered() == 0 || rq.close {
			// Nothing pipelined behind: the client gets its answer now.
			if lc.bw.Flush() != nil {
				return false
			}
		}
		return !rq.close
	}
}

// responseHead is a parsed answer head; size is its length in the backend buffer.
type responseHead struct {
	status        int
	statusLine    []byte // after the version, with its CRLF
	contentLength int64
	chunked       bool
	close         bool
	size          int
}

var (
	errRespHead         = errors.New("malformed answer head")
	errRespHeadTooLarge = fmt.Errorf("answer head larger than %d bytes", respHeadMax)
)

func (lc *leanConn) readResponseHead(bc *backendConn, rh *responseHead) error {
	var buf []byte
	for n := 1; ; {
		b, err := bc.br.Peek(n)
		if errors.Is(err, bufio.ErrBufferFull) {
			if bc.br.Size() >= respHeadMax {
				return errRespHeadTooLarge
			}
			// A large head (cookies, say): read it in a larger buffer, which the
			// connection keeps.
			kept := append([]byte(nil), b...)
			bc.br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(kept), bc.conn), respHeadMax)
			continue
		}
		if err != nil {
			return err
		}
		buf, _ = bc.br.Peek(bc.br.Buffered())
		if i := bytes.Index(buf, crlfcrlf); i >= 0 {
			buf = buf[:i+4]
			break
		}
		n = len(buf) + 1
	}
	*rh = responseHead{size: len(buf), contentLength: -1}
	i := bytes.Index(buf, crlf)
	line := buf[:i]
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
		return fmt.Errorf("%w: status line %q", errRespHead, line)
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil || code < 100 {
		return fmt.Errorf("%w: status line %q", errRespHead, line)
	}
	rh.status = code
	rh.statusLine = buf[9 : i+2]
	if code == http.StatusSwitchingProtocols {
		return errors.New("101 Switching Protocols to a request without Upgrade")
	}
	var ok bool
	if lc.resp, ok = parseFields(buf[i+2:len(buf)-2], lc.resp[:0]); !ok {
		return fmt.Errorf("%w: header lines", errRespHead)
	}
	rh.close = line[7] == '0' // HTTP/1.0: no keep-alive assumed
	for _, fl := range lc.resp {
		switch {
		case bytes.EqualFold(fl.name, hdrContentLength):
			n := parseLength(fl.value)
			if n < 0 || (rh.contentLength >= 0 && n != rh.contentLength) {
				return fmt.Errorf("%w: Content-Length %q", errRespHead, fl.value)
			}
			rh.contentLength = n
		case bytes.EqualFold(fl.name, hdrTransferEncoding):
			if !bytes.EqualFold(fl.value, valChunked) {
				return fmt.Errorf("%w: Transfer-Encoding %q", errRespHead, fl.value)
			}
			rh.chunked = true
		case bytes.EqualFold(fl.name, hdrConnection):
			for _, t := range bytes.Split(fl.value, comma) {
				if bytes.EqualFold(bytes.TrimSpace(t), valClose) {
					rh.close = true
				}
			}
		}
	}
	if rh.chunked {
		rh.contentLength = -1
	}
	return nil
}

// writeResponseHead writes the answer's head to the client without its hop-by-hop
// headers and with the framing the lean path sends the body in. rq is nil for a 1xx.
func (lc *leanConn) writeResponseHead(rh *responseHead, rq *request, chunk bool) {
	w := lc.bw
	_, _ = w.WriteString("HTTP/1.1 ")
	_, _ = w.Write(rh.statusLine)
	var tokens [][]byte
	for _, fl := range lc.resp {
		if bytes.EqualFold(fl.name, hdrConnection) {
			tokens = appendTokens(tokens, fl.value)
		}
	}
	for _, fl := range lc.resp {
		switch {
		case hopByHop(fl.name) && !(rh.chunked && bytes.EqualFold(fl.name, hdrTrailer)), named(tokens, fl.name),
			rh.chunked && bytes.EqualFold(fl.name, hdrContentLength):
			continue
		}
		writeField(w, fl.name, fl.value)
	}
	if rq != nil {
		if rh.chunked || chunk {
			_, _ = w.WriteString("Transfer-Encoding: chunked\r\n")
		}
		if rq.close {
			_, _ = w.WriteString("Connection: close\r\n")
		}
	}
	_, _ = w.Write(crlf)
}

// page answers with one of our pages; false when the connection must be closed: when
// the request's body was not read and is not all buffered (it is then discarded).
func (lc *leanConn) page(rq *request, x *exchange, code int, msg string) bool {
	if rq.headLen > 0 {
		_, _ = lc.br.Discard(rq.headLen)
		rq.headLen = 0
	}
	if !rq.bodyDone && !rq.bodyStarted && !rq.chunked && rq.contentLength <= int64(lc.br.Buffered()) {
		_, _ = lc.br.Discard(int(max(rq.contentLength, 0)))
		rq.bodyDone = true
	}
	if !rq.bodyDone {
		rq.close = true
	}
	x.status = code
	body := pageBody(code, msg)
	w := lc.bw
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/html; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nDate: %s\r\nContent-Length: %d\r\n",
		code, http.StatusText(code), time.Now().UTC().Format(http.TimeFormat), len(body))
	if rq.close {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	_, _ = w.Write(crlf)
	if x.method != http.MethodHead {
		_, _ = w.WriteString(body)
		x.bytes = int64(len(body))
	}
	if rq.close || lc.br.Buffered() == 0 {
		if w.Flush() != nil {
			return false
		}
	}
	return !rq.close
}

// str returns b as a string, reusing *last when it has the same bytes.
func (lc *leanConn) str(last *string, b []byte) string {
	if string(b) != *last {
		*last = string(b)
	}
	return *last
}

// methodString returns the method without allocating for the common ones.
func methodString(m []byte) string {
	switch string(m) {
	case http.MethodGet:
		return http.MethodGet
	case http.MethodPost:
		return http.MethodPost
	case http.MethodHead:
		return http.MethodHead
	case http.MethodPut:
		return http.MethodPut
	case http.MethodDelete:
		return http.MethodDelete
	case http.MethodPatch:
		return http.MethodPatch
	case http.MethodOptions:
		return http.MethodOptions
	}
	return string(m)
}

var (
	hdrHost             = []byte("Host")
	hdrContentLength    = []byte("Content-Length")
	hdrTransferEncoding = []byte("Transfer-Encoding")
	hdrUpgrade          = []byte("Upgrade")
	hdrExpect           = []byte("Expect")
	hdrConnection       = []byte("Connection")
	hdrTE               = []byte("Te")
	hdrTrailer          = []byte("Trailer")
	hdrXFF              = []byte("X-Forwarded-For")
	hdrXFHost           = []byte("X-Forwarded-Host")
	hdrXFProto          = []byte("X-Forwarded-Proto")
	valChunked          = []byte("chunked")
	valClose            = []byte("close")
	valTrailers         = []byte("trailers")
	comma               = []byte(",")
)

// hopByHop reports the headers that concern one connection only (RFC 9110 7.6.1, and
// the ones net/http's reverse proxy also removes).
func hopByHop(name []byte) bool {
	switch len(name) {
	case 2:
		return bytes.EqualFold(name, hdrTE)
	case 7:
		return bytes.EqualFold(name, hdrUpgrade) || bytes.EqualFold(name, hdrTrailer)
	case 10:
		return bytes.EqualFold(name, hdrConnection) || bytes.EqualFold(name, []byte("Keep-Alive"))
	case 16:
		return bytes.EqualFold(name, []byte("Proxy-Connection"))
	case 17:
		return bytes.EqualFold(name, hdrTransferEncoding)
	case 18:
		return bytes.EqualFold(name, []byte("Proxy-Authenticate"))
	case 19:
		return bytes.EqualFold(name, []byte("Proxy-Authorization"))
	}
	return false
}

// named reports whether a Connection header listed name.
func named(tokens [][]byte, name []byte) bool {
	for _, t := range tokens {
		if bytes.EqualFold(t, name) {
			return true
		}
	}
	return false
}

func appendTokens(dst [][]byte, v []byte) [][]byte {
	for len(v) > 0 {
		var t []byte
		t, v, _ = bytes.Cut(v, comma)
		if t = bytes.TrimSpace(t); len(t) > 0 {
			dst = append(dst, t)
		}
	}
	return dst
}

// parseFields parses header lines, each ending in CRLF. It refuses what net/http
// refuses or treats specially: a bare LF, obsolete line folding, a name that is not a
// token, a value with control characters.
func parseFields(b []byte, dst []field) ([]field, bool) {
	for len(b) > 0 {
		i := bytes.Index(b, crlf)
		if i < 0 {
			return dst, false
		}
		line := b[:i]
		b = b[i+2:]
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !validToken(line[:colon]) {
			return dst, false
		}
		v := bytes.Trim(line[colon+1:], " \t")
		for _, c := range v {
			if (c < ' ' && c != '\t') || c == 0x7f {
				return dst, false
			}
		}
		dst = append(dst, field{name: line[:colon], value: v})
	}
	return dst, true
}

// validToken reports whether b is an RFC 9110 token.
func validToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c >= 0x80 || !tokenChars[c] {
			return false
		}
	}
	return true
}

var tokenChars = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// parseLength parses a Content-Length value; -1 when it is not a plain decimal number.
func parseLength(v []byte) int64 {
	if len(v) == 0 || len(v) > 18 {
		return -1
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// pipe copies a body from src to dst, flushing dst whenever src has nothing more
// buffered, so what arrived reaches the other side before the copy waits for more.
type pipe struct {
	dst *bufio.Writer
	src *bufio.Reader
	// pool, when set, lends the buffer large bodies are copied through.
	pool *bufferPool
}

// bigCopy is the length from which a body is copied through a pooled buffer.
const bigCopy = 16 << 10

// readError and writeError tell which side of a pipe failed.
type readError struct{ error }
type writeError struct{ error }

func (e readError) Unwrap() error  { return e.error }
func (e writeError) Unwrap() error { return e.error }

// fill waits until src has at least one byte buffered.
func (pp pipe) fill() error {
	if pp.src.Buffered() > 0 {
		return nil
	}
	if err := pp.dst.Flush(); err != nil {
		return writeError{err}
	}
	if _, err := pp.src.Peek(1); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return readError{err}
	}
	return nil
}

// copyN copies n bytes.
func (pp pipe) copyN(n int64) (int64, error) {
	var done int64
	var big []byte
	defer func() {
		if big != nil {
			pp.pool.Put(big)
		}
	}()
	for done < n {
		if pp.src.Buffered() == 0 && n-done >= bigCopy && pp.pool != nil {
			// A large body: read and write it in 32 kB pieces, past both small buffers,
			// rather than in pieces of their size.
			if err := pp.dst.Flush(); err != nil {
				return done, writeError{err}
			}
			if big == nil {
				big = pp.pool.Get()
			}
			m, err := pp.src.Read(big[:min(int64(len(big)), n-done)])
			if _, werr := pp.dst.Write(big[:m]); werr != nil {
				return done, writeError{werr}
			}
			done += int64(m)
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return done, readError{err}
			}
			continue
		}
		if err := pp.fill(); err != nil {
			return done, err
		}
		b, _ := pp.src.Peek(int(min(int64(pp.src.Buffered()), n-done)))
		if _, err := pp.dst.Write(b); err != nil {
			return done, writeError{err}
		}
		_, _ = pp.src.Discard(len(b))
		done += int64(len(b))
	}
	return done, nil
}

// line copies one line (a chunk size or a trailer) and returns it.
func (pp pipe) line() ([]byte, error) {
	if err := pp.fill(); err != nil {
		return nil, err
	}
	l, err := pp.src.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, readError{err}
	}
	if len(l) < 2 || l[len(l)-2] != '\r' {
		return nil, readError{errors.New("chunked body: line without CRLF")}
	}
	if _, err := pp.dst.Write(l); err != nil {
		return nil, writeError{err}
	}
	return l, nil
}

// chunked copies a chunked body as it is, trailers included, checking its framing;
// the data is at most limit bytes (0: no limit), else an *http.MaxBytesError.
func (pp pipe) chunked(limit int64) (int64, error) {
	var total int64
	for {
		l, err := pp.line()
		if err != nil {
			return total, err
		}
		size, ok := chunkSize(l)
		if !ok {
			return total, readError{fmt.Errorf("chunked body: bad chunk size line %q", l)}
		}
		if size == 0 {
			for {
				l, err := pp.line()
				if err != nil {
					return total, err
				}
				if len(l) == 2 {
					return total, nil
				}
				if _, ok := parseFields(l, nil); !ok {
					return total, readError{fmt.Errorf("chunked body: bad trailer line %q", l)}
				}
			}
		}
		if total += size; limit > 0 && total > limit {
			return total, &http.MaxBytesError{Limit: limit}
		}
		if _, err := pp.copyN(size); err != nil {
			return total, err
		}
		if l, err := pp.line(); err != nil {
			return total, err
		} else if len(l) != 2 {
			return total, readError{errors.New("chunked body: chunk data longer than its size")}
		}
	}
}

// chunkSize parses a chunk-size line (hex digits, maybe extensions, CRLF). Control
// characters are refused anywhere in it: the line goes on to the backend as it is.
func chunkSize(l []byte) (int64, bool) {
	l = l[:len(l)-2]
	for _, c := range l {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return 0, false
		}
	}
	if i := bytes.IndexByte(l, ';'); i >= 0 {
		l = l[:i]
	}
	l = bytes.TrimRight(l, " \t")
	if len(l) == 0 || len(l) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range l {
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | int64(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | int64(c-'a'+10)
		case c >= 'A' && c <= 'F':
			n = n<<4 | int64(c-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

// chunkUntilEOF sends a body that ends when the backend closes as chunks.
func (pp pipe) chunkUntilEOF() (int64, error) {
	var total int64
	for {
		if err := pp.fill(); err != nil {
			var re readError
			if errors.As(err, &re) && errors.Is(re.error, io.ErrUnexpectedEOF) {
				if _, err := pp.dst.WriteString("0\r\n\r\n"); err != nil {
					return total, writeError{err}
				}
				return total, nil
			}
			return total, err
		}
		b, _ := pp.src.Peek(pp.src.Buffered())
		fmt.Fprintf(pp.dst, "%x\r\n", len(b))
		_, _ = pp.dst.Write(b)
		if _, err := pp.dst.Write(crlf); err != nil {
			return total, writeError{err}
		}
		_, _ = pp.src.Discard(len(b))
		total += int64(len(b))
	}
}

// prefixConn is a connection handed to net/http: reads start with what the lean path
// buffered. tls marks a TLS connection, which net/http no longer sees as one.
type prefixConn struct {
	net.Conn
	r   *bufio.Reader
	tls bool
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// connListener is the listener net/http's server accepts handed-off connections from.
type connListener struct {
	addr   net.Addr
	conns  chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newConnListener(addr net.Addr) *connListener {
	return &connListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// push hands c over; false (c closed) once the listener is closed.
func (l *connListener) push(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		c.Close()
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }
