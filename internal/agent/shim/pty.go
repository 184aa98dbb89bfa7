package shim

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// OpenPTY opens a new pseudo-terminal pair. The master is non-blocking (closing it
// interrupts a pending read); the slave is handed to a child process.
func OpenPTY() (master, slave *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("unlocking a pseudo-terminal: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("naming a pseudo-terminal: %w", err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	return master, slave, nil
}

// SetWinsize sets a pseudo-terminal's size in characters; a zero dimension is ignored.
func SetWinsize(master *os.File, width, height uint16) {
	if width == 0 || height == 0 {
		return
	}
	rc, err := master.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: height, Col: width})
	})
}
