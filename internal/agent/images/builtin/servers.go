package builtin

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// udpBufferSize bounds one UDP request.
const udpBufferSize = 2048

// serveHTTP serves h on port until ctx is done.
func (s *Server) serveHTTP(ctx context.Context, port int, h http.Handler, stdout io.Writer) error {
	l, err := net.Listen("tcp", s.addr(port))
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.addr(port), err)
	}
	s.listened("tcp", l.Addr())
	_, _ = fmt.Fprintf(stdout, "Started HTTP server on port %d\n", l.Addr().(*net.TCPAddr).Port)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server on port %d: %w", port, err)
	}
	return nil
}

// serveUDP answers each datagram on port with reply(request, client); an empty answer
// sends nothing.
func (s *Server) serveUDP(ctx context.Context, port int, reply func(req string, from net.Addr) string, stdout io.Writer) error {
	conn, err := net.ListenPacket("udp", s.addr(port))
	if err != nil {
		return fmt.Errorf("listen on udp %s: %w", s.addr(port), err)
	}
	s.listened("udp", conn.LocalAddr())
	_, _ = fmt.Fprintf(stdout, "Started UDP server on port %d\n", conn.LocalAddr().(*net.UDPAddr).Port)
	go func() {
		<-ctx.Done()
		_ = conn.Close()
	}()
	buf := make([]byte, udpBufferSize)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("udp server on port %d: %w", port, err)
		}
		if answer := reply(string(buf[:n]), from); answer != "" {
			_, _ = conn.WriteTo([]byte(answer), from)
		}
	}
}

// portList is a repeatable port flag.
type portList []int

func (p *portList) String() string { return fmt.Sprint(*p) }

func (p *portList) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("invalid port %q", f)
		}
		*p = append(*p, n)
	}
	return nil
}

// httpMethods start a connection that the echo server answers as HTTP.
var httpMethods = []string{"GET ", "HEAD ", "POST ", "PUT ", "DELETE ", "OPTIONS ", "PATCH "}

// echoConn echoes a TCP connection, or answers it as HTTP when it starts like an HTTP
// request: a stand-in for an image tranche cannot run must still pass the HTTP probes
// and answer the curl of the seeds, saying which pod answered.
func (s *Server) echoConn(c net.Conn) {
	br := bufio.NewReader(c)
	// Look only at what the first read brought: waiting for more would stall a raw
	// client that sends fewer bytes and waits for their echo.
	if _, err := br.Peek(1); err != nil {
		return
	}
	head, _ := br.Peek(min(br.Buffered(), 8))
	isHTTP := false
	for _, m := range httpMethods {
		if strings.HasPrefix(string(head), m) {
			isHTTP = true
		}
	}
	if !isHTTP {
		_, _ = io.Copy(c, br)
		return
	}
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
		host, _ := s.hostname()
		body := fmt.Sprintf("%s %s from %s\n", req.Method, req.URL.RequestURI(), host)
		resp := &http.Response{StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1, Request: req,
			Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, ContentLength: int64(len(body)),
			Body: io.NopCloser(strings.NewReader(body))}
		if err := resp.Write(c); err != nil || req.Close {
			return
		}
	}
}

// echo echoes back whatever it receives: over TCP on every --port and over UDP on every
// --udp-port (both repeatable or comma-separated). It is what runs for an image tranche
// cannot run otherwise, on the container's declared ports; without ports it just waits.
func (s *Server) echo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	var tcpPorts, udpPorts portList
	fs.Var(&tcpPorts, "port", "TCP port to echo on (repeatable).")
	fs.Var(&udpPorts, "udp-port", "UDP port to echo on (repeatable).")
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	g := newGroup(ctx)
	for _, port := range tcpPorts {
		g.spawn(func(ctx context.Context) error {
			l, err := net.Listen("tcp", s.addr(port))
			if err != nil {
				return fmt.Errorf("listen on %s: %w", s.addr(port), err)
			}
			s.listened("tcp", l.Addr())
			_, _ = fmt.Fprintf(stdout, "Echoing TCP on port %d\n", l.Addr().(*net.TCPAddr).Port)
			go func() {
				<-ctx.Done()
				_ = l.Close()
			}()
			for {
				c, err := l.Accept()
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return fmt.Errorf("tcp echo on port %d: %w", port, err)
				}
				go func() {
					defer func() { _ = c.Close() }()
					stop := context.AfterFunc(ctx, func() { _ = c.Close() })
					defer stop()
					s.echoConn(c)
				}()
			}
		})
	}
	for _, port := range udpPorts {
		g.spawn(func(ctx context.Context) error {
			return s.serveUDP(ctx, port, func(req string, _ net.Addr) string { return req }, stdout)
		})
	}
	if len(tcpPorts)+len(udpPorts) == 0 {
		_, _ = fmt.Fprintln(stdout, "No ports to echo on: waiting")
	}
	return g.wait()
}
