package core

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tranche/tranche/internal/registry"
)

var evictNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// evictionObjects is a registry.Objects over one namespace's pods and budgets, with
// the generic paths' resourceVersion checks; it records deletions.
type evictionObjects struct {
	pods    map[string]*v1.Pod
	pdbs    map[string]*policyv1.PodDisruptionBudget
	deleted []string
	rv      int
}

var _ registry.Objects = (*evictionObjects)(nil)

func (o *evictionObjects) bump() string {
	o.rv++
	return strconv.Itoa(100 + o.rv)
}

func (o *evictionObjects) Get(_ context.Context, _, name string) (runtime.Object, error) {
	p, ok := o.pods[name]
	if !ok {
		return nil, apierrors.NewNotFound(podsGR, name)
	}
	return p.DeepCopy(), nil
}

func (o *evictionObjects) GetOf(context.Context, schema.GroupVersionResource, string, string) (runtime.Object, error) {
	return nil, apierrors.NewInternalError(nil)
}

func (o *evictionObjects) ListOf(_ context.Context, gvr schema.GroupVersionResource, _ string) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, p := range o.pdbs {
		out = append(out, p.DeepCopy())
	}
	return out, nil
}

func (o *evictionObjects) UpdateOf(_ context.Context, _ schema.GroupVersionResource, _, name, _ string, dry bool, mutate func(runtime.Object) (runtime.Object, error)) (runtime.Object, int, error) {
	out, err := mutate(o.pdbs[name].DeepCopy())
	if err != nil {
		return nil, 0, err
	}
	if !dry {
		p := out.(*policyv1.PodDisruptionBudget)
		p.ResourceVersion = o.bump()
		o.pdbs[name] = p
	}
	return out, http.StatusOK, nil
}

func (o *evictionObjects) Update(_ context.Context, _, name, _ string, dry bool, mutate func(runtime.Object) (runtime.Object, error)) (runtime.Object, int, error) {
	out, err := mutate(o.pods[name].DeepCopy())
	if err != nil {
		return nil, 0, err
	}
	if !dry {
		p := out.(*v1.Pod)
		p.ResourceVersion = o.bump()
		o.pods[name] = p
	}
	return out, http.StatusOK, nil
}

func (o *evictionObjects) Delete(_ context.Context, _, name string, opts *metav1.DeleteOptions, dry bool) (runtime.Object, int, error) {
	p := o.pods[name]
	if pre := opts.Preconditions; pre != nil && pre.ResourceVersion != nil && *pre.ResourceVersion != p.ResourceVersion {
		return nil, 0, apierrors.NewConflict(podsGR, name, nil)
	}
	if !dry {
		delete(o.pods, name)
		o.deleted = append(o.deleted, name)
	}
	return p, http.StatusOK, nil
}

func (o *evictionObjects) Now() time.Time { return evictNow }

type evictionBody struct{ ev *policyv1.Eviction }

func (b evictionBody) Decode(obj runtime.Object, _ schema.GroupVersionKind, _ registry.DecodeOptions) error {
	if b.ev != nil {
		*obj.(*policyv1.Eviction) = *b.ev.DeepCopy()
	}
	return nil
}

func evictionPod(mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "t1", ResourceVersion: "1", Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{NodeName: "node-1"},
		Status:     v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func evictionPDB(name string, mutate func(*policyv1.PodDisruptionBudget)) *policyv1.PodDisruptionBudget {
	two := intstr.FromInt32(2)
	p := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "t1", Generation: 1},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 1,
			CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestPodEvict(t *testing.T) {
	notReady := func(p *v1.Pod) { p.Status.Conditions[0].Status = v1.ConditionFalse }
	tests := []struct {
		name   string
		pod    *v1.Pod
		pdbs   []*policyv1.PodDisruptionBudget
		dry    bool
		code   int    // the Status code returned without error (0: expect err)
		status int32  // the error's HTTP code
		cause  string // the DisruptionBudget cause's message
		// deleted says whether the pod goes; allowed is the budget's disruptionsAllowed after.
		deleted bool
		allowed int32
	}{
		{name: "pending pod ignores budgets", pod: evictionPod(func(p *v1.Pod) { p.Status.Phase = v1.PodPending }),
			pdbs: []*policyv1.PodDisruptionBudget{evictionPDB("pdb", func(p *policyv1.PodDisruptionBudget) { p.Status.DisruptionsAllowed = 0 })},
			code: http.StatusCreated, deleted: true, allowed: 0},
		{name: "no budget", pod: evictionPod(nil), code: http.StatusCreated, deleted: true},
		{name: "budget allows one", pod: evictionPod(nil), pdbs: []*policyv1.PodDisruptionBudget{evictionPDB("pdb", nil)},
			code: http.StatusCreated, deleted: true, allowed: 0},
		{name: "budget allows none", pod: evictionPod(nil),
			pdbs: []*policyv1.PodDisruptionBudget{evictionPDB("pdb", func(p *policyv1.PodDisruptionBudget) {
				p.Status.DisruptionsAllowed, p.Status.CurrentHealthy = 0, 2
			})},
			status: http.StatusTooManyRequests, cause: "The disruption budget pdb needs 2 healthy pods and has 2 currently"},
		{name: "budget not yet observed", pod: evictionPod(nil),
			pdbs:   []*policyv1.PodDisruptionBudget{evictionPDB("pdb", func(p *policyv1.PodDisruptionBudget) { p.Generation = 2 })},
			status: http.StatusTooManyRequests, cause: "The disruption budget pdb is still being processed by the server.", allowed: 1},
		{name: "negative allowance", pod: evictionPod(nil),
			pdbs:   []*policyv1.PodDisruptionBudget{evictionPDB("pdb", func(p *policyv1.PodDisruptionBudget) { p.Status.DisruptionsAllowed = -1 })},
			status: http.StatusForbidden, cause: "The disruption budget pdb does not allow evicting pods currently: pdb disruptions allowed is negative", allowed: -1},
		{name: "two budgets", pod: evictionPod(nil),
			pdbs: []*policyv1.PodDisruptionBudget{evictionPDB("a", nil), evictionPDB("b", nil)},
			code: http.StatusInternalServerError, allowed: 1},
		{name: "unready pod, AlwaysAllow", pod: evictionPod(notReady),
			pdbs: []*policyv1.PodDisruptionBudget{evictionPDB("pdb", func(p *policyv1.PodDisruptionBudget) {
				p.Status.DisruptionsAllowed, p.Status.CurrentHealthy = 0, 1
				p.Spec.UnhealthyPodEvictionPolicy = new(policyv1.AlwaysAllow)
			})},
			code: http.StatusCreated, deleted: true, allowed: 0},
		{name: "unready pod, healthy budget", pod: evictionPod(notReady),
			pdbs: []*policyv1.PodDisruptionBudget{evictionPDB("pdb", func(p *policyv1.PodDisruptionBudget) {
				p.Status.DisruptionsAllowed, p.Status.CurrentHealthy = 0, 2
			})},
			code: http.StatusCreated, deleted: true, allowed: 0},
		{name: "unready pod, unhealthy budget", pod: evictionPod(notReady),
			pdbs: []*policyv1.PodDisruptionBudget{evictionPDB("pdb", func(p *policyv1.PodDisruptionBudget) {
				p.Status.DisruptionsAllowed, p.Status.CurrentHealthy = 0, 1
			})},
			status: http.StatusTooManyRequests, cause: "The disruption budget pdb needs 2 healthy pods and has 1 currently"},
		{name: "dry run", pod: evictionPod(nil), pdbs: []*policyv1.PodDisruptionBudget{evictionPDB("pdb", nil)}, dry: true,
			code: http.StatusCreated, allowed: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := &evictionObjects{pods: map[string]*v1.Pod{tc.pod.Name: tc.pod}, pdbs: map[string]*policyv1.PodDisruptionBudget{}}
			for _, p := range tc.pdbs {
				objs.pdbs[p.Name] = p
			}
			req := &registry.HandlerRequest{Verb: "create", Namespace: "t1", Name: "web-1", Subresource: "eviction",
				Objects: objs, Body: evictionBody{&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}}},
				DryRun: func() (bool, error) { return tc.dry, nil }}
			out, code, err := podEvict(context.Background(), req)
			switch {
			case tc.code != 0 && err != nil:
				t.Fatalf("podEvict: %v", err)
			case tc.code != 0 && code != tc.code:
				t.Fatalf("code %d (%v), want %d", code, out, tc.code)
			case tc.code == 0:
				se, ok := err.(apierrors.APIStatus)
				if !ok {
					t.Fatalf("err %v, want a status error %d", err, tc.status)
				}
				st := se.Status()
				if st.Code != tc.status {
					t.Errorf("code %d (%s), want %d", st.Code, st.Message, tc.status)
				}
				if tc.status == http.StatusTooManyRequests && st.Message != "Cannot evict pod as it would violate the pod's disruption budget." {
					t.Errorf("message %q", st.Message)
				}
				if st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Type != policyv1.DisruptionBudgetCause || st.Details.Causes[0].Message != tc.cause {
					t.Errorf("causes %+v, want %s %q", st.Details, policyv1.DisruptionBudgetCause, tc.cause)
				}
			}
			if _, gone := objs.pods["web-1"]; gone == tc.deleted {
				t.Errorf("pod deleted = %v, want %v", !gone, tc.deleted)
			}
			if len(tc.pdbs) == 1 {
				pdb := objs.pdbs[tc.pdbs[0].Name]
				if pdb.Status.DisruptionsAllowed != tc.allowed {
					t.Errorf("disruptionsAllowed %d, want %d", pdb.Status.DisruptionsAllowed, tc.allowed)
				}
			}
		})
	}
}

// A spent budget records the pod and, at zero, says InsufficientPods; the pod carries
// the DisruptionTarget condition when it is deleted.
func TestPodEvictRecordsDisruption(t *testing.T) {
	objs := &evictionObjects{pods: map[string]*v1.Pod{"web-1": evictionPod(nil)},
		pdbs: map[string]*policyv1.PodDisruptionBudget{"pdb": evictionPDB("pdb", nil)}}
	var lastPod *v1.Pod
	req := &registry.HandlerRequest{Namespace: "t1", Name: "web-1", Objects: &recordingObjects{objs, &lastPod},
		Body: evictionBody{}, DryRun: func() (bool, error) { return false, nil }}
	if _, _, err := podEvict(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	pdb := objs.pdbs["pdb"]
	if got, ok := pdb.Status.DisruptedPods["web-1"]; !ok || !got.Time.Equal(evictNow) {
		t.Errorf("disruptedPods %v, want web-1 at %v", pdb.Status.DisruptedPods, evictNow)
	}
	c := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != policyv1.InsufficientPodsReason {
		t.Errorf("DisruptionAllowed condition %+v, want False/InsufficientPods", c)
	}
	var target *v1.PodCondition
	for i := range lastPod.Status.Conditions {
		if lastPod.Status.Conditions[i].Type == v1.DisruptionTarget {
			target = &lastPod.Status.Conditions[i]
		}
	}
	if target == nil || target.Reason != "EvictionByEvictionAPI" || target.Message != "Eviction API: evicting" {
		t.Errorf("deleted pod's DisruptionTarget condition %+v", target)
	}
}

// recordingObjects keeps the pod as it was when deleted.
type recordingObjects struct {
	*evictionObjects
	last **v1.Pod
}

func (r *recordingObjects) Delete(ctx context.Context, ns, name string, opts *metav1.DeleteOptions, dry bool) (runtime.Object, int, error) {
	*r.last = r.pods[name].DeepCopy()
	return r.evictionObjects.Delete(ctx, ns, name, opts, dry)
}

func TestPodEvictRefusesOtherName(t *testing.T) {
	objs := &evictionObjects{pods: map[string]*v1.Pod{"web-1": evictionPod(nil)}}
	req := &registry.HandlerRequest{Namespace: "t1", Name: "web-1", Objects: objs,
		Body:   evictionBody{&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "web-2"}}},
		DryRun: func() (bool, error) { return false, nil }}
	_, _, err := podEvict(context.Background(), req)
	if !apierrors.IsBadRequest(err) || err.Error() != "name in URL does not match name in Eviction object" {
		t.Errorf("err %v, want the 400 for a mismatched name", err)
	}
}
