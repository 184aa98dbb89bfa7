package daemonset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

// TestDaemonTolerations: the tolerations a daemon pod gets on top of its template's,
// as upstream's DaemonSet controller adds them.
func TestDaemonTolerations(t *testing.T) {
	secs := func(s int64) *int64 { return &s }
	exists := func(key string, effect v1.TaintEffect) v1.Toleration {
		return v1.Toleration{Key: key, Operator: v1.TolerationOpExists, Effect: effect}
	}
	auto := []v1.Toleration{
		exists(taintNotReady, v1.TaintEffectNoExecute), exists(taintUnreachable, v1.TaintEffectNoExecute),
		exists(taintDiskPressure, v1.TaintEffectNoSchedule), exists(taintMemoryPressure, v1.TaintEffectNoSchedule),
		exists(taintPIDPressure, v1.TaintEffectNoSchedule), exists(taintUnschedulable, v1.TaintEffectNoSchedule),
	}
	dedicated := v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "infra", Effect: v1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name string
		spec v1.PodSpec
		want []v1.Toleration
	}{{
		name: "none of its own",
		want: auto,
	}, {
		name: "its own come first",
		spec: v1.PodSpec{Tolerations: []v1.Toleration{dedicated}},
		want: append([]v1.Toleration{dedicated}, auto...),
	}, {
		name: "hostNetwork also tolerates network-unavailable",
		spec: v1.PodSpec{HostNetwork: true},
		want: append(append([]v1.Toleration(nil), auto...), exists(taintNetworkUnavailable, v1.TaintEffectNoSchedule)),
	}, {
		name: "a template's limited not-ready toleration is replaced in place: daemons stay",
		spec: v1.PodSpec{Tolerations: []v1.Toleration{
			{Key: taintNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: secs(60)}, dedicated}},
		want: append([]v1.Toleration{exists(taintNotReady, v1.TaintEffectNoExecute), dedicated}, auto[1:]...),
	}, {
		name: "a toleration of the key for any effect is not the same toleration",
		spec: v1.PodSpec{Tolerations: []v1.Toleration{{Key: taintUnreachable, Operator: v1.TolerationOpExists, TolerationSeconds: secs(5)}}},
		want: append([]v1.Toleration{{Key: taintUnreachable, Operator: v1.TolerationOpExists, TolerationSeconds: secs(5)}}, auto...),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec.DeepCopy()
			addTolerations(spec, daemonTolerations(spec))
			if d := cmp.Diff(tc.want, spec.Tolerations); d != "" {
				t.Errorf("tolerations (-want +got):\n%s", d)
			}
		})
	}
}
