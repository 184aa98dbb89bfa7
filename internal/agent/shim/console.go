package shim

import (
	"io"
	"os"
	"sync"
	"time"
)

// console is a container instance's stdio as `kubectl attach` sees it. Output always
// goes to the instance's log; attached clients get a copy from the moment they attach.
// runc runs the container detached and passes the console's files through to it: pipes
// for stdout and stderr (and stdin when the container has one), or, for a container
// with tty, the terminal runc makes in the container and hands over on the console
// socket.
type console struct {
	tty, stdin, stdinOnce bool
	logOut, logErr        io.Writer
	// master is the terminal of a tty container (set once runc handed it over).
	master *os.File
	// child are the container's ends of the pipes (stdin, stdout, stderr; nil when not
	// used), closed in the shim once runc has passed them on; outR and errR are the
	// shim's ends of the output pipes.
	child      [3]*os.File
	outR, errR *os.File
	// input is where clients' input goes (the stdin pipe or the terminal), nil
	// without stdin.
	input io.Writer
	pump  sync.WaitGroup

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
	con := &console{tty: tty, stdin: stdin, stdinOnce: stdinOnce, logOut: logOut, logErr: logErr, clients: map[*attachment]bool{}}
	if tty {
		return con, nil
	}
	fail := func(err error) (*console, error) {
		con.abort()
		return nil, err
	}
	if stdin {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		con.child[0], con.input = r, w
	}
	for i, dst := range []**os.File{&con.outR, &con.errR} {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		*dst, con.child[i+1] = r, w
	}
	return con, nil
}

// files are the container's stdin, stdout and stderr for runc to pass through (nil
// for a tty container: its terminal is runc's).
func (con *console) files() (stdin, stdout, stderr *os.File) {
	return con.child[0], con.child[1], con.child[2]
}

// setTerminal takes the master of the terminal runc made for a tty container.
func (con *console) setTerminal(master *os.File) {
	con.master = master
	if con.stdin {
		con.input = master
	}
}

// started closes the container's ends in the shim (runc has passed them on) and starts
// copying the container's output to the log and the attached clients.
func (con *console) started() {
	for i, f := range con.child {
		if f != nil {
			f.Close()
			con.child[i] = nil
		}
	}
	copyOut := func(r *os.File, stderr bool, log io.Writer) {
		con.pump.Go(func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := r.Read(buf)
				if n > 0 {
					con.write(buf[:n], stderr, log)
				}
				if err != nil {
					return
				}
			}
		})
	}
	if con.master != nil {
		copyOut(con.master, false, con.logOut)
	}
	if con.outR != nil {
		copyOut(con.outR, false, con.logOut)
		copyOut(con.errR, true, con.logErr)
	}
}

// abort releases everything when the container could not be started.
func (con *console) abort() {
	for _, f := range append(con.child[:], con.outR, con.errR, con.master) {
		if f != nil {
			f.Close()
		}
	}
	if c, ok := con.input.(io.Closer); ok {
		c.Close()
	}
}

// finish waits (briefly: a process the container left behind may hold its output
// open) for the container's last output after it exited and closes the console; the
// log may be flushed afterwards.
func (con *console) finish() {
	done := make(chan struct{})
	go func() { con.pump.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		for _, f := range []*os.File{con.master, con.outR, con.errR} {
			if f != nil {
				f.Close()
			}
		}
		<-done
	}
	for _, f := range []*os.File{con.master, con.outR, con.errR} {
		if f != nil {
			f.Close()
		}
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
