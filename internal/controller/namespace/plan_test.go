package namespace

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t1 = metav1.NewTime(t0.Add(time.Minute))

	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// makeNamespace returns a terminating namespace carrying the "kubernetes"
// finalizer, changed by mutate.
func makeNamespace(name string, mutate func(*v1.Namespace)) *v1.Namespace {
	ns := &v1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), DeletionTimestamp: &t0},
		Spec:       v1.NamespaceSpec{Finalizers: []v1.FinalizerName{v1.FinalizerKubernetes}},
		Status:     v1.NamespaceStatus{Phase: v1.NamespaceTerminating},
	}
	if mutate != nil {
		mutate(ns)
	}
	return ns
}

// okStatus is the condition list of a namespace whose last attempt had no
// failure, written at time at.
func okStatus(at metav1.Time) []v1.NamespaceCondition {
	var out []v1.NamespaceCondition
	for _, t := range conditionTypes {
		ok := okConditions[t]
		out = append(out, v1.NamespaceCondition{Type: t, Status: v1.ConditionFalse, LastTransitionTime: at, Reason: ok.reason, Message: ok.message})
	}
	return out
}

// withCondition replaces the condition of c's type in conds.
func withCondition(conds []v1.NamespaceCondition, c v1.NamespaceCondition) []v1.NamespaceCondition {
	out := append([]v1.NamespaceCondition(nil), conds...)
	for i := range out {
		if out[i].Type == c.Type {
			out[i] = c
		}
	}
	return out
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name       string
		ns         *v1.Namespace
		remaining  map[schema.GroupVersionResource]int
		deletion   deletion
		wantConds  []v1.NamespaceCondition // nil: no status write expected
		wantFinal  bool
		wantWait   bool
		wantErrMsg string
	}{
		{
			name:      "empty namespace is finalized and gets the ok conditions",
			ns:        makeNamespace("a", nil),
			wantConds: okStatus(t1),
			wantFinal: true,
		},
		{
			name: "unchanged conditions are not rewritten",
			ns: makeNamespace("a", func(ns *v1.Namespace) {
				ns.Status.Conditions = okStatus(t0)
			}),
			wantFinal: true,
		},
		{
			name: "namespace without our finalizer is left to its other finalizers",
			ns: makeNamespace("a", func(ns *v1.Namespace) {
				ns.Spec.Finalizers = []v1.FinalizerName{"example.com/other"}
				ns.Status.Conditions = okStatus(t0)
			}),
		},
		{
			name:      "graceful pods make the controller wait",
			ns:        makeNamespace("a", func(ns *v1.Namespace) { ns.Status.Conditions = okStatus(t0) }),
			remaining: map[schema.GroupVersionResource]int{podsGVR: 2, deploymentsGVR: 0},
			deletion:  deletion{estimate: 30},
			wantConds: withCondition(okStatus(t0), v1.NamespaceCondition{
				Type: v1.NamespaceContentRemaining, Status: v1.ConditionTrue, LastTransitionTime: t1,
				Reason: "SomeResourcesRemain", Message: "Some resources are remaining: pods. has 2 resource instances",
			}),
			wantWait: true,
		},
		{
			name:      "finalizers on content are reported",
			ns:        makeNamespace("a", nil),
			remaining: map[schema.GroupVersionResource]int{deploymentsGVR: 3, podsGVR: 1},
			deletion:  deletion{estimate: 15, finalizers: map[string]int{"example.com/b": 1, "example.com/a": 2}},
			wantConds: withCondition(withCondition(okStatus(t1), v1.NamespaceCondition{
				Type: v1.NamespaceContentRemaining, Status: v1.ConditionTrue, LastTransitionTime: t1,
				Reason:  "SomeResourcesRemain",
				Message: "Some resources are remaining: deployments.apps has 3 resource instances, pods. has 1 resource instances",
			}), v1.NamespaceCondition{
				Type: v1.NamespaceFinalizersRemaining, Status: v1.ConditionTrue, LastTransitionTime: t1,
				Reason:  "SomeFinalizersRemain",
				Message: "Some content in the namespace has finalizers remaining: example.com/a in 2 resource instances, example.com/b in 1 resource instances",
			}),
			wantWait: true,
		},
		{
			name: "partial discovery failure blocks finalization",
			ns:   makeNamespace("a", nil),
			deletion: deletion{discoveryErr: &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{
				{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("the server is currently unable to handle the request"),
			}}},
			wantConds: withCondition(okStatus(t1), v1.NamespaceCondition{
				Type: v1.NamespaceDeletionDiscoveryFailure, Status: v1.ConditionTrue, LastTransitionTime: t1,
				Reason:  "DiscoveryFailed",
				Message: "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: the server is currently unable to handle the request",
			}),
			wantErrMsg: "unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: the server is currently unable to handle the request",
		},
		{
			name:     "content failures are sorted into one condition",
			ns:       makeNamespace("a", nil),
			deletion: deletion{contentErrs: []error{errors.New("zeta failed"), errors.New("alpha failed")}},
			wantConds: withCondition(okStatus(t1), v1.NamespaceCondition{
				Type: v1.NamespaceDeletionContentFailure, Status: v1.ConditionTrue, LastTransitionTime: t1,
				Reason:  "ContentDeletionFailed",
				Message: "Failed to delete all resource types, 2 remaining: alpha failed, zeta failed",
			}),
			wantErrMsg: "zeta failed\nalpha failed",
		},
		{
			name: "a failure that clears flips back with a new transition time",
			ns: makeNamespace("a", func(ns *v1.Namespace) {
				ns.Status.Conditions = withCondition(okStatus(t0), v1.NamespaceCondition{
					Type: v1.NamespaceDeletionGVParsingFailure, Status: v1.ConditionTrue, LastTransitionTime: t0,
					Reason: "GroupVersionParsingFailed", Message: "bad",
				})
			}),
			wantConds: withCondition(okStatus(t0), v1.NamespaceCondition{
				Type: v1.NamespaceDeletionGVParsingFailure, Status: v1.ConditionFalse, LastTransitionTime: t1,
				Reason: "ParsedGroupVersions", Message: "All legacy kube types successfully parsed",
			}),
			wantFinal: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.ns.DeepCopy()
			act := plan(tc.ns, tc.remaining, tc.deletion, t1)
			if diff := cmp.Diff(before, tc.ns); diff != "" {
				t.Errorf("plan mutated its input (-before +after):\n%s", diff)
			}
			var gotConds []v1.NamespaceCondition
			if act.status != nil {
				gotConds = act.status.Status.Conditions
			}
			if diff := cmp.Diff(tc.wantConds, gotConds); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if act.finalize != tc.wantFinal || act.wait != tc.wantWait {
				t.Errorf("finalize, wait = %v, %v; want %v, %v", act.finalize, act.wait, tc.wantFinal, tc.wantWait)
			}
			gotErr := ""
			if act.err != nil {
				gotErr = act.err.Error()
			}
			if gotErr != tc.wantErrMsg {
				t.Errorf("err = %q, want %q", gotErr, tc.wantErrMsg)
			}
		})
	}
}

func TestWithoutFinalizer(t *testing.T) {
	ns := makeNamespace("a", func(ns *v1.Namespace) {
		ns.Spec.Finalizers = []v1.FinalizerName{"example.com/x", v1.FinalizerKubernetes, "example.com/y"}
	})
	got := withoutFinalizer(ns, v1.FinalizerKubernetes).Spec.Finalizers
	want := []v1.FinalizerName{"example.com/x", "example.com/y"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
	if len(ns.Spec.Finalizers) != 3 {
		t.Errorf("input changed: %v", ns.Spec.Finalizers)
	}
}
