package runc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// ErrNotRunning is wrapped by the errors of Exec and Kill when the container exists but
// its process is not running (created, stopped) or the container does not exist.
var ErrNotRunning = errors.New("container is not running")

// ErrNotExist is wrapped by the error of State when runc has no such container.
var ErrNotExist = errors.New("container does not exist")

// Find returns the path of the runc binary: the first runc on PATH, else /usr/sbin/runc
// or /usr/bin/runc (Debian's package installs to /usr/sbin, which a non-root PATH lacks).
func Find() (string, error) {
	if p, err := exec.LookPath("runc"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/runc", "/usr/bin/runc"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("runc not found: install Debian's runc package (make deps does)")
}

// Runtime runs containers with one runc binary and one runc state directory. A node agent
// has one Runtime; everything it started can be found again under Root. The zero Logger
// discards.
type Runtime struct {
	// Binary is the runc executable (see Find).
	Binary string
	// Root is runc's --root state directory, one per node agent (for instance
	// DATA/nodes/<node>/runc); it is created when missing.
	Root string
	// Logger receives debug records of what the Runtime does. runc's own log of a
	// container is runc.log in its bundle (JSON lines), where RunDetached finds why a
	// container could not start.
	Logger *slog.Logger
}

// Status is a container's status as runc reports it.
type Status string

// The statuses of the OCI runtime specification.
const (
	StatusCreating Status = "creating"
	StatusCreated  Status = "created"
	StatusRunning  Status = "running"
	StatusPaused   Status = "paused"
	StatusStopped  Status = "stopped"
)

// State is what runc knows about a container (`runc state`).
type State struct {
	// ID is the container's id.
	ID string `json:"id"`
	// Pid is its init process in the agent's PID namespace (0 when stopped).
	Pid int `json:"pid"`
	// Status is created, running, paused or stopped.
	Status Status `json:"status"`
	// Bundle is the bundle directory it was created from.
	Bundle string `json:"bundle"`
	// Created is when it was created.
	Created time.Time `json:"created"`
}

// File names inside a bundle besides config.json.
const (
	pidFile = "runc.pid" // written by runc once the container's process exists
	logFile = "runc.log" // runc's JSON log of this container
)

// WriteBundle writes spec as dir/config.json for `runc run --bundle dir`, creating dir.
// The file is replaced atomically (written beside it, renamed), so runc and an agent
// adopting the container never read half a spec. It is not synced to disk: that would
// cost every container start a disk flush to guard against a power loss, after which
// no container of the bundle runs any more and its bundle is removed as stale.
func WriteBundle(dir string, spec *specs.Spec) error {
	data, err := json.MarshalIndent(spec, "", "\t")
	if err != nil {
		return fmt.Errorf("bundle %s: encoding the spec: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return fmt.Errorf("bundle %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".config.json.*")
	if err != nil {
		return fmt.Errorf("bundle %s: %w", dir, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, "config.json"))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("bundle %s: writing config.json: %w", dir, err)
	}
	return nil
}

func (r *Runtime) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// command is runc with the global flags; logPath, when set, receives runc's own log.
func (r *Runtime) command(logPath string, args ...string) (*exec.Cmd, error) {
	if r.Binary == "" || r.Root == "" {
		return nil, errors.New("runc runtime: Binary and Root must be set")
	}
	if err := os.MkdirAll(r.Root, 0o700); err != nil {
		return nil, fmt.Errorf("runc state directory: %w", err)
	}
	global := []string{"--root", r.Root}
	if logPath != "" {
		global = append(global, "--log", logPath, "--log-format", "json")
	}
	return exec.Command(r.Binary, append(global, args...)...), nil
}

// launch starts runc in the foreground with args and the caller's stdio (stdin made raw
// first when terminal and stdin is a terminal: see console.go). onCancel runs when ctx
// is done before runc has exited.
func (r *Runtime) launch(ctx context.Context, logPath string, args []string, terminal bool,
	stdin io.Reader, stdout, stderr io.Writer, onCancel func(*exec.Cmd)) (*exec.Cmd, error) {
	cmd, err := r.command(logPath, args...)
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	// Its own process group: a terminal's Ctrl-C to the agent is not the process's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Output copied from pipes of runc's stdio must not hold Wait once runc is gone
	// when a process the exec'd one left behind still has them open.
	cmd.WaitDelay = 2 * time.Second
	if terminal {
		makeRaw(stdin)
		if isTerminal(stdin) {
			// A session of its own controlled by the caller's terminal: a size set on
			// that terminal's master reaches runc as SIGWINCH, which it passes on.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting runc: %w", err)
	}
	if ctx.Done() == nil {
		return cmd, nil
	}
	// A pidfd, opened before the caller can reap runc, tells when runc has exited
	// without racing with the caller's Wait or with PID reuse.
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("watching runc: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { onCancel(cmd) })
	go func() {
		defer unix.Close(pidfd)
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
				break
			}
		}
		stop()
	}()
	return cmd, nil
}

// RunDetached runs the container of bundle with `runc run --detach`, which returns once
// the container's process runs the bundle's program, and returns that process's pid. A
// container that could not be started (a missing program, a bad spec) is an error
// carrying runc's reason, and has no process. The caller must be a child subreaper
// (PR_SET_CHILD_SUBREAPER): runc has exited when RunDetached returns, the container's
// process is the caller's child, and only the caller can reap it and learn its exit
// status (see the package documentation).
//
// stdin, stdout and stderr (nil for /dev/null) are passed through to the process as
// they are; a container with a terminal (spec.Process.Terminal) gets none of them: runc
// sends the terminal's master to consoleSocket, a unix socket the caller listens on.
// When ctx is done before runc has returned, runc is killed and the error wraps ctx's;
// what runc had made of the container by then is the caller's to Delete.
func (r *Runtime) RunDetached(ctx context.Context, id, bundle string, stdin, stdout, stderr *os.File, consoleSocket string) (int, error) {
	if err := validID(id); err != nil {
		return 0, err
	}
	bundle, err := filepath.Abs(bundle)
	if err != nil {
		return 0, err
	}
	for _, f := range []string{pidFile, logFile} {
		if err := os.Remove(filepath.Join(bundle, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("container %s: %w", id, err)
		}
	}
	args := []string{"run", "--detach", "--bundle", bundle, "--pid-file", filepath.Join(bundle, pidFile)}
	if consoleSocket != "" {
		args = append(args, "--console-socket", consoleSocket)
	}
	cmd, err := r.command(filepath.Join(bundle, logFile), append(args, id)...)
	if err != nil {
		return 0, err
	}
	// Typed nil *os.File values would not be nil interfaces: set only the real ones.
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if stderr != nil {
		cmd.Stderr = stderr
	}
	// Its own process group: a terminal's Ctrl-C to the caller is not the container's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.logger().Debug("runc run --detach", "container", id, "bundle", bundle)
	if err := startAndWait(ctx, cmd); err != nil {
		if ctx.Err() == nil {
			if serr := startError(bundle); serr != nil {
				return 0, serr
			}
		}
		return 0, fmt.Errorf("container %s: runc run: %w", id, err)
	}
	data, err := os.ReadFile(filepath.Join(bundle, pidFile))
	if err != nil {
		return 0, fmt.Errorf("container %s: %w", id, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("container %s: runc wrote pid %q", id, data)
	}
	return pid, nil
}

// startError reports why a failed `runc run` of the container in bundle failed before
// the container's process existed (runc's last error in its log), or nil when runc had
// written the process's pid.
func startError(bundle string) error {
	if _, err := os.Stat(filepath.Join(bundle, pidFile)); err == nil {
		return nil
	}
	if msg := lastError(filepath.Join(bundle, logFile)); msg != "" {
		return fmt.Errorf("runc run: %s", msg)
	}
	return errors.New("runc run failed before the container's process started")
}

// lastError returns the last error-level message of a runc JSON log.
func lastError(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var msg string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l struct{ Level, Msg string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && (l.Level == "error" || l.Level == "fatal") {
			msg = l.Msg
		}
	}
	return msg
}

// Exec runs p in the running container id (`runc exec --process`) with the given stdio,
// waits for it and returns its exit code (128+N when killed by signal N). p is used as
// given (args, env, cwd, user, capabilities, no_new_privs: the caller copies them from
// the container's spec); with p.Terminal the process gets a terminal of its own, which
// runc copies to and from stdin and stdout (see console.go). The error is non-nil only
// when the process could not be run; it wraps ErrNotRunning when the container is not
// running. When ctx is done the process is killed.
func (r *Runtime) Exec(ctx context.Context, id string, p specs.Process, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if err := validID(id); err != nil {
		return -1, err
	}
	// No `runc state` first: exec probes run this every period, and runc exec's own
	// error for a stopped or missing container says so (notRunning).
	// Not below Root, where runc takes every directory for a container. Private (0700):
	// the process's environment may hold secrets.
	dir, err := os.MkdirTemp("", "tranche-exec-"+id+"-")
	if err != nil {
		return -1, fmt.Errorf("exec in container %s: %w", id, err)
	}
	defer os.RemoveAll(dir)
	data, err := json.Marshal(p)
	if err != nil {
		return -1, fmt.Errorf("exec in container %s: encoding the process: %w", id, err)
	}
	procPath, pidPath := filepath.Join(dir, "process.json"), filepath.Join(dir, "pid")
	if err := os.WriteFile(procPath, data, 0o600); err != nil {
		return -1, fmt.Errorf("exec in container %s: %w", id, err)
	}
	args := []string{"exec", "--process", procPath, "--pid-file", pidPath, id}
	cmd, err := r.launch(ctx, filepath.Join(dir, "log"), args, p.Terminal, stdin, stdout, stderr, func(cmd *exec.Cmd) {
		// runc cannot forward SIGKILL: kill the process itself. runc writes its pid file
		// just after starting it, so a cancel that finds no file yet waits for it a while:
		// runc killed in between would leave the process running in the container, with
		// nothing to wait for it (a loaded machine showed it). Only a runc that writes no
		// file in that time (it failed, or is stuck before starting anything) is killed.
		for deadline := time.Now().Add(execPidFileWait); ; time.Sleep(10 * time.Millisecond) {
			if b, err := os.ReadFile(pidPath); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
					syscall.Kill(pid, syscall.SIGKILL)
					return
				}
			}
			if time.Now().After(deadline) {
				break
			}
		}
		cmd.Process.Kill()
	})
	if err != nil {
		return -1, fmt.Errorf("exec in container %s: %w", id, err)
	}
	werr := cmd.Wait()
	if _, err := os.Stat(pidPath); err != nil {
		msg := lastError(filepath.Join(dir, "log"))
		if msg == "" && werr != nil {
			msg = werr.Error()
		}
		err := fmt.Errorf("exec in container %s: runc: %s", id, msg)
		if notRunning(msg) {
			err = fmt.Errorf("%w: %w", err, ErrNotRunning)
		}
		return -1, err
	}
	return exitCode(cmd.ProcessState), nil
}

// execPidFileWait is how long a cancelled exec waits for runc's pid file to kill the
// process rather than runc.
const execPidFileWait = 5 * time.Second

// exitCode is a process's exit code as a shell reports it: 128+N for signal N.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// notRunning recognises runc's messages for a container that cannot run a process.
func notRunning(msg string) bool {
	for _, s := range []string{"not running", "stopped container", "does not exist", "container not found"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// simple runs a runc subcommand that prints nothing of interest on stderr, returning
// its standard output; its errors carry runc's message.
func (r *Runtime) simple(ctx context.Context, args ...string) ([]byte, error) {
	cmd, err := r.command("", args...)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := startAndWait(ctx, cmd); err != nil {
		msg := strings.TrimSpace(stderr.String())
		// runc 1.1 prints its log lines as text: keep the message of the last one.
		if i := strings.LastIndex(msg, "msg=\""); i >= 0 {
			msg = strings.TrimSuffix(msg[i+len("msg=\""):], "\"")
		}
		if msg == "" {
			msg = err.Error()
		}
		return nil, errors.New(msg)
	}
	return stdout.Bytes(), nil
}

// startAndWait runs cmd, killing it when ctx is done.
func startAndWait(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	if !stop() && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Kill sends sig to the container's init process (`runc kill`). The error wraps
// ErrNotRunning when the container does not exist or is not running. Note that the
// kernel delivers to a PID namespace's init only the signals it handles (and SIGKILL).
func (r *Runtime) Kill(ctx context.Context, id string, sig syscall.Signal) error {
	if err := validID(id); err != nil {
		return err
	}
	if _, err := r.simple(ctx, "kill", id, strconv.Itoa(int(sig))); err != nil {
		if notRunning(err.Error()) {
			return fmt.Errorf("signal %d to container %s: %s: %w", sig, id, err, ErrNotRunning)
		}
		return fmt.Errorf("signal %d to container %s: %w", sig, id, err)
	}
	return nil
}

// Delete removes the container and what runc made for it, its cgroup included
// (`runc delete --force`: a container still running is killed first). A container that
// does not exist is not an error.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	if _, err := r.simple(ctx, "delete", "--force", id); err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return nil
		}
		return fmt.Errorf("deleting container %s: %w", id, err)
	}
	return nil
}

// State returns runc's state of the container; the error wraps ErrNotExist when runc
// has no such container.
func (r *Runtime) State(ctx context.Context, id string) (State, error) {
	if err := validID(id); err != nil {
		return State{}, err
	}
	out, err := r.simple(ctx, "state", id)
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return State{}, fmt.Errorf("state of container %s: %w", id, ErrNotExist)
		}
		return State{}, fmt.Errorf("state of container %s: %w", id, err)
	}
	var st State
	if err := json.Unmarshal(out, &st); err != nil {
		return State{}, fmt.Errorf("state of container %s: decoding runc's answer: %w", id, err)
	}
	return st, nil
}

// List returns the state of every container under Root, in runc's order.
func (r *Runtime) List(ctx context.Context) ([]State, error) {
	out, err := r.simple(ctx, "list", "--format", "json")
	// runc list fails when a container it is reading is deleted at that moment
	// ("stat <root>/<id>: no such file or directory"): a deletion racing the list is
	// not an error of the list, which is read again.
	for try := 0; err != nil && try < 3 && strings.Contains(err.Error(), "no such file or directory"); try++ {
		out, err = r.simple(ctx, "list", "--format", "json")
	}
	if err != nil {
		return nil, fmt.Errorf("listing containers in %s: %w", r.Root, err)
	}
	var sts []State
	if err := json.Unmarshal(out, &sts); err != nil {
		return nil, fmt.Errorf("listing containers in %s: decoding runc's answer: %w", r.Root, err)
	}
	return sts, nil
}

// validID accepts the ids runc accepts, and refuses flags.
func validID(id string) error {
	if id == "" || strings.HasPrefix(id, "-") || strings.HasPrefix(id, ".") {
		return fmt.Errorf("invalid container id %q", id)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_+-.", c)) {
			return fmt.Errorf("invalid container id %q: only letters, digits and _+-. are allowed", id)
		}
	}
	return nil
}
