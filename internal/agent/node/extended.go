package node

import (
	v1 "k8s.io/api/core/v1"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
)

// keepExtendedResources copies into capacity the extended resources (example.com/foo)
// that prev advertises and the agent does not measure: an administrator advertises them
// by patching status.capacity, and kubelet keeps them in capacity and allocatable across
// its own status updates.
func keepExtendedResources(capacity v1.ResourceList, prev *v1.NodeStatus) {
	if prev == nil {
		return
	}
	for name, q := range prev.Capacity {
		if _, measured := capacity[name]; !measured && v1helper.IsExtendedResourceName(name) {
			capacity[name] = q.DeepCopy()
		}
	}
}
