package runc

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Terminals. runc in the foreground never passes its stdio through to the container:
// without spec.Process.Terminal it copies them through pipes of its own (a pty slave
// given as stdio reaches the process as a pipe), and with it runc creates the
// container's terminal in the container's devpts, makes it the process's controlling
// terminal and copies between its master and runc's stdio, sending the size of runc's
// stdin along at start and whenever runc gets SIGWINCH. The caller's terminal must then
// be raw, so that only the container's terminal does line discipline, echo and
// signals; runc makes it raw too, but only once it runs, and input typed before would
// be echoed twice: Start and Exec make it raw first.

// makeRaw puts stdin, when it is a terminal, in raw mode, as cfmakeraw does.
func makeRaw(stdin io.Reader) {
	t, ok := stdin.(*os.File)
	if !ok || t == nil {
		return
	}
	fd := int(t.Fd())
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return // not a terminal
	}
	tio.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	tio.Oflag &^= unix.OPOST
	tio.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	tio.Cflag &^= unix.CSIZE | unix.PARENB
	tio.Cflag |= unix.CS8
	tio.Cc[unix.VMIN], tio.Cc[unix.VTIME] = 1, 0
	unix.IoctlSetTermios(fd, unix.TCSETS, tio)
}

// isTerminal reports whether r is a terminal.
func isTerminal(r io.Reader) bool {
	t, ok := r.(*os.File)
	if !ok || t == nil {
		return false
	}
	_, err := unix.IoctlGetTermios(int(t.Fd()), unix.TCGETS)
	return err == nil
}
