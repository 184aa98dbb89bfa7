package runtime

import (
	"context"
	"syscall"

	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/agent/shim"
	"github.com/tranche/tranche/internal/agent/volumes"
	"github.com/tranche/tranche/internal/imagestore"
)

// Runner is what starting and ending a container instance asks of the host: its root
// file system mounted over the image's layers, and the node's shim and runc running,
// waiting for, signalling and deleting its process. It is the I/O edge of start and
// wait; everything before it (the spec, mounts and environment) is computed. The real
// one is the node's shim and runc (NewRunner); FakeRunner runs nothing and validates
// like them.
type Runner interface {
	// MountRootfs mounts an overlay of lowers (the image's layers, top first) at
	// target with upper and work as its writable layer, creating the directories.
	MountRootfs(lowers []string, upper, work, target string) error
	// UnmountRootfs unmounts target and removes it, upper and work; a target not
	// mounted is not an error.
	UnmountRootfs(upper, work, target string) error
	// MountImage mounts an image's layers (lowers, top first) read-only on target,
	// unless an image is mounted there already (volumes.MountImage).
	MountImage(lowers []string, target string) error
	// Start runs the bundle's container through the shim (`runc run --detach`) and
	// returns once its process runs, with that process's host PID.
	Start(ctx context.Context, req shim.StartRequest) (initPID int, err error)
	// Wait returns once the container's process has exited, with its exit code; an
	// error wrapping shim.ErrNotFound means the shim does not know the container.
	Wait(ctx context.Context, id string) (exitCode int, err error)
	// Kill signals the container's process through runc.
	Kill(ctx context.Context, id string, sig syscall.Signal) error
	// Delete removes runc's state (and cgroup) of an exited container.
	Delete(ctx context.Context, id string) error
	// Forget drops the shim's record of an exited container.
	Forget(ctx context.Context, id string) error
}

// NewRunner is the real Runner: the node's shim and runc, and overlayfs.
func NewRunner(sc *shim.Client, rt *runc.Runtime) Runner {
	return hostRunner{shim: sc, runc: rt}
}

type hostRunner struct {
	shim *shim.Client
	runc *runc.Runtime
}

var _ Runner = hostRunner{}

func (h hostRunner) MountRootfs(lowers []string, upper, work, target string) error {
	return imagestore.MountRootfs(lowers, upper, work, target)
}

func (h hostRunner) UnmountRootfs(upper, work, target string) error {
	return imagestore.UnmountRootfs(upper, work, target)
}

func (h hostRunner) MountImage(lowers []string, target string) error {
	return volumes.MountImage(lowers, target)
}

func (h hostRunner) Start(ctx context.Context, req shim.StartRequest) (int, error) {
	c, err := h.shim.Start(ctx, req)
	return c.InitPID, err
}

func (h hostRunner) Wait(ctx context.Context, id string) (int, error) {
	c, err := h.shim.Wait(ctx, id)
	return c.ExitCode, err
}

func (h hostRunner) Kill(ctx context.Context, id string, sig syscall.Signal) error {
	return h.runc.Kill(ctx, id, sig)
}

func (h hostRunner) Delete(ctx context.Context, id string) error {
	return h.runc.Delete(ctx, id)
}

func (h hostRunner) Forget(ctx context.Context, id string) error {
	return h.shim.Forget(ctx, id)
}
