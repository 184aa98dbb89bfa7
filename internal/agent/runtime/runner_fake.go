package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/tranche/tranche/internal/agent/shim"
)

// FakeRunner is a Runner that runs nothing, for tests of start without root: a
// "mount" makes the root file system a plain directory, Start records the request
// and gives the container a made-up PID, and Wait blocks until Exit (or a Kill with a
// signal that ends it) gives the container an exit code. It validates like the real
// one: the bundle must hold a config.json whose root is a mounted root file system,
// a container id is started once, Wait and Kill of an unknown id wrap
// shim.ErrNotFound, Delete of a running container fails, and StartErr makes Start
// fail as runc does for a program that cannot be run.
type FakeRunner struct {
	// StartErr, when set, is Start's error (and no container is made).
	StartErr error

	mu      sync.Mutex
	nextPID int
	mounted map[string]bool
	byID    map[string]*fakeContainer
	// Started lists the start requests, in order; Deleted the deleted ids.
	Started []shim.StartRequest
	Deleted []string

	// images are the image mounts (MountImage), by target: the lowers mounted.
	images map[string][]string
}

type fakeContainer struct {
	pid    int
	spec   specs.Spec
	exited chan struct{}
	code   int
}

var _ Runner = (*FakeRunner)(nil)

// NewFakeRunner returns a FakeRunner with no containers.
func NewFakeRunner() *FakeRunner {
	return &FakeRunner{nextPID: 1000, mounted: map[string]bool{}, images: map[string][]string{}, byID: map[string]*fakeContainer{}}
}

// MountRootfs implements Runner: it checks the arguments as the real mount does and
// creates the directories.
func (f *FakeRunner) MountRootfs(lowers []string, upper, work, target string) error {
	if len(lowers) == 0 {
		return fmt.Errorf("mount rootfs %s: no lower directories", target)
	}
	for _, l := range lowers {
		if fi, err := os.Stat(l); err != nil || !fi.IsDir() {
			return fmt.Errorf("mount rootfs %s: lower directory %s: not a directory (%v)", target, l, err)
		}
	}
	for _, d := range []string{upper, work, target} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("mount rootfs %s: %w", target, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mounted[target] {
		return fmt.Errorf("mount rootfs %s: already mounted", target)
	}
	f.mounted[target] = true
	return nil
}

// UnmountRootfs implements Runner.
func (f *FakeRunner) UnmountRootfs(upper, work, target string) error {
	f.mu.Lock()
	delete(f.mounted, target)
	f.mu.Unlock()
	var errs []error
	for _, d := range []string{target, upper, work} {
		errs = append(errs, os.RemoveAll(d))
	}
	return errors.Join(errs...)
}

// MountImage implements Runner: the lowers and target must be directories; a second
// mount on the same target keeps the first, as the real one does.
func (f *FakeRunner) MountImage(lowers []string, target string) error {
	if len(lowers) == 0 {
		return fmt.Errorf("mounting image on %s: the image has no layers", target)
	}
	for _, d := range append([]string{target}, lowers...) {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return fmt.Errorf("mounting image on %s: %s is not a directory (%v)", target, d, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.images[target]; !ok {
		f.images[target] = lowers
	}
	return nil
}

// ImageMount returns the lowers of the image mounted on target, nil if none is.
func (f *FakeRunner) ImageMount(target string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.images[target]
}

// Mounted reports whether target is a mounted root file system.
func (f *FakeRunner) Mounted(target string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mounted[target]
}

// Start implements Runner.
func (f *FakeRunner) Start(ctx context.Context, req shim.StartRequest) (int, error) {
	data, err := os.ReadFile(filepath.Join(req.Bundle, "config.json"))
	if err != nil {
		return 0, fmt.Errorf("container %s: %w", req.ID, err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return 0, fmt.Errorf("container %s: config.json: %w", req.ID, err)
	}
	if spec.Process == nil || spec.Root == nil || spec.Process.Terminal != req.TTY {
		return 0, fmt.Errorf("container %s: config.json needs a process and a root, and process.terminal must be the request's tty", req.ID)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	root := spec.Root.Path
	if !filepath.IsAbs(root) {
		root = filepath.Join(req.Bundle, root)
	}
	if !f.mounted[root] {
		return 0, fmt.Errorf("container %s: its root %s is not a mounted root file system", req.ID, root)
	}
	if _, dup := f.byID[req.ID]; dup {
		return 0, fmt.Errorf("container %s: container with given ID already exists", req.ID)
	}
	f.Started = append(f.Started, req)
	if f.StartErr != nil {
		return 0, f.StartErr
	}
	f.nextPID++
	f.byID[req.ID] = &fakeContainer{pid: f.nextPID, spec: spec, exited: make(chan struct{})}
	return f.nextPID, nil
}

// Wait implements Runner.
func (f *FakeRunner) Wait(ctx context.Context, id string) (int, error) {
	f.mu.Lock()
	c := f.byID[id]
	f.mu.Unlock()
	if c == nil {
		return 0, fmt.Errorf("%w: %s", shim.ErrNotFound, id)
	}
	select {
	case <-c.exited:
		return c.code, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Exit ends a running container's process with code, as if it had exited.
func (f *FakeRunner) Exit(id string, code int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.byID[id]
	if c == nil {
		return fmt.Errorf("%w: %s", shim.ErrNotFound, id)
	}
	select {
	case <-c.exited:
		return fmt.Errorf("container %s has exited already", id)
	default:
	}
	c.code = code
	close(c.exited)
	return nil
}

// Kill implements Runner: SIGKILL and SIGTERM end the process with 128+signal.
func (f *FakeRunner) Kill(ctx context.Context, id string, sig syscall.Signal) error {
	f.mu.Lock()
	c := f.byID[id]
	f.mu.Unlock()
	if c == nil {
		return fmt.Errorf("%w: %s", shim.ErrNotFound, id)
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		_ = f.Exit(id, 128+int(sig))
	}
	return nil
}

// Delete implements Runner.
func (f *FakeRunner) Delete(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.byID[id]
	if c == nil {
		return fmt.Errorf("container %s: %w", id, os.ErrNotExist)
	}
	select {
	case <-c.exited:
	default:
		return fmt.Errorf("container %s: cannot delete a running container", id)
	}
	f.Deleted = append(f.Deleted, id)
	return nil
}

// Forget implements Runner.
func (f *FakeRunner) Forget(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byID[id] == nil {
		return fmt.Errorf("%w: %s", shim.ErrNotFound, id)
	}
	delete(f.byID, id)
	return nil
}

// Spec returns the spec a running or exited container was started with.
func (f *FakeRunner) Spec(id string) (specs.Spec, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.byID[id]
	if c == nil {
		return specs.Spec{}, false
	}
	return c.spec, true
}
