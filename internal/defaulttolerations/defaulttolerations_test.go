package defaulttolerations

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/apiserver"
)

func secs(s int64) *int64 { return &s }

var (
	notReady300    = v1.Toleration{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: secs(300)}
	unreachable300 = v1.Toleration{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: secs(300)}
)

func makePod(tolerations ...v1.Toleration) *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{Tolerations: tolerations}}
}

func podRequest(op apiserver.AdmitOp, sub string, obj runtime.Object) *apiserver.AdmissionRequest {
	return &apiserver.AdmissionRequest{Operation: op, Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		Kind: v1.SchemeGroupVersion.WithKind("Pod"), Subresource: sub, Namespace: "default", Name: "p", Object: obj}
}

func TestMutate(t *testing.T) {
	dedicated := v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "gpu", Effect: v1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name string
		in   []v1.Toleration
		want []v1.Toleration
	}{{
		name: "none: both added, not-ready first",
		want: []v1.Toleration{notReady300, unreachable300},
	}, {
		name: "others kept in front",
		in:   []v1.Toleration{dedicated},
		want: []v1.Toleration{dedicated, notReady300, unreachable300},
	}, {
		name: "empty key with Exists tolerates everything",
		in:   []v1.Toleration{{Operator: v1.TolerationOpExists}},
		want: []v1.Toleration{{Operator: v1.TolerationOpExists}},
	}, {
		name: "empty key for NoExecute only",
		in:   []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}},
		want: []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}},
	}, {
		name: "empty key for NoSchedule only is not about eviction",
		in:   []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}},
		want: []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}, notReady300, unreachable300},
	}, {
		name: "own not-ready toleration without seconds is kept, unreachable added",
		in:   []v1.Toleration{{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}},
		want: []v1.Toleration{{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}, unreachable300},
	}, {
		name: "own unreachable toleration for any effect counts",
		in:   []v1.Toleration{{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, TolerationSeconds: secs(5)}},
		want: []v1.Toleration{{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, TolerationSeconds: secs(5)}, notReady300},
	}, {
		name: "a toleration of the key for NoSchedule does not count",
		in:   []v1.Toleration{{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}},
		want: []v1.Toleration{{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}, notReady300, unreachable300},
	}, {
		name: "operator and value do not matter",
		in:   []v1.Toleration{{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpEqual, Value: "x", Effect: v1.TaintEffectNoExecute}},
		want: []v1.Toleration{{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpEqual, Value: "x", Effect: v1.TaintEffectNoExecute}, unreachable300},
	}, {
		name: "both present: unchanged",
		in:   []v1.Toleration{unreachable300, notReady300},
		want: []v1.Toleration{unreachable300, notReady300},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			for _, op := range []apiserver.AdmitOp{apiserver.AdmitCreate, apiserver.AdmitUpdate} {
				pod := makePod(tc.in...)
				if err := New(DefaultSeconds, DefaultSeconds).Mutate(context.Background(), podRequest(op, "", pod)); err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(tc.want, pod.Spec.Tolerations); d != "" {
					t.Errorf("op %d: tolerations (-want +got):\n%s", op, d)
				}
			}
		})
	}
}

func TestMutateLeavesOtherWritesAlone(t *testing.T) {
	a := New(DefaultSeconds, DefaultSeconds)
	for _, sub := range []string{"status", "ephemeralcontainers", "binding"} {
		pod := makePod()
		if err := a.Mutate(context.Background(), podRequest(apiserver.AdmitUpdate, sub, pod)); err != nil {
			t.Fatal(err)
		}
		if len(pod.Spec.Tolerations) != 0 {
			t.Errorf("pods/%s got tolerations %v", sub, pod.Spec.Tolerations)
		}
	}
	req := podRequest(apiserver.AdmitCreate, "", &v1.ConfigMap{})
	req.Resource.Resource = "configmaps"
	if err := a.Mutate(context.Background(), req); err != nil {
		t.Errorf("configmaps: %v", err)
	}
	if err := a.Mutate(context.Background(), podRequest(apiserver.AdmitCreate, "", &v1.ConfigMap{})); !apierrors.IsBadRequest(err) {
		t.Errorf("a pods write that is no Pod: got %v, want BadRequest", err)
	}
}

func TestConfiguredSeconds(t *testing.T) {
	pod := makePod()
	if err := New(60, 0).Mutate(context.Background(), podRequest(apiserver.AdmitCreate, "", pod)); err != nil {
		t.Fatal(err)
	}
	want := []v1.Toleration{*notReady300.DeepCopy(), *unreachable300.DeepCopy()}
	want[0].TolerationSeconds, want[1].TolerationSeconds = secs(60), secs(0)
	if d := cmp.Diff(want, pod.Spec.Tolerations); d != "" {
		t.Errorf("tolerations (-want +got):\n%s", d)
	}
}
