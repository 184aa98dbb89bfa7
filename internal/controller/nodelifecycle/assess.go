package nodelifecycle

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition reasons and messages Kubernetes' node lifecycle controller
// writes when a node's kubelet goes silent.
const (
	reasonNodeStatusUnknown      = "NodeStatusUnknown"
	messageNodeStatusUnknown     = "Kubelet stopped posting node status."
	reasonNodeStatusNeverUpdated = "NodeStatusNeverUpdated"
	messageNodeStatusNeverUpdate = "Kubelet never posted node status."
)

// staleConditionTypes are the conditions set to Unknown on a silent node,
// in the order missing ones are added. NetworkUnavailable is left alone,
// as in Kubernetes: the network plugin, not the kubelet, owns it.
var staleConditionTypes = []v1.NodeConditionType{
	v1.NodeReady, v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure,
}

// conditionTaint maps a node condition in a given status to the key of the
// taint it calls for; Kubernetes' mapping (taint nodes by condition).
type conditionTaint struct {
	condition v1.NodeConditionType
	status    v1.ConditionStatus
	key       string
}

// conditionTaints lists, in the order new taints are added, every
// condition-driven NoSchedule taint. The Ready ones also come as NoExecute.
var conditionTaints = []conditionTaint{
	{v1.NodeReady, v1.ConditionFalse, v1.TaintNodeNotReady},
	{v1.NodeReady, v1.ConditionUnknown, v1.TaintNodeUnreachable},
	{v1.NodeMemoryPressure, v1.ConditionTrue, v1.TaintNodeMemoryPressure},
	{v1.NodeDiskPressure, v1.ConditionTrue, v1.TaintNodeDiskPressure},
	{v1.NodeNetworkUnavailable, v1.ConditionTrue, v1.TaintNodeNetworkUnavailable},
	{v1.NodePIDPressure, v1.ConditionTrue, v1.TaintNodePIDPressure},
}

// assess is the node's health check at now: when neither its Lease nor its
// Ready heartbeat (nor, for a node that never reported, its creation) is
// more recent than grace, the Ready and pressure conditions become Unknown
// as in Kubernetes, keeping their last heartbeat. newConditions is the
// node's full condition list afterwards and changed reports whether it
// differs from the node's (and so needs a status write). taints is the
// node's full spec.taints as it should be for newConditions: taints of
// others kept in place, condition taints (not-ready or unreachable as
// NoSchedule and NoExecute, pressure and network-unavailable as
// NoSchedule) and the unschedulable taint added with TimeAdded now or
// removed. lease may be nil; a nil node yields nothing.
func assess(node *v1.Node, lease *coordinationv1.Lease, now time.Time, grace time.Duration) (newConditions []v1.NodeCondition, taints []v1.Taint, changed bool) {
	if node == nil {
		return nil, nil, false
	}
	newConditions = make([]v1.NodeCondition, len(node.Status.Conditions))
	for i := range node.Status.Conditions {
		node.Status.Conditions[i].DeepCopyInto(&newConditions[i])
	}
	if now.Sub(lastHeard(node, lease)) > grace {
		stamp := metav1.NewTime(now)
		for _, t := range staleConditionTypes {
			c := findCondition(newConditions, t)
			switch {
			case c == nil:
				newConditions = append(newConditions, v1.NodeCondition{
					Type:               t,
					Status:             v1.ConditionUnknown,
					Reason:             reasonNodeStatusNeverUpdated,
					Message:            messageNodeStatusNeverUpdate,
					LastHeartbeatTime:  node.CreationTimestamp,
					LastTransitionTime: stamp,
				})
				changed = true
			case c.Status != v1.ConditionUnknown:
				c.Status = v1.ConditionUnknown
				c.Reason = reasonNodeStatusUnknown
				c.Message = messageNodeStatusUnknown
				c.LastTransitionTime = stamp
				changed = true
			}
		}
	}
	return newConditions, desiredTaints(node, newConditions, now), changed
}

// lastHeard is the latest sign of life of node: its Lease's renewTime, its
// Ready condition's lastHeartbeatTime, or else its creation.
func lastHeard(node *v1.Node, lease *coordinationv1.Lease) time.Time {
	t := node.CreationTimestamp.Time
	if ready := findCondition(node.Status.Conditions, v1.NodeReady); ready != nil && ready.LastHeartbeatTime.Time.After(t) {
		t = ready.LastHeartbeatTime.Time
	}
	if lease != nil && lease.Spec.RenewTime != nil && lease.Spec.RenewTime.Time.After(t) {
		t = lease.Spec.RenewTime.Time
	}
	return t
}

// desiredTaints returns node's taints with the controller's set to match
// conds and spec.unschedulable: existing taints stay where they are (with
// their TimeAdded), missing ones are appended with TimeAdded now.
func desiredTaints(node *v1.Node, conds []v1.NodeCondition, now time.Time) []v1.Taint {
	var want []v1.Taint
	for _, ct := range conditionTaints {
		c := findCondition(conds, ct.condition)
		if c == nil || c.Status != ct.status {
			continue
		}
		want = append(want, v1.Taint{Key: ct.key, Effect: v1.TaintEffectNoSchedule})
		if ct.condition == v1.NodeReady {
			want = append(want, v1.Taint{Key: ct.key, Effect: v1.TaintEffectNoExecute})
		}
	}
	if node.Spec.Unschedulable {
		want = append(want, v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
	}

	var out []v1.Taint
	for _, t := range node.Spec.Taints {
		if !managedTaint(t) || containsTaint(want, t) {
			out = append(out, *t.DeepCopy())
		}
	}
	for _, t := range want {
		if !containsTaint(out, t) {
			stamp := metav1.NewTime(now)
			t.TimeAdded = &stamp
			out = append(out, t)
		}
	}
	return out
}

// managedTaint reports whether t is one this controller adds and removes:
// a condition taint or the unschedulable taint, with the effect it uses.
func managedTaint(t v1.Taint) bool {
	if t.Effect == v1.TaintEffectNoExecute {
		return t.Key == v1.TaintNodeNotReady || t.Key == v1.TaintNodeUnreachable
	}
	if t.Effect != v1.TaintEffectNoSchedule {
		return false
	}
	if t.Key == v1.TaintNodeUnschedulable {
		return true
	}
	for _, ct := range conditionTaints {
		if ct.key == t.Key {
			return true
		}
	}
	return false
}

// containsTaint reports whether list has a taint with t's key and effect,
// the pair the API server keeps unique.
func containsTaint(list []v1.Taint, t v1.Taint) bool {
	for _, l := range list {
		if l.Key == t.Key && l.Effect == t.Effect {
			return true
		}
	}
	return false
}

// findCondition returns a pointer into conds to the condition of type t.
func findCondition(conds []v1.NodeCondition, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// readyStatus is the status of the Ready condition in conds, "" without one.
func readyStatus(conds []v1.NodeCondition) v1.ConditionStatus {
	if c := findCondition(conds, v1.NodeReady); c != nil {
		return c.Status
	}
	return ""
}
