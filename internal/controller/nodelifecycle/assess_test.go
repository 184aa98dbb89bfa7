package nodelifecycle

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// t0 is the tests' reference time; nodes are created an hour before.
var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

const grace = 40 * time.Second

func at(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }

func atp(d time.Duration) *metav1.Time {
	t := at(d)
	return &t
}

func makeNode(name string, mutate func(*v1.Node)) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: at(-time.Hour)}}
	if mutate != nil {
		mutate(n)
	}
	return n
}

// cond builds a node condition with heartbeat and transition at the given
// offsets from t0.
func cond(t v1.NodeConditionType, s v1.ConditionStatus, heartbeat time.Duration) v1.NodeCondition {
	return v1.NodeCondition{
		Type: t, Status: s, Reason: "Kubelet" + string(s), Message: "kubelet says " + string(s),
		LastHeartbeatTime: at(heartbeat), LastTransitionTime: at(-time.Hour),
	}
}

// healthy is what a kubelet posts at heartbeat.
func healthy(heartbeat time.Duration) []v1.NodeCondition {
	return []v1.NodeCondition{
		cond(v1.NodeMemoryPressure, v1.ConditionFalse, heartbeat),
		cond(v1.NodeDiskPressure, v1.ConditionFalse, heartbeat),
		cond(v1.NodePIDPressure, v1.ConditionFalse, heartbeat),
		cond(v1.NodeReady, v1.ConditionTrue, heartbeat),
	}
}

func withConditions(c []v1.NodeCondition) func(*v1.Node) {
	return func(n *v1.Node) { n.Status.Conditions = c }
}

func makeLease(node string, renew time.Duration) *coordinationv1.Lease {
	t := metav1.NewMicroTime(t0.Add(renew))
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: v1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &t},
	}
}

// unknown is c after a silent grace period ended at t0.
func unknown(c v1.NodeCondition) v1.NodeCondition {
	c.Status = v1.ConditionUnknown
	c.Reason = "NodeStatusUnknown"
	c.Message = "Kubelet stopped posting node status."
	c.LastTransitionTime = at(0)
	return c
}

func neverUpdated(t v1.NodeConditionType) v1.NodeCondition {
	return v1.NodeCondition{
		Type: t, Status: v1.ConditionUnknown, Reason: "NodeStatusNeverUpdated",
		Message: "Kubelet never posted node status.", LastHeartbeatTime: at(-time.Hour), LastTransitionTime: at(0),
	}
}

func taint(key string, effect v1.TaintEffect, added *metav1.Time) v1.Taint {
	return v1.Taint{Key: key, Effect: effect, TimeAdded: added}
}

func TestAssess(t *testing.T) {
	stale := healthy(-41 * time.Second)
	user := v1.Taint{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoExecute}
	for _, tc := range []struct {
		name        string
		node        *v1.Node
		lease       *coordinationv1.Lease
		wantConds   []v1.NodeCondition
		wantTaints  []v1.Taint
		wantChanged bool
	}{{
		name:      "fresh heartbeat, no lease",
		node:      makeNode("n", withConditions(healthy(-5*time.Second))),
		wantConds: healthy(-5 * time.Second),
	}, {
		name:      "stale heartbeat, fresh lease",
		node:      makeNode("n", withConditions(stale)),
		lease:     makeLease("n", -10*time.Second),
		wantConds: stale,
	}, {
		name:      "exactly the grace period is not stale",
		node:      makeNode("n", withConditions(healthy(-40*time.Second))),
		lease:     makeLease("n", -50*time.Second),
		wantConds: healthy(-40 * time.Second),
	}, {
		name:  "silent past the grace period",
		node:  makeNode("n", withConditions(append(stale, cond(v1.NodeNetworkUnavailable, v1.ConditionFalse, -time.Hour)))),
		lease: makeLease("n", -41*time.Second),
		wantConds: []v1.NodeCondition{
			unknown(stale[0]), unknown(stale[1]), unknown(stale[2]), unknown(stale[3]),
			cond(v1.NodeNetworkUnavailable, v1.ConditionFalse, -time.Hour),
		},
		wantTaints: []v1.Taint{
			taint(v1.TaintNodeUnreachable, v1.TaintEffectNoSchedule, atp(0)),
			taint(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, atp(0)),
		},
		wantChanged: true,
	}, {
		name: "never posted status, created long ago",
		node: makeNode("n", nil),
		wantConds: []v1.NodeCondition{
			neverUpdated(v1.NodeReady), neverUpdated(v1.NodeMemoryPressure),
			neverUpdated(v1.NodeDiskPressure), neverUpdated(v1.NodePIDPressure),
		},
		wantTaints: []v1.Taint{
			taint(v1.TaintNodeUnreachable, v1.TaintEffectNoSchedule, atp(0)),
			taint(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, atp(0)),
		},
		wantChanged: true,
	}, {
		name:      "never posted status, just created",
		node:      makeNode("n", func(n *v1.Node) { n.CreationTimestamp = at(-10 * time.Second) }),
		wantConds: nil,
	}, {
		name:  "never posted status but renews its lease",
		node:  makeNode("n", nil),
		lease: makeLease("n", -time.Second),
	}, {
		name: "already unknown: conditions kept, missing taint added, others kept",
		node: makeNode("n", func(n *v1.Node) {
			n.Status.Conditions = []v1.NodeCondition{unknown(stale[3])}
			n.Spec.Taints = []v1.Taint{taint(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, atp(-time.Minute)), user}
		}),
		wantConds: []v1.NodeCondition{
			unknown(stale[3]), neverUpdated(v1.NodeMemoryPressure),
			neverUpdated(v1.NodeDiskPressure), neverUpdated(v1.NodePIDPressure),
		},
		wantTaints: []v1.Taint{
			taint(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, atp(-time.Minute)), user,
			taint(v1.TaintNodeUnreachable, v1.TaintEffectNoSchedule, atp(0)),
		},
		wantChanged: true,
	}, {
		name: "ready false swaps unreachable for not-ready",
		node: makeNode("n", func(n *v1.Node) {
			n.Status.Conditions = []v1.NodeCondition{cond(v1.NodeReady, v1.ConditionFalse, -time.Second)}
			n.Spec.Taints = []v1.Taint{
				taint(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, atp(-time.Minute)),
				taint(v1.TaintNodeUnreachable, v1.TaintEffectNoSchedule, atp(-time.Minute)),
			}
		}),
		wantConds: []v1.NodeCondition{cond(v1.NodeReady, v1.ConditionFalse, -time.Second)},
		wantTaints: []v1.Taint{
			taint(v1.TaintNodeNotReady, v1.TaintEffectNoSchedule, atp(0)),
			taint(v1.TaintNodeNotReady, v1.TaintEffectNoExecute, atp(0)),
		},
	}, {
		name: "ready again: condition taints go, user taints stay",
		node: makeNode("n", func(n *v1.Node) {
			n.Status.Conditions = healthy(-time.Second)
			n.Spec.Taints = []v1.Taint{
				taint(v1.TaintNodeNotReady, v1.TaintEffectNoSchedule, nil),
				user,
				taint(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, atp(-time.Minute)),
				taint(v1.TaintNodeUnreachable, v1.TaintEffectPreferNoSchedule, nil),
			}
		}),
		wantConds:  healthy(-time.Second),
		wantTaints: []v1.Taint{user, taint(v1.TaintNodeUnreachable, v1.TaintEffectPreferNoSchedule, nil)},
	}, {
		name: "pressure, network and cordon taints",
		node: makeNode("n", func(n *v1.Node) {
			c := healthy(-time.Second)
			c[0].Status = v1.ConditionTrue
			c[2].Status = v1.ConditionTrue
			n.Status.Conditions = append(c, cond(v1.NodeNetworkUnavailable, v1.ConditionTrue, -time.Hour))
			n.Spec.Unschedulable = true
		}),
		wantConds: func() []v1.NodeCondition {
			c := healthy(-time.Second)
			c[0].Status = v1.ConditionTrue
			c[2].Status = v1.ConditionTrue
			return append(c, cond(v1.NodeNetworkUnavailable, v1.ConditionTrue, -time.Hour))
		}(),
		wantTaints: []v1.Taint{
			taint(v1.TaintNodeMemoryPressure, v1.TaintEffectNoSchedule, atp(0)),
			taint(v1.TaintNodeNetworkUnavailable, v1.TaintEffectNoSchedule, atp(0)),
			taint(v1.TaintNodePIDPressure, v1.TaintEffectNoSchedule, atp(0)),
			taint(v1.TaintNodeUnschedulable, v1.TaintEffectNoSchedule, atp(0)),
		},
	}, {
		name: "nil node",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var before *v1.Node
			if tc.node != nil {
				before = tc.node.DeepCopy()
			}
			conds, taints, changed := assess(tc.node, tc.lease, t0, grace)
			opts := cmpopts.EquateEmpty()
			if d := cmp.Diff(tc.wantConds, conds, opts); d != "" {
				t.Errorf("conditions (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantTaints, taints, opts); d != "" {
				t.Errorf("taints (-want +got):\n%s", d)
			}
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			if d := cmp.Diff(before, tc.node); d != "" {
				t.Errorf("assess modified its input (-before +after):\n%s", d)
			}
		})
	}
}

func TestAssessToleratesGarbage(t *testing.T) {
	for _, n := range []*v1.Node{
		{},
		{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{}}}},
		{Spec: v1.NodeSpec{Taints: []v1.Taint{{}}}},
	} {
		assess(n, &coordinationv1.Lease{}, t0, grace)
		assess(n, nil, time.Time{}, 0)
	}
}
