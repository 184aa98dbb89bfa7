package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/agent/shim"
)

// TermSize is a terminal's size in characters.
type TermSize struct {
	Width, Height uint16
}

// Streams are the client side of an exec or attach session. Nil readers and writers
// are not connected. With TTY, the command gets a pseudo-terminal as stdin, stdout and
// stderr, everything it writes goes to Stdout, and Resize (may be nil) changes the
// terminal's size.
type Streams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            bool
	Resize         <-chan TermSize
}

// ErrNotRunning is wrapped by the errors of ExecStream and Attach for a container that
// has no running instance.
var ErrNotRunning = errors.New("container not running")

// running returns the running instance of a pod's container.
func (m *Manager) running(uid types.UID, name string) (*instance, error) {
	m.mu.Lock()
	ps := m.pods[uid]
	m.mu.Unlock()
	if ps == nil {
		return nil, fmt.Errorf("pod %s is not running on this node: %w", uid, ErrNotRunning)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var c *container
	for _, cs := range ps.groups() {
		if c == nil {
			c = cs[name]
		}
	}
	if c == nil || c.inst == nil {
		return nil, fmt.Errorf("container %q of pod %s: %w", name, uid, ErrNotRunning)
	}
	return c.inst, nil
}

// ContainerRunning reports whether the container has a running instance.
func (m *Manager) ContainerRunning(uid types.UID, name string) bool {
	_, err := m.running(uid, name)
	return err == nil
}

// PodNetNS returns the name of a running pod's network namespace.
func (m *Manager) PodNetNS(uid types.UID) (string, bool) {
	m.mu.Lock()
	ps := m.pods[uid]
	m.mu.Unlock()
	if ps == nil {
		return "", false
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.netns, ps.sandboxReady
}

// ExecStream runs argv in a running container (`runc exec`, with the container's
// user, environment, capabilities and working directory) with the client's streams,
// and returns its exit code. When ctx ends the process is killed.
func (m *Manager) ExecStream(ctx context.Context, uid types.UID, name string, argv []string, s Streams) (int, error) {
	if len(argv) == 0 {
		return -1, errors.New("exec: no command given")
	}
	inst, err := m.running(uid, name)
	if err != nil {
		return -1, err
	}
	// With a terminal, runc makes one in the container's own /dev/pts and relays it
	// to its stdio, a pty of the agent's whose size changes reach runc as SIGWINCH.
	p := inst.process
	p.Args = argv
	p.Terminal = s.TTY
	var stdin io.Reader
	var stdout, stderr io.Writer = s.Stdout, s.Stderr
	var pumps sync.WaitGroup
	var master *os.File
	if s.TTY {
		var slave *os.File
		master, slave, err = shim.OpenPTY()
		if err != nil {
			return -1, fmt.Errorf("exec in container %q of pod %s: %w", name, uid, err)
		}
		defer master.Close()
		defer slave.Close()
		stdin, stdout, stderr = slave, slave, slave
		if s.Stdout != nil {
			pumps.Go(func() { _, _ = io.Copy(s.Stdout, master) })
		}
		if s.Stdin != nil {
			go func() { _, _ = io.Copy(master, s.Stdin) }()
		}
		if s.Resize != nil {
			go resizeLoop(ctx, master, s.Resize)
		}
	} else if s.Stdin != nil {
		// A pipe of our own, fed without being waited for: a client that never closes
		// its stdin must not hold the session once the command is gone.
		r, w, err := os.Pipe()
		if err != nil {
			return -1, err
		}
		defer r.Close()
		defer w.Close()
		go func() {
			_, _ = io.Copy(w, s.Stdin)
			w.Close()
		}()
		stdin = r
	}
	code, err := m.runc.Exec(ctx, inst.id, p, stdin, stdout, stderr)
	if master != nil {
		// The output still buffered in the terminal, then EIO once it is drained.
		done := make(chan struct{})
		go func() { pumps.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			master.Close()
			<-done
		}
	}
	if ctx.Err() != nil {
		return -1, fmt.Errorf("exec %q in container %q of pod %s: %w", argv[0], name, uid, ctx.Err())
	}
	if errors.Is(err, runc.ErrNotRunning) {
		return -1, fmt.Errorf("exec %q in container %q of pod %s: %w", argv[0], name, uid, ErrNotRunning)
	}
	if err != nil {
		return -1, fmt.Errorf("exec %q in container %q of pod %s: %w", argv[0], name, uid, err)
	}
	return code, nil
}

// Attach connects s to the stdio of a running container until ctx ends or the
// instance exits: the client receives what the container writes from now on and, when
// the container was created with stdin, its input goes to the container. A container
// with stdinOnce has its stdin closed when the first attached client's input ends.
func (m *Manager) Attach(ctx context.Context, uid types.UID, name string, s Streams) error {
	inst, err := m.running(uid, name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-inst.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	var resize chan [2]uint16
	if s.Resize != nil {
		resize = make(chan [2]uint16)
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case sz, ok := <-s.Resize:
					if !ok {
						return
					}
					select {
					case resize <- [2]uint16{sz.Width, sz.Height}:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}
	err = m.cfg.Shim.Attach(ctx, inst.id, s.Stdin, s.Stdout, s.Stderr, resize)
	if errors.Is(err, shim.ErrNotFound) {
		return fmt.Errorf("container %q of pod %s: %w", name, uid, ErrNotRunning)
	}
	if err != nil && ctx.Err() == nil {
		m.cfg.Logger.Debug("attach ended", "container", inst.id, "err", err)
	}
	return nil
}

// resizeLoop applies terminal sizes to a pseudo-terminal until ctx ends or sizes
// closes.
func resizeLoop(ctx context.Context, master *os.File, sizes <-chan TermSize) {
	for {
		select {
		case <-ctx.Done():
			return
		case sz, ok := <-sizes:
			if !ok {
				return
			}
			shim.SetWinsize(master, sz.Width, sz.Height)
		}
	}
}
