package publisher

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// dialFunc connects inside the cluster network.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// live is a listener the publisher holds: its socket, its current target and the
// connections (or UDP flows) it carries.
type live struct {
	listener Listener
	target   atomic.Pointer[Target]
	next     atomic.Uint32 // round-robin start among the backends
	dial     dialFunc
	log      *slog.Logger
	idle     time.Duration // UDP flows end after this long without traffic
	host     *Host         // told when the socket is closed

	ln net.Listener   // TCP
	pc net.PacketConn // UDP

	mu     sync.Mutex
	closed bool
	conns  map[io.Closer]struct{} // TCP connections (both ends) and UDP flows
	wg     sync.WaitGroup
}

// start serves the socket until close.
func (l *live) start() {
	l.conns = map[io.Closer]struct{}{}
	l.wg.Add(1)
	if l.ln != nil {
		go l.serveTCP()
	} else {
		go l.serveUDP()
	}
}

// close stops the listener at once and ends its connections; their goroutines finish
// on their own (a dial in progress cannot be interrupted), wait waits for them.
func (l *live) close() {
	l.mu.Lock()
	l.closed = true
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	if l.ln != nil {
		l.ln.Close()
	} else {
		l.pc.Close()
	}
	l.host.release(l.listener)
}

// wait waits until the goroutines of a closed listener have finished.
func (l *live) wait() { l.wg.Wait() }

// track records c so close ends it; it returns false (and closes c) once the listener
// is closing.
func (l *live) track(c io.Closer) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *live) untrack(c io.Closer) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// dialBackend connects to one of the target's backends, trying them in round-robin
// order until one answers.
func (l *live) dialBackend(ctx context.Context, t *Target, network string) (net.Conn, error) {
	if len(t.Backends) == 0 {
		return nil, errors.New("no backend: no ready node (or, with externalTrafficPolicy Local, no node with a ready endpoint)")
	}
	start := int(l.next.Add(1))
	var errs []error
	for i := range t.Backends {
		b := t.Backends[(start+i)%len(t.Backends)]
		c, err := l.dial(ctx, network, b.String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// clientAddr is the IP of a net.Addr, invalid when it has none.
func clientAddr(a net.Addr) netip.Addr {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr()
	}
	return netip.Addr{}
}

func (l *live) serveTCP() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait a little rather than spin.
			l.log.Warn("accept failed", "listener", l.listener, "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if !l.track(c) {
			continue
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer l.untrack(c)
			l.forwardTCP(c)
		}()
	}
}

// forwardTCP pipes one client connection to a backend, half-closing each direction
// when the other side finishes it.
func (l *live) forwardTCP(client net.Conn) {
	defer client.Close()
	t := l.target.Load()
	if !t.allowed(clientAddr(client.RemoteAddr())) {
		l.log.Debug("client outside loadBalancerSourceRanges", "listener", l.listener, "client", client.RemoteAddr())
		reset(client)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	backend, err := l.dialBackend(ctx, t, "tcp")
	cancel()
	if err != nil {
		// Per connection, so at debug level: a client retrying in a loop would flood
		// the log. The listener's Event says where its traffic goes.
		l.log.Debug("connection refused", "listener", l.listener, "service", t.Service.String(), "err", err)
		reset(client)
		return
	}
	if !l.track(backend) {
		return
	}
	defer l.untrack(backend)
	defer backend.Close()
	done := make(chan struct{})
	go func() {
		pipe(backend, client)
		close(done)
	}()
	pipe(client, backend)
	<-done
}

// pipe copies src to dst until EOF or an error, then half-closes dst for writing
// (or closes it when it cannot) so the peer sees the end.
func pipe(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
		_ = cw.CloseWrite()
		return
	}
	dst.Close()
	src.Close()
}

// reset closes c with an RST, so the client sees "connection reset" and not an empty
// answer.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// udpFlow is one client's datagrams to one backend.
type udpFlow struct {
	conn   net.Conn
	client net.Addr
	last   atomic.Int64 // unix nanoseconds of the last datagram either way
}

func (f *udpFlow) Close() error { return f.conn.Close() }

func (l *live) serveUDP() {
	defer l.wg.Done()
	flows := map[string]*udpFlow{}
	var mu sync.Mutex // flows, shared with the reply goroutines that remove theirs
	buf := make([]byte, 64*1024)
	for {
		n, from, err := l.pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			l.log.Warn("udp read failed", "listener", l.listener, "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		t := l.target.Load()
		if !t.allowed(clientAddr(from)) {
			continue
		}
		key := from.String()
		mu.Lock()
		f := flows[key]
		mu.Unlock()
		if f == nil {
			ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
			conn, err := l.dialBackend(ctx, t, "udp")
			cancel()
			if err != nil {
				l.log.Debug("udp datagram dropped", "listener", l.listener, "service", t.Service.String(), "err", err)
				continue
			}
			f = &udpFlow{conn: conn, client: from}
			if !l.track(f) {
				return
			}
			mu.Lock()
			flows[key] = f
			mu.Unlock()
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.replies(f)
				mu.Lock()
				delete(flows, key)
				mu.Unlock()
				l.untrack(f)
				f.Close()
			}()
		}
		f.last.Store(time.Now().UnixNano())
		if _, err := f.conn.Write(buf[:n]); err != nil {
			l.log.Debug("udp forward failed", "listener", l.listener, "err", err)
		}
	}
}

// replies sends the backend's datagrams back to the client until the flow has been
// idle for l.idle or is closed.
func (l *live) replies(f *udpFlow) {
	buf := make([]byte, 64*1024)
	for {
		deadline := time.Unix(0, f.last.Load()).Add(l.idle)
		if !time.Now().Before(deadline) {
			return
		}
		_ = f.conn.SetReadDeadline(deadline)
		n, err := f.conn.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue // re-check: traffic towards the backend may have renewed it
			}
			if !errors.Is(err, net.ErrClosed) {
				l.log.Debug("udp flow ended", "listener", l.listener, "err", err)
			}
			// A refused datagram (ICMP port unreachable) ends the flow too; the next
			// datagram of the client opens a new one, maybe to another backend.
			return
		}
		f.last.Store(time.Now().UnixNano())
		if _, err := l.pc.WriteTo(buf[:n], f.client); err != nil {
			l.log.Debug("udp reply failed", "listener", l.listener, "err", err)
		}
	}
}
