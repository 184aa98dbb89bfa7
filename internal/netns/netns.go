// Package netns creates, enters and removes named network namespaces the way `ip netns`
// does (a bind mount at /run/netns/NAME), and wires links inside them. It is the only
// place in tranche that switches an OS thread into another namespace: every such switch
// happens on a fresh goroutine locked to its thread, and that thread is discarded when the
// work is done, so no other goroutine ever runs in a namespace it did not ask for.
//
// Safety: every operation refuses the empty name and refuses a namespace that turns out to
// be the host's root network namespace, so nothing here can add an address,
// route, link or sysctl to the host. The one exception is explicit: a process that
// Adopt-ed the namespace it runs in with allowRoot (an agent told by its operator that
// the machine is the node) may change it, under that name and in that process only.
package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// RunDir is where named namespaces are bind-mounted; `ip netns` uses the same directory,
// so namespaces made here are visible to `ip netns list` and `ip -n NAME`.
const RunDir = "/run/netns"

// Path returns the file a named namespace is mounted at.
func Path(name string) string {
	return filepath.Join(RunDir, name)
}

// validName rejects names that are not a single file name below RunDir, above all the
// empty name, which would otherwise mean "the namespace we are in" to some callers.
func validName(name string) error {
	switch {
	case name == "":
		return errors.New("network namespace name must not be empty (the root namespace is never touched)")
	case name == "." || name == "..", strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("invalid network namespace name %q", name)
	case len(name) > 255:
		return fmt.Errorf("network namespace name %q is longer than 255 characters", name)
	}
	return nil
}

// Create makes a new, empty network namespace (only lo, down) and mounts it at Path(name),
// like `ip netns add NAME`. It fails if the name is taken.
func Create(name string) error {
	if err := validName(name); err != nil {
		return err
	}
	if err := prepareRunDir(); err != nil {
		return fmt.Errorf("creating network namespace %q: %w", name, err)
	}
	p := Path(name)
	f, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("creating network namespace %q: %w", name, err)
	}
	f.Close()
	if err := unshareAndMount(p); err != nil {
		os.Remove(p)
		return fmt.Errorf("creating network namespace %q: %w", name, err)
	}
	return nil
}

// prepareRunDir makes RunDir a shared mount point, exactly as iproute2 does before its
// first `ip netns add`. Doing the same matters when both tools are used: if `ip` later
// bind-mounted RunDir over itself, namespaces we had mounted beneath would be hidden and
// could never be unmounted. The mount on RunDir itself stays, as it does with `ip`.
func prepareRunDir() error {
	if err := os.MkdirAll(RunDir, 0o755); err != nil {
		return err
	}
	err := unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("making %s a shared mount: %w", RunDir, err)
	}
	// EINVAL: RunDir is not a mount point yet; make it one, then share it.
	if err := unix.Mount(RunDir, RunDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mounting %s on itself: %w", RunDir, err)
	}
	if err := unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("making %s a shared mount: %w", RunDir, err)
	}
	return nil
}

// Delete unmounts and removes a named namespace, like `ip netns delete NAME`. A namespace
// that does not exist is not an error. The kernel frees the namespace (and destroys its
// veths, whose peers in other namespaces go with them) once no process, socket or open
// handle refers to it any more.
func Delete(name string) error {
	if err := validName(name); err != nil {
		return err
	}
	p := Path(name)
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("deleting network namespace %q: unmounting %s: %w", name, p, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("deleting network namespace %q: %w", name, err)
	}
	return nil
}

// Exists reports whether a network namespace is mounted at Path(name).
func Exists(name string) bool {
	if validName(name) != nil {
		return false
	}
	var st unix.Statfs_t
	if err := unix.Statfs(Path(name), &st); err != nil {
		return false
	}
	return st.Type == unix.NSFS_MAGIC
}

// List returns the sorted names below RunDir that start with prefix (all of them when the
// prefix is empty). A missing RunDir means no namespaces.
func List(prefix string) ([]string, error) {
	entries, err := os.ReadDir(RunDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing network namespaces: %w", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// open opens a named namespace for setns or as a link's target, refusing the host's root
// network namespace even when it is reachable under a name, unless this process adopted
// it under that name on the operator's explicit request (Adopt).
func open(name string) (*os.File, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	f, err := os.Open(Path(name))
	if err != nil {
		return nil, fmt.Errorf("opening network namespace %q: %w", name, err)
	}
	if _, adopted := adoptedRoot.Load(name); adopted {
		return f, nil
	}
	if err := notRoot(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("network namespace %q: %w", name, err)
	}
	return f, nil
}

// notRoot fails when f is the host's root network namespace. That namespace is found
// as PID 1's and as kthreadd's (PID 2, a kernel thread, always in the initial namespace);
// PID 1's may be unreadable in a sandbox, so each that can be read is checked, and when
// neither can, nothing is allowed.
func notRoot(f *os.File) error {
	var ns unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &ns); err != nil {
		return err
	}
	known := 0
	for _, pid := range []string{"1", "2"} {
		if pid == "2" {
			comm, err := os.ReadFile("/proc/2/comm")
			if err != nil || strings.TrimSpace(string(comm)) != "kthreadd" {
				continue
			}
		}
		var root unix.Stat_t
		if err := unix.Stat("/proc/"+pid+"/ns/net", &root); err != nil {
			continue
		}
		known++
		if ns.Dev == root.Dev && ns.Ino == root.Ino {
			return errors.New("is the host's root network namespace; refusing to touch it")
		}
	}
	if known == 0 {
		return errors.New("cannot identify the host's root network namespace (neither /proc/1/ns/net nor kthreadd's is readable); refusing")
	}
	return nil
}
