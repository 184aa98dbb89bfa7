package disruption

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	fakescale "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)

// fixture is the controller over a fake clientset whose informer caches the test fills.
type fixture struct {
	c       *Controller
	client  *kubefake.Clientset
	factory informers.SharedInformerFactory
	clock   *clocktesting.FakeClock
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := kubefake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	f := &fixture{client: client, factory: factory, clock: clocktesting.NewFakeClock(t0)}
	f.c = New(Config{Client: client, Informers: factory, Recorder: record.NewFakeRecorder(100), Clock: f.clock})
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *policyv1.PodDisruptionBudget:
			err = factory.Policy().V1().PodDisruptionBudgets().Informer().GetIndexer().Add(o)
		case *v1.Pod:
			err = factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
		case *appsv1.ReplicaSet:
			err = factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(o)
		case *appsv1.Deployment:
			err = factory.Apps().V1().Deployments().Informer().GetIndexer().Add(o)
		case *appsv1.StatefulSet:
			err = factory.Apps().V1().StatefulSets().Informer().GetIndexer().Add(o)
		case *v1.ReplicationController:
			err = factory.Core().V1().ReplicationControllers().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// statusWrites returns the budgets the controller wrote through status updates.
func (f *fixture) statusWrites() []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for _, a := range f.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "status" {
			out = append(out, u.GetObject().(*policyv1.PodDisruptionBudget))
		}
	}
	return out
}

// syncWritesOnce syncs t1/web, checks that it wrote one status, want, and returns it.
func (f *fixture) syncWritesOnce(t *testing.T, want wantStatus) *policyv1.PodDisruptionBudget {
	t.Helper()
	if err := f.c.sync(context.Background(), "t1/web"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	writes := f.statusWrites()
	if len(writes) != 1 {
		t.Fatalf("%d status writes, want 1", len(writes))
	}
	if diff := cmp.Diff(want, gotStatus(writes[0]), cmp.AllowUnexported(wantStatus{})); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	return writes[0]
}

func makePDB(mutate func(*policyv1.PodDisruptionBudget)) *policyv1.PodDisruptionBudget {
	two := intstr.FromInt32(2)
	p := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "t1", Generation: 1},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func makeRS(replicas int32, deployment *appsv1.Deployment) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "t1", UID: "rs-uid"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas}}
	if deployment != nil {
		rs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(deployment, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
	}
	return rs
}

func makeDeployment(replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "t1", UID: "dep-uid"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas}}
}

// makePod returns pod NAME of the ReplicaSet rs (nil: no controller), ready or not.
func makePod(name string, rs *appsv1.ReplicaSet, ready bool) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "t1", Labels: map[string]string{"app": "web"}, UID: types.UID(name)},
		Status: v1.PodStatus{Phase: v1.PodRunning}}
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: status}}
	if rs != nil {
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
	}
	return p
}

type wantStatus struct {
	expected, desired, healthy, allowed int32
	reason                              string
}

func gotStatus(p *policyv1.PodDisruptionBudget) wantStatus {
	w := wantStatus{p.Status.ExpectedPods, p.Status.DesiredHealthy, p.Status.CurrentHealthy, p.Status.DisruptionsAllowed, ""}
	if c := apimeta.FindStatusCondition(p.Status.Conditions, policyv1.DisruptionAllowedCondition); c != nil {
		w.reason = c.Reason
	}
	return w
}

func TestSync(t *testing.T) {
	dep := makeDeployment(4)
	rs := makeRS(4, dep)
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	tests := []struct {
		name string
		pdb  *policyv1.PodDisruptionBudget
		objs []runtime.Object
		want wantStatus
	}{
		{name: "minAvailable int counts pods", pdb: makePDB(nil),
			objs: []runtime.Object{makePod("a", nil, true), makePod("b", nil, true), makePod("c", nil, true)},
			want: wantStatus{expected: 3, desired: 2, healthy: 3, allowed: 1, reason: policyv1.SufficientPodsReason}},
		{name: "unready pods are not healthy", pdb: makePDB(nil),
			objs: []runtime.Object{makePod("a", nil, true), makePod("b", nil, true), makePod("c", nil, false)},
			want: wantStatus{expected: 3, desired: 2, healthy: 2, allowed: 0, reason: policyv1.InsufficientPodsReason}},
		{name: "maxUnavailable from the deployment's scale",
			pdb: makePDB(func(p *policyv1.PodDisruptionBudget) {
				p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, pct("25%")
			}),
			objs: []runtime.Object{dep, rs, makePod("a", rs, true), makePod("b", rs, true), makePod("c", rs, true), makePod("d", rs, true)},
			want: wantStatus{expected: 4, desired: 3, healthy: 4, allowed: 1, reason: policyv1.SufficientPodsReason}},
		{name: "minAvailable percent of a replicaset's scale",
			pdb:  makePDB(func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = pct("50%") }),
			objs: []runtime.Object{makeRS(4, nil), makePod("a", makeRS(4, nil), true), makePod("b", makeRS(4, nil), true)},
			want: wantStatus{expected: 4, desired: 2, healthy: 2, allowed: 0, reason: policyv1.InsufficientPodsReason}},
		{name: "no pods", pdb: makePDB(nil),
			want: wantStatus{expected: 0, desired: 2, healthy: 0, allowed: 0, reason: policyv1.InsufficientPodsReason}},
		{name: "owner not found fails the sync",
			pdb:  makePDB(func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = pct("50%") }),
			objs: []runtime.Object{makePod("a", makeRS(4, nil), true)},
			want: wantStatus{reason: policyv1.SyncFailedReason}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, append([]runtime.Object{tc.pdb}, tc.objs...)...)
			written := f.syncWritesOnce(t, tc.want)
			if tc.want.reason != policyv1.SyncFailedReason && written.Status.ObservedGeneration != 1 {
				t.Errorf("observedGeneration %d, want 1", written.Status.ObservedGeneration)
			}
		})
	}
}

// A status already right is not written again.
func TestSyncNoOp(t *testing.T) {
	pods := []runtime.Object{makePod("a", nil, true), makePod("b", nil, true), makePod("c", nil, true)}
	f := newFixture(t, append([]runtime.Object{makePDB(nil)}, pods...)...)
	if err := f.c.sync(context.Background(), "t1/web"); err != nil {
		t.Fatal(err)
	}
	written := f.statusWrites()[0]
	g := newFixture(t, append([]runtime.Object{written}, pods...)...)
	if err := g.c.sync(context.Background(), "t1/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(g.statusWrites()); n != 0 {
		t.Errorf("%d status writes of an up-to-date budget, want 0", n)
	}
}

// An eviction recorded in disruptedPods keeps its pod out of the healthy count until
// DeletionTimeout, then the pod counts again.
func TestDisruptedPodsExpire(t *testing.T) {
	pdb := makePDB(func(p *policyv1.PodDisruptionBudget) {
		p.Status.DisruptedPods = map[string]metav1.Time{"a": metav1.NewTime(t0.Add(-time.Minute)), "gone": metav1.NewTime(t0)}
	})
	pods := []*v1.Pod{makePod("a", nil, true), makePod("b", nil, true), makePod("c", nil, true)}
	c, err := computeCounts(pdb, pods, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	if c.healthy != 2 || len(c.disrupted) != 1 || c.recheck == nil || !c.recheck.Equal(t0.Add(time.Minute)) {
		t.Errorf("healthy %d disrupted %v recheck %v, want 2, only a, %v", c.healthy, c.disrupted, c.recheck, t0.Add(time.Minute))
	}
	c, err = computeCounts(pdb, pods, nil, t0.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if c.healthy != 3 || len(c.disrupted) != 0 {
		t.Errorf("after the timeout: healthy %d disrupted %v, want 3 and none", c.healthy, c.disrupted)
	}
}

func TestFailedStatus(t *testing.T) {
	p := failedStatus(makePDB(func(p *policyv1.PodDisruptionBudget) { p.Status.DisruptionsAllowed = 3 }), errors.New("boom"))
	c := apimeta.FindStatusCondition(p.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if p.Status.DisruptionsAllowed != 0 || c == nil || c.Status != metav1.ConditionFalse || c.Message != "boom" {
		t.Errorf("failed status %+v", p.Status)
	}
}

// A DisruptionTarget condition an eviction left on a pod it did not delete turns False
// after StalePodDisruptionTimeout; a deleting pod's, or a recent one, is left alone.
func TestStaleDisruptionTarget(t *testing.T) {
	withTarget := func(name string, age time.Duration, mutate func(*v1.Pod)) *v1.Pod {
		p := makePod(name, nil, true)
		p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
			Reason: "EvictionByEvictionAPI", LastTransitionTime: metav1.NewTime(t0.Add(-age))})
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	deleting := func(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0} }
	tests := []struct {
		name  string
		pod   *v1.Pod
		reset bool
	}{
		{name: "stale", pod: withTarget("old", 3*time.Minute, nil), reset: true},
		{name: "recent", pod: withTarget("new", time.Minute, nil)},
		{name: "deleting", pod: withTarget("del", 3*time.Minute, deleting)},
		{name: "set by the kubelet", pod: withTarget("kub", 3*time.Minute, func(p *v1.Pod) {
			p.Status.Conditions[1].Reason = v1.PodReasonTerminationByKubelet
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.pod)
			if err := f.c.syncStale(context.Background(), "t1/"+tc.pod.Name); err != nil {
				t.Fatal(err)
			}
			var updated *v1.Pod
			for _, a := range f.client.Actions() {
				if u, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "status" {
					updated = u.GetObject().(*v1.Pod)
				}
			}
			if (updated != nil) != tc.reset {
				t.Fatalf("status written: %v, want %v", updated != nil, tc.reset)
			}
			if updated != nil && (updated.Status.Conditions[1].Status != v1.ConditionFalse || !updated.Status.Conditions[1].LastTransitionTime.Time.Equal(t0)) {
				t.Errorf("condition after reset: %+v", updated.Status.Conditions[1])
			}
		})
	}
}

// TestSyncOtherController: pods whose controller is of a kind without an informer here
// (a custom resource) count against that controller's scale subresource, read through
// the RESTMapper and the scale client, as kube-controller-manager does; without a scale
// client, or when the scale is another object's (UID), the budget cannot be computed.
func TestSyncOtherController(t *testing.T) {
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	mapper := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
	mapper.Add(gv.WithKind("Rollout"), apimeta.RESTScopeNamespace)
	owner := metav1.OwnerReference{APIVersion: gv.String(), Kind: "Rollout", Name: "web", UID: "rollout-uid", Controller: new(bool)}
	*owner.Controller = true
	pod := func(name string, ready bool) *v1.Pod {
		p := makePod(name, nil, ready)
		p.OwnerReferences = []metav1.OwnerReference{owner}
		return p
	}
	one := intstr.FromInt32(1)
	pdb := makePDB(func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, &one })
	scales := func(uid types.UID) *fakescale.FakeScaleClient {
		s := &fakescale.FakeScaleClient{}
		s.AddReactor("get", "rollouts", func(a clienttesting.Action) (bool, runtime.Object, error) {
			if a.GetNamespace() != "t1" || a.(clienttesting.GetAction).GetName() != "web" || a.GetResource().Group != "example.com" {
				return true, nil, fmt.Errorf("unexpected scale read %v", a)
			}
			return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "t1", UID: uid},
				Spec: autoscalingv1.ScaleSpec{Replicas: 3}}, nil
		})
		return s
	}
	for _, tc := range []struct {
		name   string
		scales *fakescale.FakeScaleClient
		want   wantStatus
	}{
		{"the controller's scale", scales("rollout-uid"), wantStatus{expected: 3, desired: 2, healthy: 2, allowed: 0, reason: policyv1.InsufficientPodsReason}},
		{"another object's scale", scales("other-uid"), wantStatus{reason: policyv1.SyncFailedReason}},
		{"no scale client", nil, wantStatus{reason: policyv1.SyncFailedReason}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, pdb, pod("a", true), pod("b", true))
			if tc.scales != nil {
				f.c.scales, f.c.mapper = tc.scales, mapper
			}
			f.syncWritesOnce(t, tc.want)
		})
	}
}

// TestFailedSyncRechecked: a budget whose sync failed is synced again after
// failedRecheck without any event (kube-controller-manager waits for one), and a
// failure that repeats does not write the same status again. Here the pods' controller
// kind becomes known (as after the RESTMapper is renewed) and the recheck mends it.
func TestFailedSyncRechecked(t *testing.T) {
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	owner := metav1.OwnerReference{APIVersion: gv.String(), Kind: "Rollout", Name: "web", UID: "rollout-uid", Controller: new(bool)}
	*owner.Controller = true
	pod := makePod("a", nil, true)
	pod.OwnerReferences = []metav1.OwnerReference{owner}
	one := intstr.FromInt32(1)
	pdb := makePDB(func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, &one })
	f := newFixture(t, pdb, pod)
	mapper := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{gv}) // Rollout not yet known
	scales := &fakescale.FakeScaleClient{}
	scales.AddReactor("get", "rollouts", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "t1", UID: "rollout-uid"},
			Spec: autoscalingv1.ScaleSpec{Replicas: 2}}, nil
	})
	f.c.scales, f.c.mapper = scales, mapper
	rechecked := func() bool {
		t.Helper()
		f.clock.Step(failedRecheck)
		for deadline := time.Now().Add(5 * time.Second); f.c.queue.Len() == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				return false
			}
		}
		key, _ := f.c.queue.Get()
		f.c.queue.Done(key)
		return key == "t1/web"
	}
	if err := f.c.sync(context.Background(), "t1/web"); err != nil {
		t.Fatal(err)
	}
	writes := f.statusWrites()
	if len(writes) != 1 || gotStatus(writes[0]).reason != policyv1.SyncFailedReason {
		t.Fatalf("first sync wrote %d statuses, want one SyncFailed", len(writes))
	}
	if !rechecked() {
		t.Fatal("the failed budget was not queued again after failedRecheck")
	}
	// The same failure again: nothing new to write.
	if err := f.factory.Policy().V1().PodDisruptionBudgets().Informer().GetIndexer().Update(writes[0]); err != nil {
		t.Fatal(err)
	}
	if err := f.c.sync(context.Background(), "t1/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.statusWrites()); n != 1 {
		t.Errorf("%d status writes after the same failure twice, want 1", n)
	}
	if !rechecked() {
		t.Fatal("the budget failing again was not queued again")
	}
	mapper.Add(gv.WithKind("Rollout"), apimeta.RESTScopeNamespace)
	if err := f.c.sync(context.Background(), "t1/web"); err != nil {
		t.Fatal(err)
	}
	writes = f.statusWrites()
	if got, want := gotStatus(writes[len(writes)-1]), (wantStatus{expected: 2, desired: 1, healthy: 1, allowed: 0, reason: policyv1.InsufficientPodsReason}); got != want {
		t.Errorf("status once the kind is known %+v, want %+v", got, want)
	}
}
