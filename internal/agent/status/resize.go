package status

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// ResizeView is what the runtime knows of a pod's in-place resize (kubelet's
// allocation manager and the runtime's view of the cgroups).
type ResizeView struct {
	// Allocated are the resources admitted per container name (init containers
	// included); nil when the runtime does not track them, and then the status
	// reports no resources, as a node without in-place resize.
	Allocated map[string]v1.ResourceRequirements
	// Actual are the resources each running container's cgroup holds, by name; a
	// container missing here reports its allocation.
	Actual map[string]v1.ResourceRequirements
	// Pending is the PodResizePending condition of a resize the node did not admit,
	// InProgress the PodResizeInProgress one of an admitted resize not actuated yet;
	// nil when there is none.
	Pending, InProgress *v1.PodCondition
}

// resizeStatus fills what kubelet reports of resources: each created container's
// allocatedResources (its allocated requests) and resources (what its cgroup holds
// while it runs, its allocation otherwise), the pod's allocatedResources (its
// effective requests), and the PodResizePending and PodResizeInProgress conditions,
// which keep their lastTransitionTime while their reason stays.
func resizeStatus(pod *v1.Pod, view ResizeView, s *v1.PodStatus) {
	if view.Allocated == nil {
		return
	}
	for _, sts := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for i := range sts {
			st := &sts[i]
			alloc, ok := view.Allocated[st.Name]
			if !ok || st.ContainerID == "" {
				continue
			}
			if alloc.Requests != nil {
				st.AllocatedResources = alloc.Requests.DeepCopy()
			}
			res := alloc.DeepCopy()
			if actual, ok := view.Actual[st.Name]; ok && st.State.Running != nil {
				res = actual.DeepCopy()
			}
			st.Resources = res
		}
	}
	allocated := pod.DeepCopy()
	for _, cs := range [][]v1.Container{allocated.Spec.InitContainers, allocated.Spec.Containers} {
		for i := range cs {
			if r, ok := view.Allocated[cs[i].Name]; ok {
				cs[i].Resources = *r.DeepCopy()
			}
		}
	}
	if reqs := resourcehelper.PodRequests(allocated, resourcehelper.PodResourcesOptions{}); len(reqs) > 0 {
		s.AllocatedResources = reqs
	}
	kept := s.Conditions[:0]
	for _, c := range s.Conditions {
		if c.Type != v1.PodResizePending && c.Type != v1.PodResizeInProgress {
			kept = append(kept, c)
		}
	}
	s.Conditions = kept
	for _, c := range []*v1.PodCondition{view.Pending, view.InProgress} {
		if c == nil {
			continue
		}
		next := *c.DeepCopy()
		for _, o := range pod.Status.Conditions {
			if o.Type == next.Type && o.Reason == next.Reason && o.Status == next.Status {
				next.LastTransitionTime = o.LastTransitionTime
			}
		}
		s.Conditions = append(s.Conditions, next)
	}
}
