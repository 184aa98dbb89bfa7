package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ncOptions are the netcat flags the e2e tests use, as OpenBSD's netcat (the
// netcat-openbsd package of upstream's agnhost image) spells them:
// nc [-46NntuvzD] [-w timeout] [-q seconds] [-W recvlimit] [-p source_port]
// [-s source] destination port.
type ncOptions struct {
	network string        // "tcp" or "udp" (-u)
	family  string        // "", "4" (-4) or "6" (-6)
	verbose bool          // -v: report the connection on stderr
	zero    bool          // -z: connect, then close without sending
	halfEOF bool          // -N: shut the socket's write side down at the end of stdin
	wait    time.Duration // -w: connect timeout and idle timeout; 0 means none
	quit    time.Duration // -q: quit this long after the end of stdin; <0 means never
	recvMax int           // -W: quit after receiving this many packets; 0 means no limit
	srcPort string        // -p
	srcAddr string        // -s
	host    string
	port    string
}

// ncUsage is printed, as OpenBSD's netcat does, for arguments it cannot parse.
const ncUsage = "usage: nc [-46DNntuvz] [-p source_port] [-q seconds] [-s source] [-W recvlimit] [-w timeout] destination port\n"

// parseNC parses netcat's command line (getopt style: -uv, -w2 and -w 2 alike).
func parseNC(args []string) (*ncOptions, error) {
	o := &ncOptions{network: "tcp", quit: -1}
	var rest []string
	withValue := "wqWps"
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			if strings.IndexByte(withValue, c) >= 0 {
				v := a[j+1:]
				if v == "" {
					i++
					if i >= len(args) {
						return nil, fmt.Errorf("option requires an argument -- %c", c)
					}
					v = args[i]
				}
				if err := o.setValue(c, v); err != nil {
					return nil, err
				}
				break
			}
			switch c {
			case '4', '6':
				o.family = string(c)
			case 'u':
				o.network = "udp"
			case 't':
				o.network = "tcp" // TELNET negotiation, which no test server speaks
			case 'v':
				o.verbose = true
			case 'z':
				o.zero = true
			case 'N':
				o.halfEOF = true
			case 'n', 'D':
				// -n: addresses are numeric anyway when they are; -D: socket debugging.
			case 'l':
				return nil, errors.New("listen mode (-l) is not in tranche's nc; agnhost netexec or porter serve ports")
			default:
				return nil, fmt.Errorf("invalid option -- %c", c)
			}
		}
	}
	if len(rest) != 2 {
		return nil, errors.New("destination and port are required")
	}
	o.host, o.port = rest[0], rest[1]
	if _, err := strconv.ParseUint(o.port, 10, 16); err != nil {
		return nil, fmt.Errorf("port number invalid: %s", o.port)
	}
	return o, nil
}

func (o *ncOptions) setValue(c byte, v string) error {
	n, err := strconv.Atoi(v)
	switch c {
	case 'w':
		if err != nil || n < 0 {
			return fmt.Errorf("timeout %s: invalid", v)
		}
		o.wait = time.Duration(n) * time.Second
	case 'q':
		if err != nil {
			return fmt.Errorf("quit timer %s: invalid", v)
		}
		o.quit = time.Duration(n) * time.Second
	case 'W':
		if err != nil || n < 1 {
			return fmt.Errorf("receive limit %s: invalid", v)
		}
		o.recvMax = n
	case 'p':
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port number invalid: %s", v)
		}
		o.srcPort = v
	case 's':
		o.srcAddr = v
	}
	return nil
}

// ncMain runs `nc ARGS...`: the client side of OpenBSD's netcat, which the agnhost image
// of the e2e tests carries and they run as `echo hostName | nc -v -t -w 2 HOST PORT` or
// `nc -w 1 -u IP PORT`: it connects, copies stdin to the connection and what comes back
// to stdout, and ends when the peer closes, when nothing moved either way for -w
// seconds, or when -q, -W or -z say so. A failed connection is a warning on stderr and
// exit status 1; -v reports a successful one on stderr.
func ncMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o, err := parseNC(args)
	if err != nil {
		fmt.Fprintf(stderr, "nc: %v\n%s", err, ncUsage)
		return 1
	}
	network := o.network + o.family
	d := net.Dialer{Timeout: o.wait}
	if o.srcAddr != "" || o.srcPort != "" {
		port := o.srcPort
		if port == "" {
			port = "0"
		}
		local := net.JoinHostPort(o.srcAddr, port)
		if o.network == "udp" {
			d.LocalAddr, err = net.ResolveUDPAddr(network, local)
		} else {
			d.LocalAddr, err = net.ResolveTCPAddr(network, local)
		}
		if err != nil {
			fmt.Fprintf(stderr, "nc: %v\n", err)
			return 1
		}
	}
	conn, err := d.DialContext(ctx, network, net.JoinHostPort(o.host, o.port))
	if err != nil {
		fmt.Fprintf(stderr, "nc: connect to %s port %s (%s) failed: %s\n", o.host, o.port, o.network, dialReason(err))
		return 1
	}
	defer conn.Close()
	if o.zero && o.network == "udp" {
		// As OpenBSD's udptest: a few probe bytes, so that a closed port shows as a
		// refused write or read (ICMP port unreachable) before success is reported.
		if err := udpProbe(conn); err != nil {
			fmt.Fprintf(stderr, "nc: connect to %s port %s (udp) failed: %s\n", o.host, o.port, dialReason(err))
			return 1
		}
	}
	if o.verbose {
		fmt.Fprintf(stderr, "Connection to %s %s port [%s/*] succeeded!\n", o.host, o.port, o.network)
	}
	if o.zero {
		return 0
	}
	return ncCopy(ctx, conn, o, stdin, stdout, stderr)
}

// udpProbe writes probe datagrams and waits briefly for an ICMP error to surface.
func udpProbe(conn net.Conn) error {
	for range 3 {
		if _, err := conn.Write([]byte("X")); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// dialReason is the system's wording of why a connection failed, as netcat prints it.
func dialReason(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		s := errno.Error()
		return strings.ToUpper(s[:1]) + s[1:]
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "Operation timed out"
	}
	return err.Error()
}

// ncCopy moves data both ways until the connection's read side ends (peer closed, -W
// packets received, -q after stdin's end) or, with -w, nothing moved for that long.
func ncCopy(ctx context.Context, conn net.Conn, o *ncOptions, stdin io.Reader, stdout, stderr io.Writer) int {
	// mu guards last (the latest data either way), ending (ctx cancelled or -q
	// elapsed: the copy ends at the next timeout) and the read deadline, so that an
	// ending is never overwritten by a later idle deadline.
	var (
		mu     sync.Mutex
		last   = time.Now()
		ending bool
	)
	touch := func() {
		mu.Lock()
		last = time.Now()
		mu.Unlock()
	}
	end := func() {
		mu.Lock()
		ending = true
		conn.SetReadDeadline(time.Now())
		mu.Unlock()
	}
	// arm sets the read deadline and reports whether the copy is to end.
	arm := func() bool {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case ending:
			return true
		case o.wait > 0:
			if time.Since(last) >= o.wait {
				return true
			}
			conn.SetReadDeadline(last.Add(o.wait))
		}
		return false
	}
	done := make(chan struct{})
	defer close(done)
	stop := context.AfterFunc(ctx, end)
	defer stop()

	go func() {
		buf := make([]byte, 16<<10)
		for {
			n, err := stdin.Read(buf)
			if n > 0 {
				touch()
				if _, werr := conn.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				break
			}
		}
		if o.halfEOF {
			if cw, ok := conn.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
		}
		if o.quit >= 0 {
			select {
			case <-time.After(o.quit):
				end()
			case <-done:
			}
		}
	}()

	buf := make([]byte, 64<<10)
	packets := 0
	for {
		if arm() {
			// Idle for -w, -q after stdin's end, or ctx cancelled: all end quietly,
			// as netcat's poll loop returns.
			return 0
		}
		n, err := conn.Read(buf)
		if n > 0 {
			touch()
			if _, werr := stdout.Write(buf[:n]); werr != nil {
				return 1
			}
			packets++
			if o.recvMax > 0 && packets >= o.recvMax {
				return 0
			}
		}
		var ne net.Error
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			return 0
		case errors.As(err, &ne) && ne.Timeout():
			// arm decides: data sent since the deadline was set keeps it going.
		default:
			fmt.Fprintf(stderr, "nc: read: %s\n", dialReason(err))
			return 1
		}
	}
}
