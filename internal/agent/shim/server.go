package shim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/tranche/tranche/internal/agent/runc"
	"golang.org/x/sys/unix"
)

// SocketName is the shim's socket in its directory.
const SocketName = "shim.sock"

// setupTimeout bounds the wait for runc to start a container.
const setupTimeout = 30 * time.Second

// StartRequest asks the shim to start the container of an OCI bundle the agent wrote.
type StartRequest struct {
	// ID is runc's container id; Bundle the bundle directory.
	ID     string `json:"id"`
	Bundle string `json:"bundle"`
	// LogPath is the CRI log file of the instance; "" discards its output.
	LogPath string    `json:"logPath,omitempty"`
	Logs    LogPolicy `json:"logs"`
	// TTY, Stdin and StdinOnce are the container's (the bundle's process.terminal
	// must agree with TTY).
	TTY       bool `json:"tty,omitempty"`
	Stdin     bool `json:"stdin,omitempty"`
	StdinOnce bool `json:"stdinOnce,omitempty"`
}

// Container is what the shim knows of a container it started.
type Container struct {
	ID     string `json:"id"`
	Bundle string `json:"bundle"`
	// InitPID is the container's process, a child of the shim.
	InitPID int `json:"initPID"`
	// Exited is set once the container's init has ended, with its exit code (128 +
	// the signal for a process killed by one) and when.
	Exited     bool      `json:"exited,omitempty"`
	ExitCode   int       `json:"exitCode,omitempty"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
}

// Server is the shim: it starts containers with `runc run --detach`, becomes the parent
// of their processes (a child subreaper), owns their stdio (the CRI log files, attached
// clients, terminals) and their exit statuses, and lives on when the agent that asked
// for them dies, so that a new agent finds them again. No process stays with a
// container but its own: one shim per node instead of containerd's shim per pod. It
// keeps no state on disk: when it dies its containers are lost, as containerd's are
// when their shim dies.
type Server struct {
	// Runc starts the containers (detached: runc keeps a container until it is deleted,
	// so the agent reads the cgroup's OOM count first).
	Runc   *runc.Runtime
	Logger *slog.Logger

	mu   sync.Mutex
	ctrs map[string]*ctr
}

// ctr is one container the shim runs.
type ctr struct {
	Container
	con  *console
	done chan struct{}
	mu   sync.Mutex // guards Container's exit fields
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// Serve makes the process a child subreaper and answers the agent on l until ctx ends.
// Containers keep running after it returns; their output is lost with the process.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("shim: becoming a child subreaper: %w", err)
	}
	s.mu.Lock()
	if s.ctrs == nil {
		s.ctrs = map[string]*ctr{}
	}
	s.mu.Unlock()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /containers", s.handleStart)
	mux.HandleFunc("GET /containers", s.handleList)
	mux.HandleFunc("GET /containers/{id}/wait", s.handleWait)
	mux.HandleFunc("DELETE /containers/{id}", s.handleForget)
	mux.HandleFunc("GET /containers/{id}/attach", s.handleAttach)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Listen removes a stale socket in dir and listens on a new one, readable by root only.
func Listen(dir string) (net.Listener, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := filepath.Join(dir, SocketName)
	_ = os.Remove(p)
	l, err := net.Listen("unix", p)
	if err != nil {
		return nil, fmt.Errorf("shim socket: %w", err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// errorBody is a failed request's answer.
type errorBody struct {
	Error string `json:"error"`
}

func (s *Server) handleStart(w http.ResponseWriter, r *http.Request) {
	var req StartRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{"decoding the start request: " + err.Error()})
		return
	}
	c, err := s.start(req)
	if err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, c.snapshot())
}

// start starts req's container and returns once its process runs (or could not be
// started: the error is runc's own reason).
func (s *Server) start(req StartRequest) (*ctr, error) {
	s.mu.Lock()
	if _, ok := s.ctrs[req.ID]; ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("container %s exists already", req.ID)
	}
	s.mu.Unlock()
	var log *criLog
	var stdout, stderr io.Writer = io.Discard, io.Discard
	var so, se *streamWriter
	if req.LogPath != "" {
		var err error
		if log, err = openCRILog(req.LogPath, req.Logs, time.Now); err != nil {
			return nil, err
		}
		so, se = &streamWriter{log: log, stream: "stdout"}, &streamWriter{log: log, stream: "stderr"}
		stdout, stderr = so, se
	}
	closeLog := func() {
		if so != nil {
			so.flush()
			se.flush()
			log.close()
		}
	}
	con, err := newConsole(req.TTY, req.Stdin, req.StdinOnce, stdout, stderr)
	if err != nil {
		closeLog()
		return nil, err
	}
	var sock *consoleSocket
	if req.TTY {
		if sock, err = listenConsole(); err != nil {
			con.abort()
			closeLog()
			return nil, err
		}
		defer sock.close()
	}
	stdin, out, errOut := con.files()
	initPID, err := s.Runc.RunDetached(context.Background(), req.ID, req.Bundle, stdin, out, errOut, sock.path())
	if err == nil && sock != nil {
		var master *os.File
		if master, err = sock.receive(setupTimeout); err == nil {
			con.setTerminal(master)
		}
	}
	var proc *os.Process
	if err == nil {
		// runc has exited: its container's process is this subreaper's child now.
		proc, err = os.FindProcess(initPID)
	}
	if err != nil {
		con.abort()
		closeLog()
		_ = s.Runc.Delete(context.Background(), req.ID)
		return nil, err
	}
	con.started()
	c := &ctr{Container: Container{ID: req.ID, Bundle: req.Bundle, InitPID: initPID}, con: con, done: make(chan struct{})}
	s.mu.Lock()
	s.ctrs[req.ID] = c
	s.mu.Unlock()
	s.logger().Debug("container started", "container", req.ID, "pid", initPID)
	go func() {
		st, werr := proc.Wait()
		con.finish()
		closeLog()
		code := 128
		if werr == nil {
			if ws, ok := st.Sys().(syscall.WaitStatus); ok {
				if ws.Signaled() {
					code = 128 + int(ws.Signal())
				} else {
					code = ws.ExitStatus()
				}
			}
		} else {
			s.logger().Warn("waiting for a container's process", "container", req.ID, "err", werr)
		}
		c.mu.Lock()
		c.Exited, c.ExitCode, c.FinishedAt = true, code, time.Now()
		c.mu.Unlock()
		close(c.done)
		s.logger().Debug("container exited", "container", req.ID, "code", code)
	}()
	return c, nil
}

func (c *ctr) snapshot() Container {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Container
}

func (s *Server) get(id string) *ctr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctrs[id]
}

func (s *Server) handleList(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	out := make([]Container, 0, len(s.ctrs))
	for _, c := range s.ctrs {
		out = append(out, c.snapshot())
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	writeJSON(w, http.StatusOK, out)
}

// handleWait answers once the container has exited (or the client gave up).
func (s *Server) handleWait(w http.ResponseWriter, r *http.Request) {
	c := s.get(r.PathValue("id"))
	if c == nil {
		writeJSON(w, http.StatusNotFound, errorBody{"no container " + r.PathValue("id")})
		return
	}
	select {
	case <-c.done:
		writeJSON(w, http.StatusOK, c.snapshot())
	case <-r.Context().Done():
	}
}

// handleForget drops an exited container's record, once the agent has read it.
func (s *Server) handleForget(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.ctrs[id]
	if c == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	select {
	case <-c.done:
		delete(s.ctrs, id)
		w.WriteHeader(http.StatusNoContent)
	default:
		writeJSON(w, http.StatusConflict, errorBody{"container " + id + " is still running"})
	}
}
