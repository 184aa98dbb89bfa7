package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/tranche/tranche/internal/agent/backoff"
	"github.com/tranche/tranche/internal/agent/images"
	"github.com/tranche/tranche/internal/imagestore"
)

// ensureImage gives spec its image as kubelet's image manager does, with its events:
// "Container image ... already present on machine", or Pulling then "Successfully
// pulled image ... in D (T including waiting). Image size: N bytes."; on failure c
// waits with kubelet's reason (InvalidImageName, ErrImageNeverPull, ErrImagePull, then
// ImagePullBackOff while the pull backs off) and ok is false. ps.mu is held.
func (m *Manager) ensureImage(ctx context.Context, ps *podState, c *container, spec *v1.Container) (imagestore.Image, bool) {
	pod := ps.pod
	res, err := m.cfg.Images.EnsurePulled(ctx, images.PullRequest{
		Image: spec.Image, Policy: spec.ImagePullPolicy, Namespace: pod.Namespace,
		PullSecrets: pod.Spec.ImagePullSecrets, BackOffKey: string(pod.UID),
		OnPull: func() {
			m.event(pod, v1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", spec.Image))
		},
	})
	if err != nil && ctx.Err() != nil {
		// The sync was cancelled (the pod is being deleted): nothing to report.
		return imagestore.Image{}, false
	}
	if err != nil {
		m.imageFailed(ps, c, spec, err)
		return imagestore.Image{}, false
	}
	if res.Pulled {
		m.event(pod, v1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes.",
			spec.Image, res.PullDuration.Truncate(time.Millisecond), res.Total.Truncate(time.Millisecond), res.Image.Size))
	} else {
		m.event(pod, v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", spec.Image))
	}
	return res.Image, true
}

// imageFailed records why spec's image could not be had, with kubelet's reasons and
// events: InvalidImageName for a reference that does not parse, ErrImageNeverPull,
// ErrImagePull for a failed pull and ImagePullBackOff while it backs off; anything else
// (a failed catalog build, a store fault) is ErrImagePull too. The pod is synced again
// after the initial back-off, when a backing-off pull is retried if its time has come.
// ps.mu is held.
func (m *Manager) imageFailed(ps *podState, c *container, spec *v1.Container, err error) {
	pod := ps.pod
	defer m.later(ps, backoff.DefaultInitial)
	var invalid *images.InvalidNameError
	if errors.As(err, &invalid) {
		c.waiting = &v1.ContainerStateWaiting{Reason: "InvalidImageName", Message: err.Error()}
		m.event(pod, v1.EventTypeWarning, "InspectFailed", err.Error())
		m.event(pod, v1.EventTypeWarning, "Failed", "Error: InvalidImageName")
		return
	}
	var pe *images.PullError
	if !errors.As(err, &pe) {
		pe = &images.PullError{Reason: images.ReasonErrImagePull, Message: err.Error(), Err: err}
	}
	switch pe.Reason {
	case images.ReasonErrImageNeverPull:
		m.event(pod, v1.EventTypeWarning, "ErrImageNeverPull", pe.Message)
	case images.ReasonImagePullBackOff:
		m.event(pod, v1.EventTypeNormal, "BackOff", fmt.Sprintf("Back-off pulling image %q", spec.Image))
	default:
		m.event(pod, v1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: %s", spec.Image, pe.Message))
	}
	m.event(pod, v1.EventTypeWarning, "Failed", "Error: "+pe.Reason)
	c.waiting = &v1.ContainerStateWaiting{Reason: pe.Reason, Message: pe.Message}
}
