package ingress

import (
	"errors"
	"math"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A client may leave while its request is in flight: a long poll it gave up on, a slow
// backend. While it waits for the backend, the lean path does not read the client's
// connection (a background read per request is the goroutine hand-off it exists to
// avoid), so it would only see the client gone at its next write, and the backend
// connection would stay busy until the backend answered. Each front therefore looks, every
// abortCheck, at the connections whose request has been in flight longer than that, with
// non-blocking system calls on the socket that read nothing; when the client is gone it
// closes the backend connection, which ends the exchange (the backend sees EOF, as nginx
// closes the upstream connection with proxy_ignore_client_abort off), and the request is
// logged and counted with nginx's status 499 when its answer had not begun (once the
// answer's head went out, it keeps that status, as in nginx's log). A quick exchange
// costs three atomic operations and is never looked at.

// statusClientClosed is the status nginx logs for a request whose client closed its
// connection before the answer began: 499, outside HTTP's codes, never sent.
const statusClientClosed = 499

// abortCheck is how often a front looks for clients that left; a client is seen gone
// within two of these.
const abortCheck = 100 * time.Millisecond

// errClientGone is send's error when the client left before the answer began.
var errClientGone = errors.New("the client closed its connection before the answer began")

// watch puts bc, the backend connection of a request sent whole, under the front's eye
// until settle. The client of a connection with a pipelined request already read is not
// checked: it was there when it sent that request, and net/http's server stops watching
// too once it has read a byte of the next request. A forced shutdown closes bc either way.
func (lc *leanConn) watch(bc *backendConn, since time.Time) {
	at := since.UnixNano()
	if lc.raw == nil || lc.br.Buffered() > 0 {
		at = math.MaxInt64
	}
	lc.since.Store(at)
	lc.inflight.Store(bc)
}

// settle takes bc back from the front's eye: false when the front took it first (the
// client left, or a shutdown could not wait longer) and closed it.
func (lc *leanConn) settle(bc *backendConn) bool {
	return lc.inflight.CompareAndSwap(bc, nil)
}

// abandon closes the backend connection of lc's request in flight, if any, which ends
// the exchange; the connection's goroutine sees it in settle.
func (lc *leanConn) abandon() {
	if bc := lc.inflight.Load(); bc != nil && lc.inflight.CompareAndSwap(bc, nil) {
		bc.conn.Close()
	}
}

// watch checks the front's connections every abortCheck until stop is closed.
func (f *front) watch(stop <-chan struct{}) {
	tick := time.NewTicker(abortCheck)
	defer tick.Stop()
	var busy []*leanConn
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			before := now.Add(-abortCheck).UnixNano()
			f.mu.Lock()
			for lc := range f.conns {
				if lc.inflight.Load() != nil && lc.since.Load() <= before {
					busy = append(busy, lc)
				}
			}
			f.mu.Unlock()
			for i, lc := range busy {
				f.check(lc)
				busy[i] = nil
			}
			busy = busy[:0]
		}
	}
}

// check closes the backend connection of lc's request in flight when its client is gone.
func (f *front) check(lc *leanConn) {
	if lc.inflight.Load() == nil {
		return
	}
	gone := clientGone(lc.raw, f.tls != nil)
	f.p.clientChecks.Add(1)
	if gone {
		lc.abandon()
	}
}

// clientGone reports whether the client of the TCP connection rc has closed it, or
// reset it, with no request pending: it polls the socket without waiting and peeks at
// what is unread. A client that shut its sending side after pipelining another request is
// still there (it waits for the answers), unless, over TLS, all that is unread is one
// record too short to hold a request: the close_notify alert sent before closing.
func clientGone(rc syscall.RawConn, isTLS bool) bool {
	gone := false
	err := rc.Control(func(fd uintptr) {
		pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
		if n, err := unix.Poll(pfd[:], 0); err != nil || n == 0 {
			return
		}
		ev := pfd[0].Revents
		if ev&(unix.POLLERR|unix.POLLHUP) != 0 {
			gone = true
			return
		}
		if ev&unix.POLLRDHUP == 0 {
			return
		}
		var b [64]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case err != nil:
			gone = !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR)
		case n == 0:
			gone = true
		case isTLS:
			gone = closingRecord(b[:n])
		}
	})
	return err == nil && gone
}

// closingRecord reports whether b, all that is unread on a TLS connection whose client
// shut its sending side, cannot hold another request: a TLS 1.2 alert record, or one
// TLS 1.3 record (alerts are encrypted there) of at most 40 bytes, less than the
// shortest request ("GET / HTTP/1.1\r\nHost: a\r\n\r\n", 27 bytes) with its record's
// overhead (17 bytes or more).
func closingRecord(b []byte) bool {
	const (
		alert           = 21
		applicationData = 23
	)
	if len(b) < 5 {
		return false
	}
	n := int(b[3])<<8 | int(b[4])
	return b[0] == alert || (b[0] == applicationData && len(b) == 5+n && n <= 40)
}
