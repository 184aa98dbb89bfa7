package stream

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	gwebsocket "github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
)

// spdyHeaderLen is the length of every SPDY/3 frame header (control and data frames
// alike); its last three bytes are the length of the frame's payload.
const spdyHeaderLen = 8

// frameConn makes each SPDY frame one write unit of the connection below. spdystream
// writes a data frame as three writes (stream id, flags and length, payload), each of
// which would otherwise become its own TLS record and system call, or its own
// WebSocket message when SPDY is tunnelled. frameConn follows the frame headers it is
// given to know where frames end; spdystream writes whole frames one at a time (under
// its write lock), which is all it relies on.
type frameConn struct {
	net.Conn
	// begin starts a write unit, whose Close ends (flushes) it.
	begin func() (io.WriteCloser, error)

	mu    sync.Mutex
	cur   io.WriteCloser
	head  [spdyHeaderLen]byte
	nhead int
	// left is what remains of the current frame's payload; 0 while in a header.
	left int
}

func (c *frameConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for len(p) > 0 {
		if c.cur == nil {
			w, err := c.begin()
			if err != nil {
				return n, err
			}
			c.cur = w
		}
		var k int
		if c.left == 0 {
			k = min(spdyHeaderLen-c.nhead, len(p))
			copy(c.head[c.nhead:], p[:k])
			c.nhead += k
		} else {
			k = min(c.left, len(p))
			c.left -= k
		}
		if _, err := c.cur.Write(p[:k]); err != nil {
			return n, err
		}
		n += k
		p = p[k:]
		if c.left == 0 && c.nhead == spdyHeaderLen {
			c.nhead = 0
			c.left = int(binary.BigEndian.Uint32(c.head[4:]) & 0xffffff)
		}
		if c.left == 0 && c.nhead == 0 {
			err := c.cur.Close()
			c.cur = nil
			if err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// flushCloser ends a write unit of a plain connection: a flush of its buffer.
type flushCloser struct{ *bufio.Writer }

func (f flushCloser) Close() error { return f.Flush() }

// bufferedFrames is a frameConn over a plain (TLS) connection: a frame's pieces are
// gathered in a buffer and written together.
func bufferedFrames(c net.Conn) *frameConn {
	bw := flushCloser{bufio.NewWriterSize(c, copyBuffer+spdyHeaderLen)}
	return &frameConn{Conn: c, begin: func() (io.WriteCloser, error) { return bw, nil }}
}

// websocketFrames is a frameConn over a SPDY-in-WebSocket tunnel: one binary message
// per SPDY frame. tunnel reads and closes; ws is its WebSocket, written here only.
func websocketFrames(tunnel net.Conn, ws *gwebsocket.Conn) *frameConn {
	return &frameConn{Conn: tunnel, begin: func() (io.WriteCloser, error) { return ws.NextWriter(gwebsocket.BinaryMessage) }}
}

// upgradeSPDY answers a SPDY upgrade (101, then SPDY/3.1 on the hijacked connection)
// and starts the SPDY server connection on it, its writes framed by bufferedFrames.
// nil means the response was written (an error).
func upgradeSPDY(w http.ResponseWriter, r *http.Request, newStream httpstream.NewStreamHandler) httpstream.Connection {
	if !strings.Contains(strings.ToLower(r.Header.Get(httpstream.HeaderConnection)), "upgrade") ||
		!strings.Contains(strings.ToLower(r.Header.Get(httpstream.HeaderUpgrade)), "spdy/3.1") {
		badRequest(w, "unable to upgrade: the request asks for no SPDY/3.1 upgrade (Connection: %q, Upgrade: %q)",
			r.Header.Get(httpstream.HeaderConnection), r.Header.Get(httpstream.HeaderUpgrade))
		return nil
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "unable to upgrade: the connection cannot be taken over", http.StatusInternalServerError)
		return nil
	}
	w.Header().Add(httpstream.HeaderConnection, httpstream.HeaderUpgrade)
	w.Header().Add(httpstream.HeaderUpgrade, "SPDY/3.1")
	w.WriteHeader(http.StatusSwitchingProtocols)
	raw, brw, err := hj.Hijack()
	if err != nil {
		return nil
	}
	conn, err := spdy.NewServerConnection(bufferedFrames(&bufferedConn{Conn: batchTLS(raw), r: brw.Reader}), newStream)
	if err != nil {
		raw.Close()
		return nil
	}
	return conn
}

// bufferedConn reads what the HTTP server had already buffered before the connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(p)
		}
		c.r = nil
	}
	return c.Conn.Read(p)
}
