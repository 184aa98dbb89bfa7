package core

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/tranche/tranche/internal/registry"
)

// podUpdatableFields is the list Kubernetes prints when a pod update touches anything else.
var podUpdatableFields = []string{
	"`spec.containers[*].image`",
	"`spec.initContainers[*].image`",
	"`spec.activeDeadlineSeconds`",
	"`spec.tolerations` (only additions to existing tolerations)",
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
}

// PodResource is core/v1 pods: namespaced, short name "po", in category "all", with a
// status subresource. Creating resets status to Pending with the computed QoS class;
// updates may only change what Kubernetes lets change (images, activeDeadlineSeconds,
// added tolerations); spec.nodeName is set on create or through pods/binding only, and
// spec.ephemeralContainers grows through pods/ephemeralcontainers only.
func PodResource() registry.Resource {
	return registry.Resource{
		GVK:              v1.SchemeGroupVersion.WithKind("Pod"),
		Plural:           "pods",
		Singular:         "pod",
		ShortNames:       []string{"po"},
		Categories:       []string{"all"},
		Namespaced:       true,
		New:              func() runtime.Object { return &v1.Pod{} },
		NewList:          func() runtime.Object { return &v1.PodList{} },
		PrepareForCreate: registry.Hook(podPrepareForCreate),
		Default:          registry.Hook(podDefault),
		Validate:         registry.Func(podValidateCreate),
		ValidateUpdate:   registry.FuncUpdate(podValidateUpdate),
		// Pods have a generation since v1.33: 1 on create, +1 per spec change (through
		// update or ephemeralcontainers, not binding) and on a graceful deletion.
		TrackGeneration: true,
		Status: &registry.StatusStrategy{
			PrepareForUpdate: registry.HookUpdate(func(pod, old *v1.Pod) {
				podNormalizeStatusIPs(&pod.Status)
				podPreserveObservedGeneration(pod, old)
			}),
			ValidateUpdate: registry.FuncUpdate(podValidateStatusUpdate),
		},
		Subresources: map[string]*registry.SubresourceStrategy{
			"ephemeralcontainers": {
				PrepareForUpdate: registry.HookUpdate(podEphemeralPrepareForUpdate),
				ValidateUpdate:   registry.FuncUpdate(podValidateEphemeralContainersUpdate),
			},
			"resize": podResizeSubresource(),
		},
		Handlers: PodHandlers(),
		Delete:   PodDeleteStrategy(),
		Columns:  podColumns,
		Row:      registry.FuncWith(podRow),
		Fields:   registry.Func(podFields),
	}
}

func podFields(pod *v1.Pod) fields.Set {
	podIP := ""
	ips := make([]string, 0, len(pod.Status.PodIPs))
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) > 0 {
		podIP = ips[0]
	}
	return fields.Set{
		"spec.nodeName":            pod.Spec.NodeName,
		"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
		"spec.schedulerName":       pod.Spec.SchedulerName,
		"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(pod.Spec.HostNetwork),
		"status.phase":             string(pod.Status.Phase),
		"status.podIP":             podIP,
		"status.podIPs":            strings.Join(ips, ","),
		"status.nominatedNodeName": pod.Status.NominatedNodeName,
	}
}

// podDefault runs DefaultPodSpec and the defaults Kubernetes applies to Pod objects only.
func podDefault(pod *v1.Pod) {
	DefaultPodSpec(&pod.Spec)
	if pod.Spec.EnableServiceLinks == nil {
		enable := v1.DefaultEnableServiceLinks
		pod.Spec.EnableServiceLinks = &enable
	}
	for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			podRequestsFromLimits(&cs[i].Resources)
			if pod.Spec.HostNetwork {
				for j := range cs[i].Ports {
					if cs[i].Ports[j].HostPort == 0 {
						cs[i].Ports[j].HostPort = cs[i].Ports[j].ContainerPort
					}
				}
			}
		}
	}
	podNormalizeStatusIPs(&pod.Status)
}

// podRequestsFromLimits sets every request that is missing to its limit.
func podRequestsFromLimits(r *v1.ResourceRequirements) {
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = v1.ResourceList{}
	}
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = q.DeepCopy()
		}
	}
}

// podNormalizeStatusIPs keeps podIP/podIPs and hostIP/hostIPs consistent the way a real API
// server's conversion does: the singular field wins when both are set and differ.
func podNormalizeStatusIPs(s *v1.PodStatus) {
	if s.PodIP != "" && (len(s.PodIPs) == 0 || s.PodIPs[0].IP != s.PodIP) {
		s.PodIPs = []v1.PodIP{{IP: s.PodIP}}
	}
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}
	if s.HostIP != "" && (len(s.HostIPs) == 0 || s.HostIPs[0].IP != s.HostIP) {
		s.HostIPs = []v1.HostIP{{IP: s.HostIP}}
	}
	if len(s.HostIPs) > 0 {
		s.HostIP = s.HostIPs[0].IP
	}
}

func podPrepareForCreate(pod *v1.Pod) {
	// Defaults first: the QoS class depends on requests defaulted from limits, which a
	// real API server applies while decoding, before the strategy runs.
	podDefault(pod)
	pod.Status = v1.PodStatus{Phase: v1.PodPending, QOSClass: PodQOSClass(pod)}
	if len(pod.Spec.SchedulingGates) > 0 {
		pod.Status.Conditions = []v1.PodCondition{{
			Type:    v1.PodScheduled,
			Status:  v1.ConditionFalse,
			Reason:  v1.PodReasonSchedulingGated,
			Message: "Scheduling is blocked due to non-empty scheduling gates",
		}}
	}
}

// PodQOSClass computes a pod's quality-of-service class as Kubernetes does: BestEffort when
// no container (or the pod level) asks for CPU or memory, Guaranteed when every container
// limits both and requests equal limits, Burstable otherwise. Pod-level resources, when
// set, decide alone.
func PodQOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod == nil {
		return v1.PodQOSBestEffort
	}
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	guaranteed := true
	add := func(list v1.ResourceList, name v1.ResourceName, q resource.Quantity) {
		if cur, ok := list[name]; ok {
			q = q.DeepCopy()
			q.Add(cur)
		}
		list[name] = q
	}
	collect := func(r *v1.ResourceRequirements) {
		for name, q := range r.Requests {
			if podQoSResource(name) && q.Sign() > 0 {
				add(requests, name, q)
			}
		}
		found := sets.New[v1.ResourceName]()
		for name, q := range r.Limits {
			if podQoSResource(name) && q.Sign() > 0 {
				found.Insert(name)
				add(limits, name, q)
			}
		}
		if !found.HasAll(v1.ResourceCPU, v1.ResourceMemory) {
			guaranteed = false
		}
	}
	if r := pod.Spec.Resources; r != nil && (len(r.Requests) > 0 || len(r.Limits) > 0) {
		collect(r)
	} else {
		for i := range pod.Spec.Containers {
			collect(&pod.Spec.Containers[i].Resources)
		}
		for i := range pod.Spec.InitContainers {
			collect(&pod.Spec.InitContainers[i].Resources)
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

func podQoSResource(name v1.ResourceName) bool {
	return name == v1.ResourceCPU || name == v1.ResourceMemory
}

// podValidateSpecForPod is the spec validation every pod write gets: the shared PodSpec
// rules plus those Kubernetes applies only to Pod objects.
func podValidateSpecForPod(pod *v1.Pod) field.ErrorList {
	specPath := field.NewPath("spec")
	allErrs := ValidatePodSpec(&pod.Spec, specPath)
	for _, list := range []struct {
		name       string
		containers []v1.Container
	}{{"containers", pod.Spec.Containers}, {"initContainers", pod.Spec.InitContainers}} {
		for i, c := range list.containers {
			if len(c.Image) != len(strings.TrimSpace(c.Image)) {
				allErrs = append(allErrs, field.Invalid(specPath.Child(list.name).Index(i).Child("image"), c.Image, "must not have leading or trailing whitespace"))
			}
		}
	}
	if pod.Spec.HostNetwork {
		for i, c := range pod.Spec.Containers {
			for j, port := range c.Ports {
				if port.HostPort != port.ContainerPort {
					allErrs = append(allErrs, field.Invalid(specPath.Child("containers").Index(i).Child("ports").Index(j).Child("hostPort"),
						port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
				}
			}
		}
	}
	if pod.Spec.ServiceAccountName == "" {
		for vi, vol := range pod.Spec.Volumes {
			if vol.Projected == nil {
				continue
			}
			for si, src := range vol.Projected.Sources {
				if src.ServiceAccountToken != nil {
					allErrs = append(allErrs, field.Forbidden(specPath.Child("volumes").Index(vi).Child("projected").Child("sources").Index(si).Child("serviceAccountToken"),
						"must not be specified when serviceAccountName is not set"))
				}
			}
		}
	}
	return allErrs
}

func podValidateCreate(pod *v1.Pod) field.ErrorList {
	specPath := field.NewPath("spec")
	allErrs := podValidateSpecForPod(pod)
	if len(pod.Spec.EphemeralContainers) > 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if pod.Spec.NodeName != "" && len(pod.Spec.SchedulingGates) != 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return allErrs
}

// podValidateUpdate allows only the mutations Kubernetes allows on a pod spec; everything
// else is one Forbidden error with a diff, in Kubernetes' words. spec.nodeName is not in
// the list, so it changes only through the binding subresource.
func podValidateUpdate(pod, old *v1.Pod) field.ErrorList {
	specPath := field.NewPath("spec")
	allErrs := podValidateSpecForPod(pod)

	for _, list := range []struct {
		name     string
		new, old []v1.Container
	}{{"containers", pod.Spec.Containers, old.Spec.Containers}, {"initContainers", pod.Spec.InitContainers, old.Spec.InitContainers}} {
		if len(list.new) != len(list.old) {
			return append(allErrs, field.Forbidden(specPath.Child(list.name), "pod updates may not add or remove containers"))
		}
	}

	if pod.Spec.ActiveDeadlineSeconds != nil {
		v := *pod.Spec.ActiveDeadlineSeconds
		if v < 0 || v > math.MaxInt32 {
			return append(allErrs, field.Invalid(specPath.Child("activeDeadlineSeconds"), v, validation.InclusiveRangeError(0, math.MaxInt32)))
		}
		if old.Spec.ActiveDeadlineSeconds != nil && *old.Spec.ActiveDeadlineSeconds < v {
			return append(allErrs, field.Invalid(specPath.Child("activeDeadlineSeconds"), v, "must be less than or equal to previous value"))
		}
	} else if old.Spec.ActiveDeadlineSeconds != nil {
		allErrs = append(allErrs, field.Invalid(specPath.Child("activeDeadlineSeconds"), pod.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
	}

	allErrs = append(allErrs, podValidateOnlyAddedTolerations(pod.Spec.Tolerations, old.Spec.Tolerations, specPath.Child("tolerations"))...)
	allErrs = append(allErrs, podValidateOnlyDeletedGates(pod.Spec.SchedulingGates, old.Spec.SchedulingGates, specPath.Child("schedulingGates"))...)

	if apiequality.Semantic.DeepEqual(pod.Spec, old.Spec) {
		return allErrs
	}
	// Put back what may change, then anything left over is a forbidden change.
	munged := pod.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = old.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = old.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = old.Spec.ActiveDeadlineSeconds
	munged.SchedulingGates = old.Spec.SchedulingGates
	munged.Tolerations = old.Spec.Tolerations
	if g := old.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 && munged.TerminationGracePeriodSeconds != nil && *munged.TerminationGracePeriodSeconds == 1 {
		munged.TerminationGracePeriodSeconds = g
	}
	// A gated pod may still get node selector additions.
	if len(old.Spec.SchedulingGates) > 0 && !apiequality.Semantic.DeepEqual(munged.NodeSelector, old.Spec.NodeSelector) {
		allErrs = append(allErrs, podValidateNodeSelectorAdditions(munged.NodeSelector, old.Spec.NodeSelector, specPath.Child("nodeSelector"))...)
		munged.NodeSelector = old.Spec.NodeSelector
	}
	if !apiequality.Semantic.DeepEqual(*munged, old.Spec) {
		allErrs = append(allErrs, field.Forbidden(specPath, fmt.Sprintf("pod updates may not change fields other than %s\n%v",
			strings.Join(podUpdatableFields, ","), diff.Diff(old.Spec, *munged))))
	}
	return allErrs
}

// podEphemeralPrepareForUpdate keeps everything of the stored pod but the
// ephemeral containers (and the client's resourceVersion precondition): a write
// through pods/ephemeralcontainers changes nothing else, whatever else it carries.
func podEphemeralPrepareForUpdate(pod, old *v1.Pod) {
	kept := old.DeepCopy()
	kept.ResourceVersion = pod.ResourceVersion
	kept.Spec.EphemeralContainers = pod.Spec.EphemeralContainers
	*pod = *kept
}

// podValidateEphemeralContainersUpdate checks a write through pods/ephemeralcontainers
// as Kubernetes does: the pod must still be valid (which checks every ephemeral
// container), a static pod's mirror takes none, and the existing ones stay as they
// are; matched by name, since a patch need not keep their order.
func podValidateEphemeralContainersUpdate(pod, old *v1.Pod) field.ErrorList {
	if _, mirror := old.Annotations[v1.MirrorPodAnnotationKey]; mirror {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods do not support ephemeral containers")}
	}
	allErrs := podValidateSpecForPod(pod)
	fldPath := field.NewPath("spec", "ephemeralContainers")
	current := make(map[string]*v1.EphemeralContainer, len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.EphemeralContainers {
		current[pod.Spec.EphemeralContainers[i].Name] = &pod.Spec.EphemeralContainers[i]
	}
	for _, was := range old.Spec.EphemeralContainers {
		now, ok := current[was.Name]
		switch {
		case !ok:
			allErrs = append(allErrs, field.Forbidden(fldPath, fmt.Sprintf("existing ephemeral containers %q may not be removed\n", was.Name)))
		case !apiequality.Semantic.DeepEqual(was, *now):
			allErrs = append(allErrs, field.Forbidden(fldPath, fmt.Sprintf("existing ephemeral containers %q may not be changed\n%v", was.Name, diff.Diff(was, *now))))
		}
	}
	return allErrs
}

func podValidateOnlyAddedTolerations(tolerations, old []v1.Toleration, fldPath *field.Path) field.ErrorList {
	for _, o := range old {
		found := false
		for _, t := range tolerations {
			clone := *o.DeepCopy()
			clone.TolerationSeconds = t.TolerationSeconds
			if apiequality.Semantic.DeepEqual(clone, t) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(fldPath, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return podValidateTolerations(tolerations, fldPath)
}

func podValidateOnlyDeletedGates(gates, old []v1.PodSchedulingGate, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	oldNames := sets.New[string]()
	for _, g := range old {
		oldNames.Insert(g.Name)
	}
	for i, g := range gates {
		if !oldNames.Has(g.Name) {
			allErrs = append(allErrs, field.Forbidden(fldPath.Index(i).Child("name"), fmt.Sprintf("only deletion is allowed, but found new scheduling gate '%s'", g.Name)))
		}
	}
	return allErrs
}

func podValidateNodeSelectorAdditions(sel, old map[string]string, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	for k, v := range old {
		if nv, ok := sel[k]; !ok || nv != v {
			allErrs = append(allErrs, field.Invalid(fldPath, sel, "only additions to spec.nodeSelector are allowed (no mutations or deletions)"))
			break
		}
	}
	return allErrs
}

// podValidateStatusUpdate checks a status write: condition types, nominated node, an
// unchanged QoS class, phase values, consistent pod and host IPs, and no terminated
// container coming back when the restart policy forbids it (an ephemeral one never).
func podValidateStatusUpdate(pod, old *v1.Pod) field.ErrorList {
	allErrs := field.ErrorList{}
	statusPath := field.NewPath("status")
	system := sets.New(v1.PodScheduled, v1.PodReady, v1.PodInitialized, v1.ContainersReady)
	for i, c := range pod.Status.Conditions {
		if !system.Has(c.Type) {
			allErrs = append(allErrs, podQualifiedName(string(c.Type), statusPath.Child("conditions").Index(i).Child("type"))...)
		}
	}
	if n := pod.Status.NominatedNodeName; n != old.Status.NominatedNodeName && n != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(n, false) {
			allErrs = append(allErrs, field.Invalid(statusPath.Child("nominatedNodeName"), n, msg))
		}
	}
	allErrs = append(allErrs, apivalidation.ValidateImmutableField(pod.Status.QOSClass, old.Status.QOSClass, statusPath.Child("qosClass"))...)
	if p := pod.Status.Phase; p != "" {
		valid := []string{string(v1.PodPending), string(v1.PodRunning), string(v1.PodSucceeded), string(v1.PodFailed), string(v1.PodUnknown)}
		if !sets.New(valid...).Has(string(p)) {
			allErrs = append(allErrs, field.NotSupported(statusPath.Child("phase"), p, valid))
		}
	}
	allErrs = append(allErrs, podValidateStateTransitions(pod.Status.ContainerStatuses, old.Status.ContainerStatuses, statusPath.Child("containerStatuses"), old.Spec.RestartPolicy, nil)...)
	allErrs = append(allErrs, podValidateStateTransitions(pod.Status.InitContainerStatuses, old.Status.InitContainerStatuses, statusPath.Child("initContainerStatuses"), old.Spec.RestartPolicy, old.Spec.InitContainers)...)
	// Ephemeral containers are never restarted, whatever the pod's policy.
	allErrs = append(allErrs, podValidateStateTransitions(pod.Status.EphemeralContainerStatuses, old.Status.EphemeralContainerStatuses, statusPath.Child("ephemeralContainerStatuses"), v1.RestartPolicyNever, nil)...)
	allErrs = append(allErrs, podValidateIPs(pod.Status.PodIP, podIPStrings(pod.Status.PodIPs), statusPath.Child("podIPs"), "podIP")...)
	hostIPs := make([]string, 0, len(pod.Status.HostIPs))
	for _, ip := range pod.Status.HostIPs {
		hostIPs = append(hostIPs, ip.IP)
	}
	allErrs = append(allErrs, podValidateIPs(pod.Status.HostIP, hostIPs, statusPath.Child("hostIPs"), "hostIP")...)
	return allErrs
}

func podIPStrings(ips []v1.PodIP) []string {
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, ip.IP)
	}
	return out
}

// podValidateIPs checks a status IP list: valid addresses, the first equal to the singular
// field, at most one per family, no duplicates.
func podValidateIPs(single string, ips []string, fldPath *field.Path, singleName string) field.ErrorList {
	allErrs := field.ErrorList{}
	if len(ips) == 0 {
		return allErrs
	}
	if single != ips[0] {
		allErrs = append(allErrs, field.Invalid(fldPath.Index(0).Child("ip"), ips[0], fmt.Sprintf("must be equal to `%s`", singleName)))
	}
	for i, ip := range ips {
		allErrs = append(allErrs, validation.IsValidIP(fldPath.Index(i), ip)...)
	}
	if len(ips) > 1 {
		if dual, err := netutils.IsDualStackIPStrings(ips); err != nil || !dual || len(ips) > 2 {
			allErrs = append(allErrs, field.Invalid(fldPath, ips, "may specify no more than one IP for each IP family"))
		}
		seen := sets.New[string]()
		for i, ip := range ips {
			if seen.Has(ip) {
				allErrs = append(allErrs, field.Duplicate(fldPath.Index(i), ip))
			}
			seen.Insert(ip)
		}
	}
	return allErrs
}

// podValidateStateTransitions forbids a terminated container from running again unless
// the restart policy (or, for a sidecar init container, its own policy) restarts it.
func podValidateStateTransitions(statuses, old []v1.ContainerStatus, fldPath *field.Path, policy v1.RestartPolicy, inits []v1.Container) field.ErrorList {
	allErrs := field.ErrorList{}
	if policy == v1.RestartPolicyAlways {
		return allErrs
	}
	for i, o := range old {
		if o.State.Terminated == nil {
			continue
		}
		if o.State.Terminated.ExitCode != 0 && policy == v1.RestartPolicyOnFailure {
			continue
		}
		if podIsSidecar(inits, o.Name) {
			continue
		}
		for _, s := range statuses {
			if s.Name == o.Name && s.State.Terminated == nil {
				allErrs = append(allErrs, field.Forbidden(fldPath.Index(i).Child("state"), "may not be transitioned to non-terminated state"))
			}
		}
	}
	return allErrs
}

func podIsSidecar(inits []v1.Container, name string) bool {
	for _, c := range inits {
		if c.Name == name {
			return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		}
	}
	return false
}

// podPreserveObservedGeneration keeps the stored status.observedGeneration, and each
// condition's, when a status write leaves them out (0), as kube-apiserver's pod status
// strategy does: a client that does not know the field cannot clear it.
func podPreserveObservedGeneration(pod, old *v1.Pod) {
	if pod.Status.ObservedGeneration == 0 {
		pod.Status.ObservedGeneration = old.Status.ObservedGeneration
	}
	// Conditions of one type pair up in order.
	stored := map[v1.PodConditionType][]int64{}
	for _, c := range old.Status.Conditions {
		stored[c.Type] = append(stored[c.Type], c.ObservedGeneration)
	}
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		var g int64
		if gs := stored[c.Type]; len(gs) > 0 {
			g, stored[c.Type] = gs[0], gs[1:]
		}
		if c.ObservedGeneration == 0 {
			c.ObservedGeneration = g
		}
	}
}
