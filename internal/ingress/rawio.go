package ingress

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A proxied exchange is four system calls on non-blocking sockets: read the request,
// write it to the backend, read the answer, write it to the client. Through net.Conn each
// is a blocking system call to Go's scheduler (entersyscall, exitsyscall): one that lasts
// longer than sysmon's 20 µs, as a loopback write often does on a busy machine (it runs
// the receiver's TCP processing and wakes it, and the writer is often preempted by the
// process it woke), has its P handed to another thread, woken for it, and the writer's
// thread then parks when the call returns: two futex wake-ups and context switches for
// nothing, since the call never waits. rawConn makes these calls with RawSyscall, which
// the scheduler does not see, and waits for readiness through the poller as net.Conn does
// (syscall.RawConn), deadlines and Close included.

// rawConn is a TCP connection whose Read and Write bypass the scheduler's system call
// accounting; everything else is the connection's.
type rawConn struct {
	net.Conn
	rc syscall.RawConn
	// rd and wr are the arguments and results of the read and the write in progress (a
	// read and a write may run at once, as net.Conn allows); readFn and writeFn are bound
	// once so that a call allocates no closure.
	rd, wr          rawCall
	readFn, writeFn func(fd uintptr) bool
}

// newRawConn wraps c when it is a TCP connection; other connections are returned as they
// are.
func newRawConn(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	r := &rawConn{Conn: c, rc: rc}
	r.readFn = r.read
	r.writeFn = r.write
	return r
}

// SyscallConn is the TCP connection's, for the client checks of abort.go.
func (r *rawConn) SyscallConn() (syscall.RawConn, error) { return r.rc, nil }

// rawCall is one Read or Write: its buffer, then what the system calls did.
type rawCall struct {
	buf   []byte
	n     int
	errno syscall.Errno
}

func (r *rawConn) read(fd uintptr) bool {
	c := &r.rd
	for {
		n, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(c.buf))), uintptr(len(c.buf)))
		switch errno {
		case unix.EINTR:
			// Not a wait: try again at once.
			continue
		case unix.EAGAIN:
			// Nothing to read yet: wait until the socket is readable.
			return false
		}
		c.n, c.errno = int(n), errno
		return true
	}
}

func (r *rawConn) write(fd uintptr) bool {
	c := &r.wr
	for len(c.buf) > 0 {
		n, _, errno := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(c.buf))), uintptr(len(c.buf)))
		switch errno {
		case 0:
			c.n += int(n)
			c.buf = c.buf[n:]
		case unix.EINTR:
		case unix.EAGAIN:
			// The socket's send buffer is full: wait until it is writable.
			return false
		default:
			c.errno = errno
			return true
		}
	}
	return true
}

// Read reads into b as net.Conn does: (0, io.EOF) at the end of the stream.
func (r *rawConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	r.rd = rawCall{buf: b}
	err := r.rc.Read(r.readFn)
	n, errno := r.rd.n, r.rd.errno
	r.rd.buf = nil
	switch {
	case err != nil:
		return 0, r.opError("read", err)
	case errno != 0:
		return 0, r.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of b, waiting for the socket to be writable as net.Conn does.
func (r *rawConn) Write(b []byte) (int, error) {
	r.wr = rawCall{buf: b}
	err := r.rc.Write(r.writeFn)
	n, errno := r.wr.n, r.wr.errno
	r.wr.buf = nil
	switch {
	case err != nil:
		return n, r.opError("write", err)
	case errno != 0:
		return n, r.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// opError wraps err as net.Conn's errors are, so that callers see the same errors
// (net.ErrClosed, os.ErrDeadlineExceeded, syscall.ECONNRESET) with the same addresses.
func (r *rawConn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		// RawConn's errors name its own operations ("raw-read"): the wrapped one is the
		// error to report.
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: r.LocalAddr(), Addr: r.RemoteAddr(), Err: err}
}
