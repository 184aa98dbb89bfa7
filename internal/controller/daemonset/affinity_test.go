package daemonset

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/testutil"
)

// TestNodeFitAgreesWithScheduler runs the cases the scheduler's
// NodeAffinity filter runs too (see testutil.AffinityCases).
func TestNodeFitAgreesWithScheduler(t *testing.T) {
	for _, tc := range testutil.AffinityCases() {
		t.Run(tc.Name, func(t *testing.T) {
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ds"}}
			ds.Spec.Template.Spec = v1.PodSpec{NodeSelector: tc.NodeSelector, Affinity: tc.Affinity}
			run, cont := nodeFit(ds, tc.Node)
			if run != tc.Match || cont != tc.Match {
				t.Errorf("shouldRun, shouldContinue = %v, %v; want %v for both", run, cont, tc.Match)
			}
		})
	}
}

// TestNodeFitTaints: NoSchedule stops new daemons only; NoExecute also
// evicts; the tolerations every daemon gets cover node conditions.
func TestNodeFitTaints(t *testing.T) {
	for _, tc := range []struct {
		name      string
		taint     v1.Taint
		tolerate  []v1.Toleration
		run, cont bool
	}{
		{name: "PreferNoSchedule is ignored", taint: v1.Taint{Key: "k", Effect: v1.TaintEffectPreferNoSchedule}, run: true, cont: true},
		{name: "NoSchedule keeps running daemons", taint: v1.Taint{Key: "k", Effect: v1.TaintEffectNoSchedule}, cont: true},
		{name: "NoExecute evicts", taint: v1.Taint{Key: "k", Effect: v1.TaintEffectNoExecute}},
		{name: "tolerated NoExecute", taint: v1.Taint{Key: "k", Value: "v", Effect: v1.TaintEffectNoExecute},
			tolerate: []v1.Toleration{{Key: "k", Operator: v1.TolerationOpEqual, Value: "v"}}, run: true, cont: true},
		{name: "not-ready is tolerated by every daemon", taint: v1.Taint{Key: taintNotReady, Effect: v1.TaintEffectNoExecute}, run: true, cont: true},
		{name: "unschedulable is tolerated by every daemon", taint: v1.Taint{Key: taintUnschedulable, Effect: v1.TaintEffectNoSchedule}, run: true, cont: true},
		{name: "network-unavailable only for host-network daemons", taint: v1.Taint{Key: taintNetworkUnavailable, Effect: v1.TaintEffectNoSchedule}, cont: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ds"}}
			ds.Spec.Template.Spec.Tolerations = tc.tolerate
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: v1.NodeSpec{Taints: []v1.Taint{tc.taint}}}
			run, cont := nodeFit(ds, node)
			if run != tc.run || cont != tc.cont {
				t.Errorf("shouldRun, shouldContinue = %v, %v; want %v, %v", run, cont, tc.run, tc.cont)
			}
		})
	}
}
