package runtime

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// RuntimeHandlers are the RuntimeClass handlers a node runs: every container runs with
// runc, so runc and the default handler ("") are the node's only ones, as a containerd
// configured with runc alone.
var RuntimeHandlers = []string{"", "runc"}

// runtimeHandlerError returns why the pod's sandbox cannot be made with the handler of
// its RuntimeClass, in kubelet's and containerd's words: the class cannot be read
// (kubelet's lookup) or names a handler the node lacks (containerd's "no runtime").
// A pod naming no class, or a node without Lookup, always passes.
func (m *Manager) runtimeHandlerError(ctx context.Context, pod *v1.Pod) error {
	name := pod.Spec.RuntimeClassName
	if name == nil || m.cfg.Lookup == nil {
		return nil
	}
	data, found, err := m.cfg.Lookup(ctx, "RuntimeClass", "", *name)
	if err != nil {
		return fmt.Errorf("failed to lookup RuntimeClass %s: %w", *name, err)
	}
	if !found {
		return fmt.Errorf("failed to lookup RuntimeClass %s: runtimeclasses.node.k8s.io %q not found", *name, *name)
	}
	handler := data["handler"]
	for _, h := range RuntimeHandlers {
		if handler == h {
			return nil
		}
	}
	return fmt.Errorf("failed to get sandbox runtime: no runtime for %q is configured", handler)
}
