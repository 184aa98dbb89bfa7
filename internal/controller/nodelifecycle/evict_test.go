package nodelifecycle

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func makePod(name string, mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{NodeName: "n"},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func seconds(s int64) *int64 { return &s }

// tolerate adds a toleration of key (all values, any effect when effect is
// empty) for the given seconds (nil: for ever).
func tolerate(key string, effect v1.TaintEffect, secs *int64) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{
			Key: key, Operator: v1.TolerationOpExists, Effect: effect, TolerationSeconds: secs,
		})
	}
}

func chain(fs ...func(*v1.Pod)) func(*v1.Pod) {
	return func(p *v1.Pod) {
		for _, f := range fs {
			f(p)
		}
	}
}

func TestEvictions(t *testing.T) {
	unreachable := taint(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, atp(-100*time.Second))
	notReady := taint(v1.TaintNodeNotReady, v1.TaintEffectNoExecute, atp(-10*time.Second))
	for _, tc := range []struct {
		name      string
		pod       *v1.Pod
		taints    []v1.Taint
		wantNow   bool
		wantAt    time.Duration // from t0; 0 means no pending deletion
		wantStays bool
	}{{
		name:      "no taints",
		pod:       makePod("p", nil),
		wantStays: true,
	}, {
		name:      "NoSchedule taints do not evict",
		pod:       makePod("p", nil),
		taints:    []v1.Taint{taint(v1.TaintNodeUnreachable, v1.TaintEffectNoSchedule, atp(-time.Hour))},
		wantStays: true,
	}, {
		name:    "untolerated",
		pod:     makePod("p", nil),
		taints:  []v1.Taint{unreachable},
		wantNow: true,
	}, {
		name:    "toleration of another effect",
		pod:     makePod("p", tolerate(v1.TaintNodeUnreachable, v1.TaintEffectNoSchedule, nil)),
		taints:  []v1.Taint{unreachable},
		wantNow: true,
	}, {
		name:   "tolerated for 300s from when the taint was added",
		pod:    makePod("p", tolerate(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, seconds(300))),
		taints: []v1.Taint{unreachable},
		wantAt: 200 * time.Second,
	}, {
		name:    "tolerated for 100s, now up",
		pod:     makePod("p", tolerate(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, seconds(100))),
		taints:  []v1.Taint{unreachable},
		wantNow: true,
	}, {
		name:    "zero seconds",
		pod:     makePod("p", tolerate(v1.TaintNodeUnreachable, "", seconds(0))),
		taints:  []v1.Taint{taint(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, atp(0))},
		wantNow: true,
	}, {
		name:    "negative seconds",
		pod:     makePod("p", tolerate(v1.TaintNodeUnreachable, "", seconds(-5))),
		taints:  []v1.Taint{unreachable},
		wantNow: true,
	}, {
		name:      "tolerated for ever",
		pod:       makePod("p", tolerate(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, nil)),
		taints:    []v1.Taint{unreachable},
		wantStays: true,
	}, {
		name:   "taint without TimeAdded counts from now",
		pod:    makePod("p", tolerate(v1.TaintNodeUnreachable, "", seconds(300))),
		taints: []v1.Taint{taint(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, nil)},
		wantAt: 300 * time.Second,
	}, {
		name: "shortest limit over all taints",
		pod: makePod("p", chain(
			tolerate(v1.TaintNodeUnreachable, "", nil),
			tolerate(v1.TaintNodeNotReady, "", seconds(60)))),
		taints: []v1.Taint{unreachable, notReady},
		wantAt: 50 * time.Second,
	}, {
		name:    "one taint of two untolerated",
		pod:     makePod("p", tolerate(v1.TaintNodeUnreachable, "", nil)),
		taints:  []v1.Taint{unreachable, notReady},
		wantNow: true,
	}, {
		name: "first matching toleration decides",
		pod: makePod("p", chain(
			tolerate("", "", nil),
			tolerate(v1.TaintNodeUnreachable, "", seconds(10)))),
		taints:    []v1.Taint{unreachable},
		wantStays: true,
	}, {
		name: "value must match an Equal toleration",
		pod: makePod("p", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "cpu"}}
		}),
		taints:  []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoExecute}},
		wantNow: true,
	}, {
		// The tolerations kube-apiserver's DefaultTolerationSeconds gives every pod.
		name: "default tolerations keep a pod 300s on an unreachable node",
		pod: makePod("p", chain(
			tolerate(v1.TaintNodeNotReady, v1.TaintEffectNoExecute, seconds(300)),
			tolerate(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, seconds(300)))),
		taints: []v1.Taint{unreachable},
		wantAt: 200 * time.Second,
	}, {
		name: "default tolerations keep a pod 300s on a not-ready node",
		pod: makePod("p", chain(
			tolerate(v1.TaintNodeNotReady, v1.TaintEffectNoExecute, seconds(300)),
			tolerate(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, seconds(300)))),
		taints: []v1.Taint{notReady},
		wantAt: 290 * time.Second,
	}, {
		name:      "pods being deleted are left alone",
		pod:       makePod("p", func(p *v1.Pod) { p.DeletionTimestamp = atp(-time.Second) }),
		taints:    []v1.Taint{unreachable},
		wantStays: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			now, later := evictions([]*v1.Pod{tc.pod}, tc.taints, t0)
			gotNow := len(now) == 1 && now[0] == tc.pod
			if gotNow != tc.wantNow || len(now) > 1 {
				t.Errorf("deleteNow = %v, want the pod there: %v", now, tc.wantNow)
			}
			var want map[*v1.Pod]time.Time
			if tc.wantAt != 0 {
				want = map[*v1.Pod]time.Time{tc.pod: t0.Add(tc.wantAt)}
			}
			if d := cmp.Diff(want, later, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("deleteAt (-want +got):\n%s", d)
			}
			if stays := len(now) == 0 && len(later) == 0; stays != tc.wantStays {
				t.Errorf("pod stays = %v, want %v", stays, tc.wantStays)
			}
		})
	}
}

func TestEvictionsSeveralPods(t *testing.T) {
	taints := []v1.Taint{taint(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute, atp(0))}
	a := makePod("a", nil)
	b := makePod("b", tolerate(v1.TaintNodeUnreachable, "", seconds(300)))
	c := makePod("c", tolerate(v1.TaintNodeUnreachable, "", nil))
	e := makePod("e", nil)
	now, later := evictions([]*v1.Pod{a, nil, b, c, e}, taints, t0)
	if d := cmp.Diff([]*v1.Pod{a, e}, now); d != "" {
		t.Errorf("deleteNow (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[*v1.Pod]time.Time{b: t0.Add(300 * time.Second)}, later); d != "" {
		t.Errorf("deleteAt (-want +got):\n%s", d)
	}
}
