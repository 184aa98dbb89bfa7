package runtime

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// ephemeral returns the state of the pod's ephemeral container name, creating it on
// first sight. ps.mu is held.
func (ps *podState) ephemeral(name string) *container {
	c, ok := ps.ephemerals[name]
	if !ok {
		c = &container{name: name}
		ps.ephemerals[name] = c
	}
	return c
}

// syncEphemerals starts each ephemeral container once, as kubelet does: never
// restarted, whatever the pod's restart policy. One with a targetContainerName joins
// that container's PID namespace (see ephemeralPIDNS). ps.mu is held.
func (m *Manager) syncEphemerals(ctx context.Context, ps *podState) {
	for i := range ps.pod.Spec.EphemeralContainers {
		ec := &ps.pod.Spec.EphemeralContainers[i]
		spec := v1.Container(ec.EphemeralContainerCommon)
		m.ensureRunning(ctx, ps, ps.ephemeral(ec.Name), &spec, v1.RestartPolicyNever)
	}
}

// ephemeralPIDNS is the PID namespace of the ephemeral container name: its target's
// (targetContainerName, which must be running), else the pod's. ok is false for a
// container that is not ephemeral. ps.mu is held.
func (m *Manager) ephemeralPIDNS(ps *podState, name string) (ns string, ok bool, err error) {
	for _, ec := range ps.pod.Spec.EphemeralContainers {
		if ec.Name != name {
			continue
		}
		if ec.TargetContainerName == "" {
			return pidNS(ps), true, nil
		}
		for _, cs := range []map[string]*container{ps.containers, ps.inits} {
			if t := cs[ec.TargetContainerName]; t != nil && t.inst != nil {
				return fmt.Sprintf("/proc/%d/ns/pid", t.inst.initPID), true, nil
			}
		}
		return "", true, fmt.Errorf("target container %q of ephemeral container %q is not running", ec.TargetContainerName, name)
	}
	return "", false, nil
}
