package netns

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// adoptedRoot holds the names under which this process mounted the host's root
// namespace on an operator's explicit request (Adopt with allowRoot): open lets those,
// and only those, through the root guard, and only in this process.
var adoptedRoot sync.Map

// ErrRootNamespace is returned by Adopt when the namespace the process runs in is the
// host's root network namespace and allowRoot is false.
var ErrRootNamespace = errors.New("this process runs in the host's root network namespace")

// selfPath is the network namespace of the process's main thread, which init keeps
// locked and which never changes namespace.
const selfPath = "/proc/self/ns/net"

// Adopt gives the network namespace this process runs in the name name, as `ip netns
// attach NAME PID` does, so that the functions of this package can reach it by name.
// A name that already refers to this very namespace is kept; one that refers to
// another namespace is an error. When the namespace is the host's root namespace,
// Adopt fails with ErrRootNamespace unless allowRoot is true; with it, this process
// alone may then change that namespace through name.
func Adopt(name string, allowRoot bool) error {
	if err := validName(name); err != nil {
		return err
	}
	self, err := os.Open(selfPath)
	if err != nil {
		return fmt.Errorf("opening this process's network namespace: %w", err)
	}
	defer self.Close()
	isRoot := false
	if err := notRoot(self); err != nil {
		if !allowRoot {
			return fmt.Errorf("%w: %v", ErrRootNamespace, err)
		}
		isRoot = true
	}
	var me unix.Stat_t
	if err := unix.Fstat(int(self.Fd()), &me); err != nil {
		return err
	}
	p := Path(name)
	var cur unix.Stat_t
	if Exists(name) {
		if err := unix.Stat(p, &cur); err != nil {
			return fmt.Errorf("network namespace %q: %w", name, err)
		}
		if cur.Dev != me.Dev || cur.Ino != me.Ino {
			return fmt.Errorf("network namespace %q exists and is not the one this process runs in", name)
		}
	} else {
		if err := prepareRunDir(); err != nil {
			return fmt.Errorf("naming network namespace %q: %w", name, err)
		}
		// A file left by an earlier run whose namespace is gone (a reboot) is reused.
		f, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE, 0o444)
		if err != nil {
			return fmt.Errorf("naming network namespace %q: %w", name, err)
		}
		f.Close()
		if err := unix.Mount(selfPath, p, "none", unix.MS_BIND, ""); err != nil {
			os.Remove(p)
			return fmt.Errorf("naming network namespace %q: bind-mounting %s: %w", name, selfPath, err)
		}
	}
	if isRoot {
		adoptedRoot.Store(name, true)
	}
	return nil
}

// IsRootNamespace reports whether this process runs in the host's root network
// namespace (true as well when that cannot be told: the guard's answer is "no").
func IsRootNamespace() bool {
	self, err := os.Open(selfPath)
	if err != nil {
		return true
	}
	defer self.Close()
	return notRoot(self) != nil
}
