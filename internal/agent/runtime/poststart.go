package runtime

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/tranche/tranche/internal/agent/probe"
)

// postStartTimeout bounds an exec or httpGet postStart hook. Kubelet sets none; the
// hook also ends with its instance.
const postStartTimeout = time.Hour

// Kubelet's event for a postStart hook that failed; its message leaves out the
// hook's output, which could carry secrets.
const (
	reasonFailedPostStartHook  = "FailedPostStartHook"
	messageFailedPostStartHook = "PostStartHook failed"
)

// runPostStart runs the container's postStart hook (exec, httpGet, tcpSocket or sleep)
// once its process runs, as kubelet does right after starting it; until it succeeds the
// container reports waiting with ContainerCreating (kubelet's sync is blocked in the
// hook meanwhile) and a sidecar does not count as started. A hook that fails
// records kubelet's FailedPostStartHook event and kills the instance, which restarts
// as the pod's restart policy says. It returns when the hook is done, failed or the
// instance ended.
func (m *Manager) runPostStart(ps *podState, c *container, inst *instance, pod *v1.Pod, spec *v1.Container, podIP string) {
	h := spec.Lifecycle.PostStart
	ctx, cancel := context.WithCancel(ps.ctx)
	defer cancel()
	go func() {
		select {
		case <-inst.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	res, msg := probe.Success, ""
	if h.Sleep != nil {
		select {
		case <-m.cfg.Clock.After(time.Duration(h.Sleep.Seconds) * time.Second):
		case <-ctx.Done():
		}
	} else {
		p := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: h.Exec, HTTPGet: h.HTTPGet, TCPSocket: h.TCPSocket},
			TimeoutSeconds: int32(postStartTimeout / time.Second)}
		res, msg = m.proberFor(pod.UID).Probe(ctx, p, pod, spec, podIP)
	}
	if ctx.Err() != nil {
		return
	}
	if res == probe.Success {
		ps.mu.Lock()
		if c.inst == inst {
			c.postStarting = false
		}
		ps.mu.Unlock()
		m.notify(pod.UID)
		return
	}
	m.cfg.Logger.Warn("postStart hook failed, killing the container", "pod", podID(pod), "container", spec.Name, "message", msg)
	m.event(pod, v1.EventTypeWarning, reasonFailedPostStartHook, messageFailedPostStartHook)
	m.stopInstance(ps, c, inst, gracePeriod(pod), 0)
	m.notify(pod.UID)
}
