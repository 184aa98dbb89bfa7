package runtime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/tranche/tranche/internal/agent/ocispec"
	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/agent/shim"
	"github.com/tranche/tranche/internal/netns"
)

// SandboxImage is the image of the container that holds a pod's shared PID namespace,
// kubelet's --pod-infra-container-image.
const SandboxImage = "registry.k8s.io/pause:3.10"

// pidSandbox is a pod's sandbox container: the pause program as PID 1 of the PID
// namespace the pod's containers share when the pod asks for it
// (shareProcessNamespace), as kubelet's sandbox is. Pods that do not share one have
// none: their IPC and UTS namespaces are held by bind mounts, which a PID namespace
// cannot be (no process can enter one whose first process has ended).
type pidSandbox struct {
	id, dir string
	pid     int
	// done is closed when the shim says the sandbox container has exited.
	done chan struct{}
}

// pidNS is the PID namespace a container of the pod joins: its sandbox's when the pod
// shares one, "" (a new one) otherwise. ps.mu is held.
func pidNS(ps *podState) string {
	if ps.pidSandbox == nil {
		return ""
	}
	return fmt.Sprintf("/proc/%d/ns/pid", ps.pidSandbox.pid)
}

// ensurePIDSandbox starts the pod's sandbox container when the pod shares its PID
// namespace and it is not running; one that ended took the pod's containers with it
// (the kernel ends a PID namespace with its first process), so it is replaced and they
// restart. ps.mu is held.
func (m *Manager) ensurePIDSandbox(ctx context.Context, ps *podState) error {
	pod := ps.pod
	if pod.Spec.ShareProcessNamespace == nil || !*pod.Spec.ShareProcessNamespace {
		return nil
	}
	if sb := ps.pidSandbox; sb != nil {
		select {
		case <-sb.done:
			m.cfg.Logger.Warn("the pod's sandbox container ended: starting another", "pod", podID(pod))
			m.removePIDSandbox(sb)
			ps.pidSandbox = nil
		default:
			return nil
		}
	}
	img, err := m.cfg.Images.Ensure(ctx, SandboxImage)
	if err != nil {
		return fmt.Errorf("the sandbox image %s of pod %s: %w", SandboxImage, podID(pod), err)
	}
	id := newID()
	dir := m.bundleDir(id)
	fail := func(err error) error {
		m.removeBundle(dir)
		return fmt.Errorf("starting the sandbox container of pod %s (shareProcessNamespace): %w", podID(pod), err)
	}
	if err := m.leaseImage(ps, "POD", img, dir); err != nil {
		return fail(err)
	}
	lowers, err := m.cfg.Images.Store().Lowers(ctx, img)
	if err != nil {
		return fail(err)
	}
	rootfs := filepath.Join(dir, "rootfs")
	if err := m.run.MountRootfs(lowers, filepath.Join(dir, "upper"), filepath.Join(dir, "work"), rootfs); err != nil {
		return fail(err)
	}
	spec, err := ocispec.Spec(ocispec.Input{
		Pod:              pod,
		Container:        &v1.Container{Name: "POD", Image: SandboxImage},
		Image:            img.Config.Config,
		Rootfs:           rootfs,
		NetNS:            netns.Path(ps.netns),
		IPCNS:            ps.ipcNS,
		UTSNS:            ps.utsNS,
		Hostname:         ps.hostname,
		CgroupsPath:      m.podCgroup(pod.UID) + "/" + id,
		NodeMemory:       totalMemory(),
		SeccompDir:       m.cfg.SeccompDir,
		HostCapabilities: m.hostCaps,
		MinOOMScoreAdj:   m.minOOMScoreAdj,
		Cgroup2:          runc.Cgroup2(),
	})
	if err != nil {
		return fail(err)
	}
	if err := runc.WriteBundle(dir, spec); err != nil {
		return fail(err)
	}
	if err := m.awaitNetwork(ps); err != nil {
		return fail(err)
	}
	pid, err := m.run.Start(context.Background(), shim.StartRequest{ID: id, Bundle: dir})
	if err != nil {
		return fail(err)
	}
	ps.pidSandbox = m.watchPIDSandbox(id, dir, pid)
	m.saveContainers(ps)
	m.cfg.Logger.Debug("sandbox container started", "pod", podID(pod), "container", id, "pid", pid)
	return nil
}

// watchPIDSandbox is the record of a running sandbox container, whose done closes
// when the shim says it has exited.
func (m *Manager) watchPIDSandbox(id, dir string, pid int) *pidSandbox {
	sb := &pidSandbox{id: id, dir: dir, pid: pid, done: make(chan struct{})}
	go func() {
		defer close(sb.done)
		for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
			_, err := m.run.Wait(context.Background(), id)
			if err == nil || errors.Is(err, shim.ErrNotFound) {
				return
			}
			time.Sleep(delay)
		}
	}()
	return sb
}

// removePIDSandbox ends a sandbox container (its pause program ignores nothing but
// SIGKILL is quicker, and the pod's containers are already stopped), and removes it.
func (m *Manager) removePIDSandbox(sb *pidSandbox) {
	select {
	case <-sb.done:
	default:
		_ = m.run.Kill(context.Background(), sb.id, syscall.SIGKILL)
		<-sb.done
	}
	if err := m.run.Delete(context.Background(), sb.id); err != nil {
		m.cfg.Logger.Warn("deleting a sandbox container", "container", sb.id, "err", err)
	}
	_ = m.run.Forget(context.Background(), sb.id)
	m.removeBundle(sb.dir)
}
