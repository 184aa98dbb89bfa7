package core

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	api "k8s.io/kubernetes/pkg/apis/core"
	apiv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"

	"github.com/tranche/tranche/internal/registry"
)

// podResizeSubresource is pods/resize, in-place vertical scaling (GA since v1.35): a
// GET returns the pod, a PUT or PATCH may change only the containers' (and init
// containers') resources and resizePolicy, and the pod-level resources, as
// kube-apiserver's ResizeStrategy lets it; the handlers bump metadata.generation when
// the spec changed. The node agent then allocates and actuates the new resources.
func podResizeSubresource() *registry.SubresourceStrategy {
	return &registry.SubresourceStrategy{
		PrepareForUpdate: registry.HookUpdate(podResizePrepareForUpdate),
		ValidateUpdate:   registry.FuncUpdate(podValidateResize),
	}
}

// podResizePrepareForUpdate keeps everything of the stored pod but the resize fields
// (kube-apiserver's dropNonResizeUpdates): each container's resources and
// resizePolicy, matched by position, and spec.resources. A write that adds, removes,
// reorders or renames containers is left as it came, for validation to refuse.
func podResizePrepareForUpdate(pod, old *v1.Pod) {
	if len(pod.Spec.Containers) != len(old.Spec.Containers) || len(pod.Spec.InitContainers) != len(old.Spec.InitContainers) {
		return
	}
	containers, ok := podResizeMerge(pod.Spec.Containers, old.Spec.Containers)
	if !ok {
		return
	}
	inits, ok := podResizeMerge(pod.Spec.InitContainers, old.Spec.InitContainers)
	if !ok {
		return
	}
	kept := old.DeepCopy()
	kept.ResourceVersion = pod.ResourceVersion
	kept.Spec.Containers, kept.Spec.InitContainers = containers, inits
	// Pod-level resources resize with the pod (InPlacePodLevelResourcesVerticalScaling,
	// beta and on in v1.37); a client that drops the field keeps the stored ones
	// (PodLevelResourcesFixDefaulting).
	if pod.Spec.Resources != nil {
		kept.Spec.Resources = pod.Spec.Resources.DeepCopy()
	}
	*pod = *kept
}

// podResizeMerge returns old with each container's resources and resizePolicy taken
// from next; ok is false when a container was renamed or moved.
func podResizeMerge(next, old []v1.Container) ([]v1.Container, bool) {
	if len(old) == 0 {
		return nil, true
	}
	out := make([]v1.Container, len(old))
	for i := range old {
		if next[i].Name != old[i].Name {
			return nil, false
		}
		out[i] = *old[i].DeepCopy()
		out[i].Resources = *next[i].Resources.DeepCopy()
		out[i].ResizePolicy = append([]v1.ContainerResizePolicy(nil), next[i].ResizePolicy...)
	}
	return out, true
}

// podValidateResize is kube-apiserver's ValidatePodResize on the internal types: the
// pod must stay valid, its QoS class must not change, requests and limits may not be
// removed, only cpu and memory may change, containers may not be added, removed,
// renamed or reordered, static and Windows pods cannot be resized, and a pod whose
// running containers report no resources (a node without resize) neither.
func podValidateResize(pod, old *v1.Pod) field.ErrorList {
	newPod, err := podToInternal(pod)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath(""), err)}
	}
	oldPod, err := podToInternal(old)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath(""), err)}
	}
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&newPod.Spec, &oldPod.Spec, &newPod.ObjectMeta, &oldPod.ObjectMeta)
	opts.ResourceIsPod = true
	return corevalidation.ValidatePodResize(newPod, oldPod, opts)
}

// podToInternal converts a stored pod to the internal type upstream validation takes,
// with the v1 defaults applied (a stored pod has them; this only fills what tranche's
// own defaulting leaves to the API's zero values).
func podToInternal(pod *v1.Pod) (*api.Pod, error) {
	in := pod.DeepCopy()
	apiv1.SetObjectDefaults_Pod(in)
	out := &api.Pod{}
	if err := apiv1.Convert_v1_Pod_To_core_Pod(in, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}
