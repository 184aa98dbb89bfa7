package shim

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// An attach session is an HTTP request upgraded to a stream of frames both ways: a
// type byte, a 4-byte big-endian length and that many bytes.
const (
	frameStdin    byte = 0 // client to shim: input for the container
	frameStdout   byte = 1 // shim to client
	frameStderr   byte = 2 // shim to client
	frameResize   byte = 3 // client to shim: width and height, 2 bytes each
	frameStdinEOF byte = 4 // client to shim: the client's input ended
	frameEnd      byte = 5 // shim to client: the container exited or the session ended
)

// maxFrame bounds a frame a reader accepts.
const maxFrame = 1 << 20

// upgradeProto names the protocol of the upgraded connection.
const upgradeProto = "tranche-attach"

// frameWriter writes frames from several goroutines.
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (f *frameWriter) frame(typ byte, p []byte) error {
	var hdr [5]byte
	hdr[0] = typ
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(p)))
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := f.w.Write(p)
	return err
}

// stream is an io.Writer sending each write as one frame of typ.
type stream struct {
	f   *frameWriter
	typ byte
}

func (s stream) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		n := min(len(rest), maxFrame)
		if err := s.f.frame(s.typ, rest[:n]); err != nil {
			return 0, err
		}
		rest = rest[n:]
	}
	return len(p), nil
}

// readFrame reads one frame.
func readFrame(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("attach frame of %d bytes", n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	return hdr[0], p, nil
}

// handleAttach connects a client to a running container's stdio until the container
// exits or the client leaves: what the container writes from now on (and, for the
// first client of a stdinOnce container, what it wrote before), input when asked for
// and the container has stdin, terminal sizes for a terminal.
func (s *Server) handleAttach(w http.ResponseWriter, r *http.Request) {
	c := s.get(r.PathValue("id"))
	if c == nil {
		writeJSON(w, http.StatusNotFound, errorBody{"no container " + r.PathValue("id")})
		return
	}
	select {
	case <-c.done:
		writeJSON(w, http.StatusNotFound, errorBody{"container " + c.ID + " has exited"})
		return
	default:
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, errorBody{"cannot upgrade the connection"})
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + upgradeProto + "\r\n\r\n")
	if err := brw.Flush(); err != nil {
		return
	}
	q := r.URL.Query()
	fw := &frameWriter{w: conn}
	var stdout, stderr io.Writer
	if q.Get("stdout") == "1" {
		stdout = stream{fw, frameStdout}
	}
	if q.Get("stderr") == "1" && !c.con.tty {
		stderr = stream{fw, frameStderr}
	}
	a := c.con.attach(stdout, stderr)
	defer c.con.detach(a)
	inR, inW := io.Pipe()
	defer inW.Close()
	if q.Get("stdin") == "1" && c.con.input != nil {
		go c.con.feed(inR)
	}
	left := make(chan struct{})
	go func() {
		defer close(left)
		defer inW.Close()
		for {
			typ, p, err := readFrame(brw.Reader)
			if err != nil {
				return
			}
			switch typ {
			case frameStdin:
				if _, err := inW.Write(p); err != nil {
					return
				}
			case frameStdinEOF:
				inW.Close()
			case frameResize:
				if len(p) == 4 && c.con.master != nil {
					SetWinsize(c.con.master, binary.BigEndian.Uint16(p[:2]), binary.BigEndian.Uint16(p[2:]))
				}
			}
		}
	}()
	select {
	case <-c.done:
	case <-a.failed:
	case <-left:
	}
	_ = fw.frame(frameEnd, nil)
}

// ErrNotFound is wrapped by the errors about a container the shim does not run (or
// no longer: it exited and was forgotten, or the shim was restarted).
var ErrNotFound = errors.New("no such container in the shim")

// attachClient runs the client side of an attach session on an upgraded connection.
func attachClient(rw io.ReadWriter, stdin io.Reader, stdout, stderr io.Writer, resize <-chan [2]uint16, done <-chan struct{}) error {
	fw := &frameWriter{w: rw}
	if stdin != nil {
		go func() {
			_, _ = io.Copy(stream{fw, frameStdin}, stdin)
			_ = fw.frame(frameStdinEOF, nil)
		}()
	}
	if resize != nil {
		go func() {
			for {
				select {
				case <-done:
					return
				case sz, ok := <-resize:
					if !ok {
						return
					}
					var p [4]byte
					binary.BigEndian.PutUint16(p[:2], sz[0])
					binary.BigEndian.PutUint16(p[2:], sz[1])
					if fw.frame(frameResize, p[:]) != nil {
						return
					}
				}
			}
		}()
	}
	br := bufio.NewReader(rw)
	for {
		typ, p, err := readFrame(br)
		if err != nil {
			return err
		}
		switch typ {
		case frameStdout:
			if stdout != nil {
				_, _ = stdout.Write(p)
			}
		case frameStderr:
			if stderr != nil {
				_, _ = stderr.Write(p)
			}
		case frameEnd:
			return nil
		}
	}
}
