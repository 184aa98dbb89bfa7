package daemonset

import (
	"slices"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Node taint keys whose tolerations Kubernetes adds to every daemon pod, so
// that a node's transient conditions neither stop nor evict its daemons.
const (
	taintNotReady           = "node.kubernetes.io/not-ready"
	taintUnreachable        = "node.kubernetes.io/unreachable"
	taintDiskPressure       = "node.kubernetes.io/disk-pressure"
	taintMemoryPressure     = "node.kubernetes.io/memory-pressure"
	taintPIDPressure        = "node.kubernetes.io/pid-pressure"
	taintUnschedulable      = "node.kubernetes.io/unschedulable"
	taintNetworkUnavailable = "node.kubernetes.io/network-unavailable"
)

// nodeNameField is the only field a node selector's matchFields may name.
const nodeNameField = "metadata.name"

// daemonTolerations returns the tolerations upstream adds to a daemon pod:
// NoExecute for not-ready and unreachable, NoSchedule for the pressure and
// unschedulable taints, and network-unavailable for host-network pods.
func daemonTolerations(spec *v1.PodSpec) []v1.Toleration {
	t := []v1.Toleration{
		{Key: taintNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
		{Key: taintUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
		{Key: taintDiskPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: taintMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: taintPIDPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: taintUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	}
	if spec.HostNetwork {
		t = append(t, v1.Toleration{Key: taintNetworkUnavailable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule})
	}
	return t
}

// addTolerations adds each toleration of add to spec as upstream does: one that
// matches a toleration of the template (same key, operator, value and effect)
// replaces it where it stands, so that a daemon tolerates not-ready and unreachable
// for ever even when its template gave those tolerations tolerationSeconds; the
// others are appended after the template's own.
func addTolerations(spec *v1.PodSpec, add []v1.Toleration) {
	for _, t := range add {
		found := false
		for i := range spec.Tolerations {
			if spec.Tolerations[i].MatchToleration(&t) {
				spec.Tolerations[i] = t
				found = true
			}
		}
		if !found {
			spec.Tolerations = append(spec.Tolerations, t)
		}
	}
}

// nodeFit says whether a daemon pod should be started on the node
// (shouldRun) and whether an existing one may stay (shouldContinue), from
// the pod template's nodeName, nodeSelector, required node affinity and the
// node's taints, as upstream's NodeShouldRunDaemonPod decides with the same
// component-helpers the scheduler uses.
func nodeFit(ds *appsv1.DaemonSet, node *v1.Node) (shouldRun, shouldContinue bool) {
	if ds == nil || node == nil {
		return false, false
	}
	spec := &ds.Spec.Template.Spec
	if spec.NodeName != "" && spec.NodeName != node.Name {
		return false, false
	}
	// A term that does not parse matches nothing; the error adds nothing
	// the API server's validation has not said already.
	if fits, _ := nodeaffinity.NewRequiredNodeAffinity(spec.NodeSelector, spec.Affinity).Match(node); !fits {
		return false, false
	}
	tolerations := append(append([]v1.Toleration(nil), spec.Tolerations...), daemonTolerations(spec)...)
	untolerated := func(effects ...v1.TaintEffect) bool {
		_, found := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), node.Spec.Taints, tolerations, func(t *v1.Taint) bool {
			return slices.Contains(effects, t.Effect)
		}, false)
		return found
	}
	if untolerated(v1.TaintEffectNoSchedule, v1.TaintEffectNoExecute) {
		return false, !untolerated(v1.TaintEffectNoExecute)
	}
	return true, true
}

// targetNode is the node a daemon pod belongs to: its spec.nodeName once
// bound, else the node its matchFields metadata.name affinity pins it to.
func targetNode(pod *v1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == nodeNameField && f.Operator == v1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// pinToNode replaces the required node affinity with the single term
// "metadata.name In [node]", as upstream does, so that the default scheduler
// binds the pod to that node; preferred terms are kept.
func pinToNode(spec *v1.PodSpec, node string) {
	if spec.Affinity == nil {
		spec.Affinity = &v1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &v1.NodeAffinity{}
	}
	spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchFields: []v1.NodeSelectorRequirement{{Key: nodeNameField, Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
		}},
	}
}
