package shim

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// consoleSocket is where runc hands over the terminal it made for a container
// (`runc run --console-socket`): one connection carrying the master's descriptor.
type consoleSocket struct {
	dir string
	l   *net.UnixListener
}

// listenConsole listens on a new socket in a directory of its own (short: socket
// paths are limited to 108 bytes).
func listenConsole() (*consoleSocket, error) {
	dir, err := os.MkdirTemp("", "tranche-console-")
	if err != nil {
		return nil, err
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("console socket: %w", err)
	}
	return &consoleSocket{dir: dir, l: l}, nil
}

// path is the socket's path, "" for no socket.
func (c *consoleSocket) path() string {
	if c == nil {
		return ""
	}
	return filepath.Join(c.dir, "s")
}

func (c *consoleSocket) close() {
	c.l.Close()
	os.RemoveAll(c.dir)
}

// receive takes the terminal runc sends, as a non-blocking file (closing it interrupts
// a pending read).
func (c *consoleSocket) receive(timeout time.Duration) (*os.File, error) {
	_ = c.l.SetDeadline(time.Now().Add(timeout))
	conn, err := c.l.AcceptUnix()
	if err != nil {
		return nil, fmt.Errorf("receiving the container's terminal: %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	name := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := conn.ReadMsgUnix(name, oob)
	if err != nil {
		return nil, fmt.Errorf("receiving the container's terminal: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("receiving the container's terminal: no descriptor (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, errors.Join(errors.New("receiving the container's terminal: want one descriptor"), err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		return nil, err
	}
	unix.CloseOnExec(fds[0])
	return os.NewFile(uintptr(fds[0]), "/dev/ptmx"), nil
}
