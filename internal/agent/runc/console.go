package runc

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Terminals. A container's own terminal never passes through this package: RunDetached
// has runc make it in the container's devpts and send its master to the caller's
// console socket, and the caller does the rest (copying, sizes). Exec is different: runc
// exec in the foreground never passes its stdio through to the exec'd process. Without
// process.terminal it copies them through pipes of its own (a pty slave given as stdio
// reaches the process as a pipe); with it runc creates a terminal in the container's
// devpts, makes it the process's controlling terminal and copies between its master and
// runc's stdio, sending the size of runc's stdin along at start and whenever runc gets
// SIGWINCH (launch makes runc a session leader controlled by a stdin that is a terminal,
// so that a size set on it reaches runc as SIGWINCH). The caller's terminal must then be
// raw, so that only the process's terminal does line discipline, echo and signals; runc
// makes it raw too, but only once it runs, and input typed before would be echoed
// twice: Exec makes it raw first.

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
