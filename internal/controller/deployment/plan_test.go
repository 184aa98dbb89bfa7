package deployment

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

// makeDeployment is a defaulted RollingUpdate Deployment "web".
func makeDeployment(replicas int32, mutate ...func(*appsv1.Deployment)) *appsv1.Deployment {
	surge, unavail := intstr.FromString("25%"), intstr.FromString("25%")
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web", Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox:1"}}},
			},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavail},
			},
			RevisionHistoryLimit:    new(int32(10)),
			ProgressDeadlineSeconds: new(int32(600)),
		},
	}
	for _, m := range mutate {
		m(d)
	}
	return d
}

func recreate(d *appsv1.Deployment) {
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
}

func surgeUnavailable(s, u int) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) {
		ms, mu := intstr.FromInt(s), intstr.FromInt(u)
		d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &ms, MaxUnavailable: &mu}
	}
}

// sim plays the API server and the ReplicaSet controller around
// planDeployment, one sync at a time.
type sim struct {
	t      *testing.T
	d      *appsv1.Deployment
	rss    []*appsv1.ReplicaSet
	now    time.Time
	events []string
	seq    int
}

func newSim(t *testing.T, d *appsv1.Deployment) *sim {
	return &sim{t: t, d: d, now: t0}
}

// step runs one sync and applies its plan.
func (s *sim) step() plan {
	p := planDeployment(s.d, s.rss, nil, s.now)
	for _, w := range p.writes {
		rs := w.rs.DeepCopy()
		if w.create {
			s.seq++
			rs.UID = types.UID(fmt.Sprintf("rs-uid-%d", s.seq))
			rs.CreationTimestamp = metav1.NewTime(s.now.Add(time.Duration(s.seq) * time.Second))
			rs.Generation = 1
			s.rss = append(s.rss, rs)
		} else {
			i := slices.IndexFunc(s.rss, func(o *appsv1.ReplicaSet) bool { return o.Name == rs.Name })
			if i < 0 {
				s.t.Fatalf("update of unknown replicaset %s", rs.Name)
			}
			if replicasOf(s.rss[i]) != replicasOf(rs) {
				rs.Generation++
			}
			s.rss[i] = rs
		}
		s.events = append(s.events, w.events...)
	}
	for _, del := range p.deletes {
		s.rss = slices.DeleteFunc(s.rss, func(o *appsv1.ReplicaSet) bool { return o.Name == del.Name })
	}
	if p.revision != "" {
		if s.d.Annotations == nil {
			s.d.Annotations = map[string]string{}
		}
		s.d.Annotations[revisionAnnotation] = p.revision
	}
	if p.status != nil {
		s.d.Status = *p.status
	}
	return p
}

// settle is the ReplicaSet controller catching up: every ReplicaSet has
// its pods, and they are ready and available when ready says so.
func (s *sim) settle(ready func(rs *appsv1.ReplicaSet) bool) {
	for _, rs := range s.rss {
		n := replicasOf(rs)
		rs.Status.Replicas = n
		rs.Status.ObservedGeneration = rs.Generation
		rs.Status.TerminatingReplicas = new(int32(0))
		rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = 0, 0
		if ready(rs) {
			rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = n, n
		}
	}
}

func allReady(*appsv1.ReplicaSet) bool { return true }

func (s *sim) byName(name string) *appsv1.ReplicaSet {
	for _, rs := range s.rss {
		if rs.Name == name {
			return rs
		}
	}
	return nil
}

func (s *sim) newRS() *appsv1.ReplicaSet {
	for _, rs := range s.rss {
		if equalIgnoreHash(&rs.Spec.Template, &s.d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// rollOut syncs and settles until the Deployment is complete.
func (s *sim) rollOut(check func()) {
	for i := 0; ; i++ {
		if i > 50 {
			s.t.Fatalf("rollout did not finish; events %q", s.events)
		}
		s.step()
		if check != nil {
			check()
		}
		s.settle(allReady)
		if deploymentComplete(s.d, &s.d.Status) && len(active(s.rss)) == 1 {
			s.step()
			return
		}
	}
}

func (s *sim) changeImage(image string) {
	s.d.Spec.Template.Spec.Containers[0].Image = image
	s.d.Generation++
}

func cond(d *appsv1.Deployment, t appsv1.DeploymentConditionType) string {
	c := condition(&d.Status, t)
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
}

func TestFirstRollout(t *testing.T) {
	s := newSim(t, makeDeployment(3))
	s.step()
	if len(s.rss) != 1 {
		t.Fatalf("%d replicasets, want 1", len(s.rss))
	}
	rs := s.rss[0]
	hash := templateHash(&s.d.Spec.Template, nil)
	if rs.Name != "web-"+hash || rs.Labels[hashLabel] != hash || rs.Spec.Selector.MatchLabels[hashLabel] != hash || rs.Spec.Template.Labels[hashLabel] != hash {
		t.Errorf("replicaset %s labels %v selector %v", rs.Name, rs.Labels, rs.Spec.Selector.MatchLabels)
	}
	if strings.Trim(hash, "bcdfghjklmnpqrstvwxz2456789") != "" {
		t.Errorf("hash %q outside the safe alphabet", hash)
	}
	ref := metav1.GetControllerOf(rs)
	if ref == nil || ref.UID != s.d.UID || ref.Kind != "Deployment" {
		t.Errorf("controller ref %+v", ref)
	}
	wantAnn := map[string]string{revisionAnnotation: "1", desiredReplicasAnnotation: "3", maxReplicasAnnotation: "4"}
	if diff := cmp.Diff(wantAnn, rs.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if s.d.Annotations[revisionAnnotation] != "1" {
		t.Errorf("deployment revision %q", s.d.Annotations[revisionAnnotation])
	}
	if diff := cmp.Diff([]string{"Scaled up replica set " + rs.Name + " from 0 to 3"}, s.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got, want := cond(s.d, appsv1.DeploymentProgressing), `True NewReplicaSetCreated: Created new replica set "`+rs.Name+`"`; got != want {
		t.Errorf("progressing %q, want %q", got, want)
	}
	if got := cond(s.d, appsv1.DeploymentAvailable); got != "False MinimumReplicasUnavailable: Deployment does not have minimum availability." {
		t.Errorf("available %q", got)
	}
	s.settle(allReady)
	s.step()
	st := s.d.Status
	if st.Replicas != 3 || st.UpdatedReplicas != 3 || st.ReadyReplicas != 3 || st.AvailableReplicas != 3 || st.UnavailableReplicas != 0 || st.ObservedGeneration != 1 {
		t.Errorf("status %+v", st)
	}
	if got, want := cond(s.d, appsv1.DeploymentProgressing), `True NewReplicaSetAvailable: ReplicaSet "`+rs.Name+`" has successfully progressed.`; got != want {
		t.Errorf("progressing %q, want %q", got, want)
	}
	if got := cond(s.d, appsv1.DeploymentAvailable); got != "True MinimumReplicasAvailable: Deployment has minimum availability." {
		t.Errorf("available %q", got)
	}
	if p := s.step(); p.status != nil || len(p.writes) > 0 {
		t.Errorf("steady state still writes: %+v", p)
	}
}

func TestRollingUpdateHonoursSurgeAndUnavailable(t *testing.T) {
	cases := []struct {
		name           string
		replicas       int32
		surge, unavail int
	}{
		{"surge 1 unavailable 1", 4, 1, 1},
		{"surge only", 3, 1, 0},
		{"unavailable only", 3, 0, 1},
		{"defaults 25%", 10, -1, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := makeDeployment(tc.replicas)
			if tc.surge >= 0 {
				surgeUnavailable(tc.surge, tc.unavail)(d)
			}
			s := newSim(t, d)
			s.rollOut(nil)
			s.events = nil
			s.changeImage("busybox:2")
			surge, unavail := fenceposts(d)
			var prevAvail map[string]int32
			check := func() {
				total, avail := int32(0), int32(0)
				for _, rs := range s.rss {
					total += replicasOf(rs)
					avail += min(replicasOf(rs), prevAvail[rs.Name])
				}
				if total > tc.replicas+surge {
					t.Errorf("%d pods wanted, more than %d+%d", total, tc.replicas, surge)
				}
				if avail < tc.replicas-unavail {
					t.Errorf("%d available pods kept, fewer than %d-%d", avail, tc.replicas, unavail)
				}
			}
			snapshot := func() {
				prevAvail = map[string]int32{}
				for _, rs := range s.rss {
					prevAvail[rs.Name] = rs.Status.AvailableReplicas
				}
			}
			snapshot()
			for i := 0; ; i++ {
				if i > 50 {
					t.Fatalf("no end: events %q", s.events)
				}
				s.step()
				check()
				s.settle(allReady)
				snapshot()
				if deploymentComplete(s.d, &s.d.Status) && len(active(s.rss)) == 1 {
					break
				}
			}
			if s.newRS().Annotations[revisionAnnotation] != "2" || s.d.Annotations[revisionAnnotation] != "2" {
				t.Errorf("revision: rs %q deployment %q", s.newRS().Annotations[revisionAnnotation], s.d.Annotations[revisionAnnotation])
			}
		})
	}
}

func TestRollingUpdateSteps(t *testing.T) {
	s := newSim(t, makeDeployment(4, surgeUnavailable(1, 1)))
	s.rollOut(nil)
	oldName := s.rss[0].Name
	s.events = nil
	s.changeImage("busybox:2")
	// New pods never become ready: the rollout stops at maxUnavailable.
	for range 5 {
		s.step()
		s.settle(func(rs *appsv1.ReplicaSet) bool { return rs.Name == oldName })
	}
	newName := s.newRS().Name
	want := []string{
		"Scaled up replica set " + newName + " from 0 to 1",
		"Scaled down replica set " + oldName + " from 4 to 3",
		"Scaled up replica set " + newName + " from 1 to 2",
	}
	if diff := cmp.Diff(want, s.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if st := s.d.Status; st.Replicas != 5 || st.UpdatedReplicas != 2 || st.AvailableReplicas != 3 || st.UnavailableReplicas != 2 {
		t.Errorf("status %+v", st)
	}
	if got := cond(s.d, appsv1.DeploymentAvailable); !strings.HasPrefix(got, "True MinimumReplicasAvailable") {
		t.Errorf("available %q", got)
	}
}

func TestRecreate(t *testing.T) {
	s := newSim(t, makeDeployment(3, recreate))
	s.rollOut(nil)
	oldName := s.rss[0].Name
	s.events = nil
	s.changeImage("busybox:2")
	s.step()
	if diff := cmp.Diff([]string{"Scaled down replica set " + oldName + " from 3 to 0"}, s.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// Old pods still run (status not caught up): no new ReplicaSet yet.
	s.step()
	if len(s.rss) != 1 {
		t.Fatalf("new replicaset created while old pods run")
	}
	// Old pods gone by status, but a pod still listed as running blocks too.
	s.settle(allReady)
	running := map[types.UID][]*v1.Pod{s.rss[0].UID: {{Status: v1.PodStatus{Phase: v1.PodRunning}}}}
	if p := planDeployment(s.d, s.rss, running, s.now); slices.ContainsFunc(p.writes, func(w *rsWrite) bool { return w.create }) {
		t.Errorf("new replicaset created while an old pod runs")
	}
	s.step()
	newName := s.newRS().Name
	want := []string{"Scaled down replica set " + oldName + " from 3 to 0", "Scaled up replica set " + newName + " from 0 to 3"}
	if diff := cmp.Diff(want, s.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got := s.newRS().Annotations[maxReplicasAnnotation]; got != "3" {
		t.Errorf("max-replicas %q, want 3 (no surge under Recreate)", got)
	}
}

func TestHistoryCleanup(t *testing.T) {
	s := newSim(t, makeDeployment(2, func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = new(int32(1)) }))
	s.rollOut(nil)
	for i := 2; i <= 4; i++ {
		s.changeImage(fmt.Sprintf("busybox:%d", i))
		s.rollOut(nil)
	}
	var revs []string
	for _, rs := range s.rss {
		revs = append(revs, rs.Annotations[revisionAnnotation])
	}
	slices.Sort(revs)
	if diff := cmp.Diff([]string{"3", "4"}, revs); diff != "" {
		t.Errorf("kept revisions (-want +got):\n%s", diff)
	}
}

func TestRollbackKeepsRevisionHistory(t *testing.T) {
	s := newSim(t, makeDeployment(2))
	s.rollOut(nil)
	first := s.rss[0].Name
	s.changeImage("busybox:2")
	s.rollOut(nil)
	// kubectl rollout undo copies the old template back.
	s.changeImage("busybox:1")
	s.rollOut(nil)
	rs := s.byName(first)
	if rs == nil || rs.Annotations[revisionAnnotation] != "3" || rs.Annotations[revisionHistoryAnnotation] != "1" {
		t.Fatalf("rolled-back replicaset annotations: %+v", rs)
	}
	if len(s.rss) != 2 || s.d.Annotations[revisionAnnotation] != "3" {
		t.Errorf("%d replicasets, deployment revision %q", len(s.rss), s.d.Annotations[revisionAnnotation])
	}
}

func TestPausedDoesNotRoll(t *testing.T) {
	s := newSim(t, makeDeployment(3))
	s.rollOut(nil)
	s.d.Spec.Paused = true
	s.changeImage("busybox:2")
	s.events = nil
	s.step()
	if len(s.rss) != 1 || len(s.events) != 0 {
		t.Errorf("paused deployment rolled: %d replicasets, events %q", len(s.rss), s.events)
	}
	if got := cond(s.d, appsv1.DeploymentProgressing); got != "Unknown DeploymentPaused: Deployment is paused" {
		t.Errorf("progressing %q", got)
	}
	// Scaling still works while paused.
	s.d.Spec.Replicas = new(int32(5))
	s.step()
	if got := replicasOf(s.rss[0]); got != 5 {
		t.Errorf("paused deployment not scaled: %d", got)
	}
	s.d.Spec.Paused = false
	s.step()
	if len(s.rss) != 2 {
		t.Errorf("resumed deployment did not roll")
	}
}

func TestProgressDeadline(t *testing.T) {
	s := newSim(t, makeDeployment(2, func(d *appsv1.Deployment) { d.Spec.ProgressDeadlineSeconds = new(int32(60)) }))
	s.step()
	s.settle(func(*appsv1.ReplicaSet) bool { return false })
	s.step()
	// Nothing changes any more: only a timer can notice the deadline.
	p := s.step()
	if p.requeueAfter != 61*time.Second {
		t.Errorf("requeueAfter %v, want 61s", p.requeueAfter)
	}
	s.now = s.now.Add(61 * time.Second)
	s.step()
	want := `False ProgressDeadlineExceeded: ReplicaSet "` + s.rss[0].Name + `" has timed out progressing.`
	if got := cond(s.d, appsv1.DeploymentProgressing); got != want {
		t.Errorf("progressing %q, want %q", got, want)
	}
	if p := s.step(); p.requeueAfter != 0 || p.status != nil {
		t.Errorf("timed-out deployment still requeued: %+v", p)
	}
}

func TestProportionalScaling(t *testing.T) {
	d := makeDeployment(20, surgeUnavailable(5, 2))
	old := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-old", UID: "old", CreationTimestamp: metav1.NewTime(t0),
			Annotations: map[string]string{desiredReplicasAnnotation: "10", maxReplicasAnnotation: "13", revisionAnnotation: "1"}},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(8)), Template: *d.Spec.Template.DeepCopy()},
	}
	old.Spec.Template.Spec.Containers[0].Image = "busybox:0"
	newRS := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-new", UID: "new", CreationTimestamp: metav1.NewTime(t0.Add(time.Minute)),
			Annotations: map[string]string{desiredReplicasAnnotation: "10", maxReplicasAnnotation: "13", revisionAnnotation: "2"}},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(5)), Template: *d.Spec.Template.DeepCopy()},
	}
	s := newSim(t, d)
	s.rss = []*appsv1.ReplicaSet{old, newRS}
	s.step()
	if got := [2]int32{replicasOf(s.byName("web-old")), replicasOf(s.byName("web-new"))}; got != [2]int32{15, 10} {
		t.Errorf("old/new = %v, want [15 10]", got)
	}
	want := []string{"Scaled up replica set web-old from 8 to 15", "Scaled up replica set web-new from 5 to 10"}
	if diff := cmp.Diff(want, s.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestTemplateHash(t *testing.T) {
	d := makeDeployment(1)
	a := templateHash(&d.Spec.Template, nil)
	if a != templateHash(d.Spec.Template.DeepCopy(), nil) {
		t.Error("hash not stable")
	}
	if a == templateHash(&d.Spec.Template, new(int32(1))) {
		t.Error("collision count does not change the hash")
	}
	d.Spec.Template.Spec.Containers[0].Image = "other"
	if a == templateHash(&d.Spec.Template, nil) {
		t.Error("template change does not change the hash")
	}
}

func TestEmptySelectorOnlyObservesGeneration(t *testing.T) {
	d := makeDeployment(1, func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{}; d.Generation = 4 })
	p := planDeployment(d, nil, nil, t0)
	if len(p.writes) != 0 || p.status == nil || p.status.ObservedGeneration != 4 {
		t.Errorf("plan %+v", p)
	}
}

// BenchmarkPlanDeployment plans a rollout step of 300 replicas spread
// over ten old revisions.
func BenchmarkPlanDeployment(b *testing.B) {
	d := makeDeployment(300)
	var rss []*appsv1.ReplicaSet
	for i := range 10 {
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), UID: types.UID(fmt.Sprint(i)),
				CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(i) * time.Minute)),
				Annotations:       map[string]string{revisionAnnotation: fmt.Sprint(i + 1), desiredReplicasAnnotation: "300", maxReplicasAnnotation: "375"}},
			Spec:   appsv1.ReplicaSetSpec{Replicas: new(int32(30)), Template: *d.Spec.Template.DeepCopy()},
			Status: appsv1.ReplicaSetStatus{Replicas: 30, ReadyReplicas: 30, AvailableReplicas: 30},
		}
		rs.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("busybox:old-%d", i)
		rss = append(rss, rs)
	}
	b.ReportAllocs()
	for b.Loop() {
		planDeployment(d, rss, nil, t0)
	}
}
