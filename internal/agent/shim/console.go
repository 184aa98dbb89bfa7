package shim

import (
	"io"
	"os"
	"sync"
	"time"
)

// console is a container instance's stdio as `kubectl attach` sees it. Output always
// goes to the instance's log; attached clients get a copy from the moment they attach.
// A container with tty gets a pseudo-terminal as its controlling terminal (it leads
// its own session); a container with stdin gets a pipe (or the terminal) that attached
// clients write into.
type console struct {
	tty, stdinOnce bool
	logOut, logErr io.Writer
	// master and slave are the pseudo-terminal of a tty container; the slave is closed
	// in the agent once the process has it.
	master, slave *os.File
	// stdinR is the child's end of a stdin pipe; input is where clients' input goes
	// (the pipe's other end, or the terminal), nil without stdin.
	stdinR *os.File
	input  io.Writer
	pump   sync.WaitGroup

	mu      sync.Mutex
	clients map[*attachment]bool
	fed     bool
	// early is the output of a stdinOnce container (`kubectl run -i`) written before
	// its first client attached, replayed to that client: a short command would
	// otherwise finish before kubectl attaches and show nothing, a race kubectl has
	// with every runtime. Kept up to earlyLimit bytes; nil once a client attached.
	early    []earlyChunk
	earlyLen int
	attached bool
}

// earlyChunk is output kept for the first attached client.
type earlyChunk struct {
	p      []byte
	stderr bool
}

// earlyLimit bounds the output kept for the first attached client.
const earlyLimit = 64 << 10

// attachment is one attached client.
type attachment struct {
	stdout, stderr io.Writer
	failed         chan struct{}
	once           sync.Once
}

func (a *attachment) fail() { a.once.Do(func() { close(a.failed) }) }

// newConsole prepares the stdio of a new container instance (with a terminal, with
// stdin, stdin closed after the first client's input), whose output is logged through
// logOut and logErr.
func newConsole(tty, stdin, stdinOnce bool, logOut, logErr io.Writer) (*console, error) {
	con := &console{tty: tty, stdinOnce: stdinOnce, logOut: logOut, logErr: logErr, clients: map[*attachment]bool{}}
	switch {
	case tty:
		master, slave, err := OpenPTY()
		if err != nil {
			return nil, err
		}
		con.master, con.slave = master, slave
		if stdin {
			con.input = master
		}
	case stdin:
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		con.stdinR, con.input = r, w
	}
	return con, nil
}

// stdio is the new instance's stdin, stdout and stderr for runc: the terminal's slave
// for a tty container (runc relays it to the container's own terminal), else the
// logging writers and the stdin pipe, if any.
func (con *console) stdio() (io.Reader, io.Writer, io.Writer) {
	if con.tty {
		return con.slave, con.slave, con.slave
	}
	var stdin io.Reader
	if con.stdinR != nil {
		stdin = con.stdinR
	}
	return stdin, &teeWriter{con: con, log: con.logOut, stderr: false}, &teeWriter{con: con, log: con.logErr, stderr: true}
}

// started closes the child's ends in the agent and starts copying terminal output.
func (con *console) started() {
	if con.stdinR != nil {
		con.stdinR.Close()
	}
	if con.slave != nil {
		con.slave.Close()
		con.pump.Go(func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := con.master.Read(buf)
				if n > 0 {
					con.write(buf[:n], false, con.logOut)
				}
				if err != nil {
					return
				}
			}
		})
	}
}

// abort releases everything when the process could not be started.
func (con *console) abort() {
	for _, f := range []*os.File{con.stdinR, con.slave, con.master} {
		if f != nil {
			f.Close()
		}
	}
	if c, ok := con.input.(io.Closer); ok {
		c.Close()
	}
}

// finish waits (briefly) for the terminal's last output after the process exited and
// closes the console; the log may be flushed afterwards.
func (con *console) finish() {
	if con.master != nil {
		done := make(chan struct{})
		go func() { con.pump.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			con.master.Close()
			<-done
		}
		con.master.Close()
	}
	if c, ok := con.input.(io.Closer); ok {
		c.Close()
	}
}

// write logs p and copies it to every attached client; a client that cannot take it
// is detached.
func (con *console) write(p []byte, stderr bool, log io.Writer) {
	_, _ = log.Write(p)
	con.mu.Lock()
	defer con.mu.Unlock()
	if con.stdinOnce && !con.attached && con.earlyLen+len(p) <= earlyLimit {
		con.early = append(con.early, earlyChunk{p: append([]byte(nil), p...), stderr: stderr})
		con.earlyLen += len(p)
	}
	for a := range con.clients {
		w := a.stdout
		if stderr {
			w = a.stderr
		}
		if w == nil {
			continue
		}
		if _, err := w.Write(p); err != nil {
			a.fail()
			delete(con.clients, a)
		}
	}
}

func (con *console) attach(stdout, stderr io.Writer) *attachment {
	a := &attachment{stdout: stdout, stderr: stderr, failed: make(chan struct{})}
	con.mu.Lock()
	defer con.mu.Unlock()
	if !con.attached {
		con.attached = true
		for _, c := range con.early {
			w := a.stdout
			if c.stderr {
				w = a.stderr
			}
			if w != nil {
				_, _ = w.Write(c.p)
			}
		}
		con.early = nil
	}
	con.clients[a] = true
	return a
}

func (con *console) detach(a *attachment) {
	con.mu.Lock()
	delete(con.clients, a)
	con.mu.Unlock()
}

// feed copies a client's input to the container. With stdinOnce, only the first
// client feeds it, and the container's stdin is closed when that input ends.
func (con *console) feed(in io.Reader) {
	con.mu.Lock()
	if con.stdinOnce && con.fed {
		con.mu.Unlock()
		return
	}
	con.fed = true
	con.mu.Unlock()
	_, _ = io.Copy(con.input, in)
	if con.stdinOnce && !con.tty {
		if c, ok := con.input.(io.Closer); ok {
			c.Close()
		}
	}
}

// teeWriter is one output stream of a container without a terminal.
type teeWriter struct {
	con    *console
	log    io.Writer
	stderr bool
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.con.write(p, t.stderr, t.log)
	return len(p), nil
}
