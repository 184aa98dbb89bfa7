package stream

import (
	"bufio"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
)

// batchListener accepts batchConns: the raw connections under the endpoint's TLS.
type batchListener struct{ net.Listener }

func (l batchListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &batchConn{Conn: c}, nil
}

// batchConn is a raw connection under TLS whose writes can be held and sent together.
// tls.Conn writes each record (16 KiB at most) with its own system call, which wakes the
// reader at the other end each time; the records of one large write made between hold
// and release leave in one system call instead.
type batchConn struct {
	net.Conn

	mu   sync.Mutex
	held int
	buf  []byte
}

func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held > 0 {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *batchConn) hold() {
	c.mu.Lock()
	c.held++
	c.mu.Unlock()
}

// release ends a hold; the last one writes what was held.
func (c *batchConn) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held--
	if c.held > 0 || len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}

// batchedTLS is a TLS connection over a batchConn whose every write is one batch.
type batchedTLS struct {
	*tls.Conn
	raw *batchConn
}

func (c batchedTLS) Write(p []byte) (int, error) {
	c.raw.hold()
	n, err := c.Conn.Write(p)
	if rerr := c.raw.release(); err == nil && rerr != nil {
		return n, rerr
	}
	return n, err
}

// batchTLS batches the writes of c when it is TLS over a batchConn (the endpoint's
// own connections), and returns it unchanged otherwise (tests' plain HTTP).
func batchTLS(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		if raw, ok := tc.NetConn().(*batchConn); ok {
			return batchedTLS{Conn: tc, raw: raw}
		}
	}
	return c
}

// batchingWriter hands out batched connections when the response is hijacked (the
// WebSocket upgrader hijacks on its own).
type batchingWriter struct {
	http.ResponseWriter
}

func (w batchingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	return batchTLS(c), brw, nil
}
