package statefulset

import (
	"context"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture is a controller over a fake clientset whose informer caches are
// refilled from the client before each sync.
type fixture struct {
	c       *Controller
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	clock   *testingclock.FakeClock
	events  *record.FakeRecorder
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{
		client: fake.NewClientset(objs...),
		clock:  testingclock.NewFakeClock(t0),
		events: record.NewFakeRecorder(1000),
	}
	f.client.PrependReactor("create", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj := a.(clienttesting.CreateAction).GetObject().(metav1.Object)
		obj.SetUID(types.UID("uid-" + obj.GetName() + "-" + f.clock.Now().Format(time.RFC3339Nano)))
		obj.SetCreationTimestamp(metav1.NewTime(f.clock.Now()))
		return false, nil, nil
	})
	f.factory = informers.NewSharedInformerFactory(f.client, 0)
	f.c = New(Config{Client: f.client, Informers: f.factory, Clock: f.clock, Recorder: f.events, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(f.c.queue.ShutDown)
	return f
}

// sync refills the caches from the client, forgets earlier actions and
// syncs key.
func (f *fixture) sync(t *testing.T, key string) {
	t.Helper()
	ctx := context.Background()
	sets, _ := f.client.AppsV1().StatefulSets("").List(ctx, metav1.ListOptions{})
	pods, _ := f.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	pvcs, _ := f.client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	revs, _ := f.client.AppsV1().ControllerRevisions("").List(ctx, metav1.ListOptions{})
	fill := func(inf interface {
		GetIndexer() cache.Indexer
	}, items []any) {
		if err := inf.GetIndexer().Replace(items, ""); err != nil {
			t.Fatal(err)
		}
	}
	var items []any
	for i := range sets.Items {
		items = append(items, &sets.Items[i])
	}
	fill(f.factory.Apps().V1().StatefulSets().Informer(), items)
	items = nil
	for i := range pods.Items {
		items = append(items, &pods.Items[i])
	}
	fill(f.factory.Core().V1().Pods().Informer(), items)
	items = nil
	for i := range pvcs.Items {
		items = append(items, &pvcs.Items[i])
	}
	fill(f.factory.Core().V1().PersistentVolumeClaims().Informer(), items)
	items = nil
	for i := range revs.Items {
		items = append(items, &revs.Items[i])
	}
	fill(f.factory.Apps().V1().ControllerRevisions().Informer(), items)
	f.client.ClearActions()
	if err := f.c.sync(ctx, key); err != nil {
		t.Fatalf("sync %s: %v", key, err)
	}
}

// writes lists the last sync's pod and claim writes as "verb resource name".
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.client.Actions() {
		res := a.GetResource().Resource
		if res != "pods" && res != "persistentvolumeclaims" {
			continue
		}
		switch a := a.(type) {
		case clienttesting.CreateAction:
			out = append(out, "create "+res+" "+a.GetObject().(metav1.Object).GetName())
		case clienttesting.DeleteAction:
			out = append(out, "delete "+res+" "+a.GetName())
		case clienttesting.UpdateAction:
			out = append(out, "update "+res+" "+a.GetObject().(metav1.Object).GetName())
		}
	}
	return out
}

func (f *fixture) pod(t *testing.T, name string) *v1.Pod {
	t.Helper()
	p, err := f.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// makeReady sets a pod Running and Ready, as the node agent would.
func (f *fixture) makeReady(t *testing.T, name string) {
	t.Helper()
	p := f.pod(t, name)
	p.Status.Phase = v1.PodRunning
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(f.clock.Now())}}
	if _, err := f.client.CoreV1().Pods("default").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) set(t *testing.T, name string) *appsv1.StatefulSet {
	t.Helper()
	s, err := f.client.AppsV1().StatefulSets("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func makeSet(name string, replicas int32, mut func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			ServiceName:         name,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr[int32](0)}},
			RevisionHistoryLimit: ptr[int32](10),
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "postgres", Image: "postgres:16",
					VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/var/lib/postgresql/data"}}}}},
			},
			VolumeClaimTemplates: []v1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: v1.PersistentVolumeClaimSpec{
					AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
					Resources:   v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("10Gi")}},
				},
			}},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
		},
	}
	if mut != nil {
		mut(s)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func TestOrderedReadyAndClaimReuse(t *testing.T) {
	f := newFixture(t, makeSet("postgres", 3, nil))
	key := "default/postgres"
	f.sync(t, key)
	if diff := cmp.Diff([]string{"create persistentvolumeclaims data-postgres-0", "create pods postgres-0"}, f.writes()); diff != "" {
		t.Fatalf("first sync (-want +got):\n%s", diff)
	}
	pod := f.pod(t, "postgres-0")
	rev := f.set(t, "postgres").Status.UpdateRevision
	wantLabels := map[string]string{"app": "postgres", "statefulset.kubernetes.io/pod-name": "postgres-0",
		"apps.kubernetes.io/pod-index": "0", "controller-revision-hash": rev}
	if diff := cmp.Diff(wantLabels, pod.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if pod.Spec.Hostname != "postgres-0" || pod.Spec.Subdomain != "postgres" ||
		len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "data-postgres-0" {
		t.Errorf("pod spec %+v", pod.Spec)
	}
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.Kind != "StatefulSet" {
		t.Errorf("owner %+v", pod.OwnerReferences)
	}

	// postgres-0 is pending: nothing else happens.
	f.sync(t, key)
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("created while postgres-0 is not ready: %v", w)
	}
	f.makeReady(t, "postgres-0")
	f.sync(t, key)
	if diff := cmp.Diff([]string{"create persistentvolumeclaims data-postgres-1", "create pods postgres-1"}, f.writes()); diff != "" {
		t.Fatalf("after postgres-0 ready (-want +got):\n%s", diff)
	}
	f.makeReady(t, "postgres-1")
	f.sync(t, key)
	f.makeReady(t, "postgres-2")
	f.sync(t, key)
	st := f.set(t, "postgres").Status
	want := appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 3, CurrentReplicas: 3, UpdatedReplicas: 3,
		AvailableReplicas: 3, CurrentRevision: rev, UpdateRevision: rev}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Fatalf("status (-want +got):\n%s", diff)
	}

	// postgres-1 is deleted: it comes back on the same claim.
	if err := f.client.CoreV1().Pods("default").Delete(context.Background(), "postgres-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync(t, key)
	if diff := cmp.Diff([]string{"create pods postgres-1"}, f.writes()); diff != "" {
		t.Fatalf("recreation (-want +got):\n%s", diff)
	}
	if got := f.pod(t, "postgres-1").Spec.Volumes[0].PersistentVolumeClaim.ClaimName; got != "data-postgres-1" {
		t.Errorf("recreated pod uses claim %q", got)
	}
}

func TestScaleDownFromHighest(t *testing.T) {
	f := newFixture(t, makeSet("web", 3, nil))
	for range 3 {
		f.sync(t, "default/web")
		pods, _ := f.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		for _, p := range pods.Items {
			f.makeReady(t, p.Name)
		}
	}
	s := f.set(t, "web")
	s.Spec.Replicas = ptr[int32](1)
	if _, err := f.client.AppsV1().StatefulSets("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync(t, "default/web")
	if diff := cmp.Diff([]string{"delete pods web-2"}, f.writes()); diff != "" {
		t.Fatalf("scale down (-want +got):\n%s", diff)
	}
	f.sync(t, "default/web")
	if diff := cmp.Diff([]string{"delete pods web-1"}, f.writes()); diff != "" {
		t.Fatalf("scale down (-want +got):\n%s", diff)
	}
}

func TestParallelCreatesAllAndOrdinalsStart(t *testing.T) {
	f := newFixture(t, makeSet("web", 3, func(s *appsv1.StatefulSet) {
		s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
		s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5}
		s.Spec.VolumeClaimTemplates = nil
	}))
	f.sync(t, "default/web")
	want := []string{"create pods web-5", "create pods web-6", "create pods web-7"}
	if diff := cmp.Diff(want, f.writes()); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestRollingUpdateWithPartition(t *testing.T) {
	f := newFixture(t, makeSet("web", 3, func(s *appsv1.StatefulSet) { s.Spec.VolumeClaimTemplates = nil }))
	for range 3 {
		f.sync(t, "default/web")
		pods, _ := f.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		for _, p := range pods.Items {
			f.makeReady(t, p.Name)
		}
	}
	oldRev := f.set(t, "web").Status.CurrentRevision
	s := f.set(t, "web")
	s.Generation = 2
	s.Spec.Template.Spec.Containers[0].Image = "postgres:17"
	s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr[int32](2)
	if _, err := f.client.AppsV1().StatefulSets("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync(t, "default/web")
	if diff := cmp.Diff([]string{"delete pods web-2"}, f.writes()); diff != "" {
		t.Fatalf("update (-want +got):\n%s", diff)
	}
	st := f.set(t, "web").Status
	if st.CurrentRevision != oldRev || st.UpdateRevision == oldRev {
		t.Fatalf("revisions %q → %q", st.CurrentRevision, st.UpdateRevision)
	}
	f.sync(t, "default/web")
	if diff := cmp.Diff([]string{"create pods web-2"}, f.writes()); diff != "" {
		t.Fatalf("recreate (-want +got):\n%s", diff)
	}
	if got := f.pod(t, "web-2"); got.Spec.Containers[0].Image != "postgres:17" || got.Labels["controller-revision-hash"] != st.UpdateRevision {
		t.Fatalf("web-2 not updated: %s %v", got.Spec.Containers[0].Image, got.Labels)
	}
	f.makeReady(t, "web-2")
	f.sync(t, "default/web")
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("partition 2 must keep web-0 and web-1: %v", w)
	}
	st = f.set(t, "web").Status
	if st.UpdatedReplicas != 1 || st.CurrentReplicas != 2 {
		t.Fatalf("status %+v", st)
	}

	// Deleting web-0 below the partition recreates it at the current
	// revision.
	if err := f.client.CoreV1().Pods("default").Delete(context.Background(), "web-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync(t, "default/web")
	if got := f.pod(t, "web-0"); got.Spec.Containers[0].Image != "postgres:16" || got.Labels["controller-revision-hash"] != oldRev {
		t.Fatalf("web-0 not at the current revision: %s", got.Spec.Containers[0].Image)
	}
}

func TestClaimOwners(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", UID: "pod-uid"}}
	other := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Thing", Name: "x", UID: "other"}
	setRef := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "uid-web"}
	podRef := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "web-1", UID: "pod-uid"}
	cases := []struct {
		name                    string
		whenDeleted, whenScaled appsv1.PersistentVolumeClaimRetentionPolicyType
		existing                []metav1.OwnerReference
		condemned               bool
		want                    []metav1.OwnerReference
	}{
		{name: "retain retain", whenDeleted: "Retain", whenScaled: "Retain", existing: []metav1.OwnerReference{other, setRef}, want: []metav1.OwnerReference{other}},
		{name: "delete on set deletion", whenDeleted: "Delete", whenScaled: "Retain", want: []metav1.OwnerReference{setRef}},
		{name: "delete on scale, pod kept", whenDeleted: "Retain", whenScaled: "Delete", existing: []metav1.OwnerReference{podRef}},
		{name: "delete on scale, pod condemned", whenDeleted: "Retain", whenScaled: "Delete", condemned: true, want: []metav1.OwnerReference{podRef}},
		{name: "delete delete, kept", whenDeleted: "Delete", whenScaled: "Delete", want: []metav1.OwnerReference{setRef}},
		{name: "delete delete, condemned", whenDeleted: "Delete", whenScaled: "Delete", condemned: true, existing: []metav1.OwnerReference{setRef}, want: []metav1.OwnerReference{podRef}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := makeSet("web", 1, func(s *appsv1.StatefulSet) {
				s.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = tc.whenDeleted
				s.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = tc.whenScaled
			})
			claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-web-1", OwnerReferences: tc.existing}}
			if diff := cmp.Diff(tc.want, claimOwners(set, claim, pod, tc.condemned)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestComputeWaitsAndRecreates(t *testing.T) {
	set := makeSet("web", 2, func(s *appsv1.StatefulSet) { s.Spec.VolumeClaimTemplates = nil })
	rev := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "web-r1"}}
	mk := func(name string, mut func(*v1.Pod)) *v1.Pod {
		p := newPod(set, &set.Spec.Template, "web-r1", 0)
		p.Name = name
		p.UID = types.UID(name)
		if mut != nil {
			mut(p)
		}
		return p
	}
	oldRev := func(p *v1.Pod) *v1.Pod {
		p.Labels[appsv1.ControllerRevisionHashLabelKey] = "web-r0"
		return p
	}
	readyPod := func(p *v1.Pod) {
		p.Status.Phase = v1.PodRunning
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}
	}
	runningUnready := func(p *v1.Pod) {
		p.Status.Phase = v1.PodRunning
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0)}}
	}
	cases := []struct {
		name     string
		set      func(*appsv1.StatefulSet)
		pods     []*v1.Pod
		now      time.Duration
		creates  []string
		deletes  []string
		requeue  time.Duration
		avail    int32
		replicas int32
	}{
		{name: "failed pod deleted first", pods: []*v1.Pod{mk("web-0", func(p *v1.Pod) { p.Status.Phase = v1.PodFailed })}, deletes: []string{"web-0"}, replicas: 1},
		{name: "terminating pod blocks", pods: []*v1.Pod{mk("web-0", func(p *v1.Pod) { readyPod(p); p.DeletionTimestamp = &metav1.Time{Time: t0} })}, replicas: 1, avail: 1},
		{
			name:    "minReadySeconds holds the next ordinal",
			set:     func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = 10 },
			pods:    []*v1.Pod{mk("web-0", readyPod)},
			now:     4 * time.Second,
			requeue: 6 * time.Second, replicas: 1,
		},
		{
			name:    "available after minReadySeconds",
			set:     func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = 10 },
			pods:    []*v1.Pod{mk("web-0", readyPod)},
			now:     10 * time.Second,
			creates: []string{"web-1"}, replicas: 1, avail: 1,
		},
		{
			name: "maxUnavailable 2 replaces two old pods at once",
			set: func(s *appsv1.StatefulSet) {
				s.Spec.Replicas = ptr[int32](3)
				s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromInt32(2))
			},
			pods:     []*v1.Pod{oldRev(mk("web-0", readyPod)), oldRev(mk("web-1", readyPod)), oldRev(mk("web-2", readyPod))},
			deletes:  []string{"web-1", "web-2"},
			replicas: 3, avail: 3,
		},
		{
			name: "maxUnavailable counts pods already unavailable",
			set: func(s *appsv1.StatefulSet) {
				s.Spec.Replicas = ptr[int32](3)
				s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
				s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromInt32(2))
			},
			pods:     []*v1.Pod{oldRev(mk("web-0", readyPod)), oldRev(mk("web-1", readyPod)), mk("web-2", nil)},
			deletes:  []string{"web-1"},
			replicas: 3, avail: 2,
		},
		{name: "foreign-named pod ignored", pods: []*v1.Pod{mk("other-0", readyPod)}, creates: []string{"web-0"}},
		// The conformance spec 'Scaling should happen in predictable order and
		// halt if any stateful pod is unhealthy' scales 3 unready pods to 0.
		{
			name:     "scale down halts while every pod is unready",
			set:      func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr[int32](0) },
			pods:     []*v1.Pod{mk("web-0", runningUnready), mk("web-1", runningUnready), mk("web-2", runningUnready)},
			replicas: 3,
		},
		{
			name:     "scale down halts at an unready pod above the first unhealthy",
			set:      func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr[int32](1) },
			pods:     []*v1.Pod{mk("web-0", readyPod), mk("web-1", runningUnready), mk("web-2", runningUnready)},
			replicas: 3, avail: 1,
		},
		{
			name:     "scale down deletes a ready pod above an unready one",
			set:      func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr[int32](1) },
			pods:     []*v1.Pod{mk("web-0", readyPod), mk("web-1", runningUnready), mk("web-2", readyPod)},
			deletes:  []string{"web-2"},
			replicas: 3, avail: 2,
		},
		{
			name:     "scale down deletes the first unhealthy pod",
			set:      func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr[int32](1) },
			pods:     []*v1.Pod{mk("web-0", readyPod), mk("web-1", readyPod), mk("web-2", runningUnready)},
			deletes:  []string{"web-2"},
			replicas: 3, avail: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := set.DeepCopy()
			if tc.set != nil {
				tc.set(s)
			}
			p := compute(snapshot{set: s, pods: tc.pods, claims: map[string]*v1.PersistentVolumeClaim{}, current: rev, update: rev,
				currentTmpl: &s.Spec.Template, updateTmpl: &s.Spec.Template, now: t0.Add(tc.now)})
			var creates, deletes []string
			for _, pod := range p.createPods {
				creates = append(creates, pod.Name)
			}
			for _, pod := range p.deletePods {
				deletes = append(deletes, pod.Name)
			}
			sort.Strings(deletes)
			if diff := cmp.Diff(tc.creates, creates); diff != "" {
				t.Errorf("creates (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.deletes, deletes); diff != "" {
				t.Errorf("deletes (-want +got):\n%s", diff)
			}
			if p.requeue != tc.requeue || p.status.AvailableReplicas != tc.avail || p.status.Replicas != tc.replicas {
				t.Errorf("requeue %v available %d replicas %d", p.requeue, p.status.AvailableReplicas, p.status.Replicas)
			}
		})
	}
}
