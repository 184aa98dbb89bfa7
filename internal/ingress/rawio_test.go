package ingress

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// rawPair returns a rawConn and the other end of its loopback TCP connection, closed
// when the test ends.
func rawPair(t *testing.T) (*rawConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.Accept()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	rc, ok := newRawConn(c).(*rawConn)
	if !ok {
		t.Fatalf("newRawConn(%T) did not wrap it", c)
	}
	return rc, peer.(*net.TCPConn)
}

func TestRawConnCarriesBothWays(t *testing.T) {
	rc, peer := rawPair(t)
	// Larger than the socket buffers of both ends: the write waits for the reader
	// (EAGAIN, then the poller) before it is done.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<20)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(peer)
		got <- b
	}()
	n, err := rc.Write(big)
	if err != nil || n != len(big) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(big))
	}
	if err := rc.Conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("the peer read %d bytes, not the %d written", len(b), len(big))
	}
	go func() {
		_, _ = peer.Write(big)
		peer.Close()
	}()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	if !bytes.Equal(b, big) {
		t.Fatalf("read %d bytes, not the %d the peer wrote", len(b), len(big))
	}
}

func TestRawConnErrors(t *testing.T) {
	tests := []struct {
		name string
		// do acts on the pair, then reads or writes; want is the error it must give.
		do   func(rc *rawConn, peer *net.TCPConn) (int, error)
		want error
	}{{
		name: "peer closed: EOF",
		do: func(rc *rawConn, peer *net.TCPConn) (int, error) {
			peer.Close()
			return rc.Read(make([]byte, 16))
		},
		want: io.EOF,
	}, {
		name: "read deadline passed",
		do: func(rc *rawConn, _ *net.TCPConn) (int, error) {
			_ = rc.SetReadDeadline(time.Unix(1, 0))
			return rc.Read(make([]byte, 16))
		},
		want: os.ErrDeadlineExceeded,
	}, {
		name: "closed while reading",
		do: func(rc *rawConn, _ *net.TCPConn) (int, error) {
			go func() {
				// The read may start before or after the close: it fails either way.
				rc.Close()
			}()
			return rc.Read(make([]byte, 16))
		},
		want: net.ErrClosed,
	}, {
		name: "peer reset",
		do: func(rc *rawConn, peer *net.TCPConn) (int, error) {
			_ = peer.SetLinger(0)
			peer.Close()
			return rc.Read(make([]byte, 16))
		},
		want: syscall.ECONNRESET,
	}, {
		name: "write after close",
		do: func(rc *rawConn, _ *net.TCPConn) (int, error) {
			rc.Close()
			return rc.Write([]byte("x"))
		},
		want: net.ErrClosed,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc, peer := rawPair(t)
			n, err := tc.do(rc, peer)
			if n != 0 || !errors.Is(err, tc.want) {
				t.Fatalf("got %d, %v; want 0, %v", n, err, tc.want)
			}
			if tc.want != io.EOF {
				var oe *net.OpError
				if !errors.As(err, &oe) {
					t.Fatalf("error %v is not a *net.OpError as net.Conn's are", err)
				}
				if diff := cmp.Diff(rc.RemoteAddr().String(), oe.Addr.String()); diff != "" {
					t.Errorf("the error names another address (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestNewRawConnLeavesOtherConnections(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if c := newRawConn(a); c != a {
		t.Fatalf("newRawConn(net.Pipe) = %T, want the connection itself", c)
	}
}
