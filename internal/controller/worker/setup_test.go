package worker

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// TestPodObservation: a pod an owner deleted counts as gone once it shows a
// deletionTimestamp (a pod whose node is gone may never finish terminating), and each
// deletion counts once.
func TestPodObservation(t *testing.T) {
	live := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1"}}
	dying := live.DeepCopy()
	dying.DeletionTimestamp = &metav1.Time{Time: time.Unix(0, 0)}
	cases := []struct {
		name       string
		old, cur   *v1.Pod
		adds, dels int
	}{
		{"created", nil, live, 1, 0},
		{"first seen terminating", nil, dying, 0, 1},
		{"turns terminating", live, dying, 0, 1},
		{"terminating pod updated", dying, dying, 0, 0},
		{"terminating pod removed", dying, nil, 0, 0},
		{"removed at once", live, nil, 0, 1},
		{"updated", live, live, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			adds, dels := PodObservation(tc.old, tc.cur)
			if adds != tc.adds || dels != tc.dels {
				t.Errorf("got adds=%d dels=%d, want %d %d", adds, dels, tc.adds, tc.dels)
			}
		})
	}
}

// TestPods: both sides of a pod event come out as pods, tombstones opened, and the pod
// the event is about is the newest known.
func TestPods(t *testing.T) {
	a := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: "1"}}
	b := a.DeepCopy()
	b.ResourceVersion = "2"
	cases := []struct {
		name          string
		old, cur      any
		wantOld, want *v1.Pod
		wantCur       *v1.Pod
	}{
		{"add", nil, a, nil, a, a},
		{"update", a, b, a, b, b},
		{"delete", a, nil, a, a, nil},
		{"delete seen as a tombstone", cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: a}, nil, a, a, nil},
		{"not a pod", "x", nil, nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, c, p := Pods(tc.old, tc.cur)
			if o != tc.wantOld || c != tc.wantCur || p != tc.want {
				t.Errorf("Pods = (%v, %v, %v), want (%v, %v, %v)", o, c, p, tc.wantOld, tc.wantCur, tc.want)
			}
		})
	}
}

// TestOwnerKey: a pod controlled by the kind asked for names its owner; one controlled by
// another kind (or another group version of it) is someone else's; an orphan has none.
func TestOwnerKey(t *testing.T) {
	ds := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}
	yes := true
	pod := func(apiVersion, kind string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
		if kind != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "owner", Controller: &yes}}
		}
		return p
	}
	cases := []struct {
		name    string
		pod     *v1.Pod
		key     string
		hasCtrl bool
	}{
		{"own kind", pod("apps/v1", "DaemonSet"), "ns/owner", true},
		{"other kind", pod("apps/v1", "ReplicaSet"), "", true},
		{"other group version", pod("extensions/v1beta1", "DaemonSet"), "", true},
		{"orphan", pod("", ""), "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key, has := OwnerKey(tc.pod, ds)
			if key != tc.key || has != tc.hasCtrl {
				t.Errorf("OwnerKey = %q, %v; want %q, %v", key, has, tc.key, tc.hasCtrl)
			}
		})
	}
}

// TestSelects: an empty or invalid selector selects nothing.
func TestSelects(t *testing.T) {
	pod := map[string]string{"app": "web"}
	cases := []struct {
		name string
		sel  *metav1.LabelSelector
		want bool
	}{
		{"matching", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, true},
		{"not matching", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, false},
		{"empty", &metav1.LabelSelector{}, false},
		{"nil", nil, false},
		{"invalid", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Selects(tc.sel, pod); got != tc.want {
				t.Errorf("Selects = %v, want %v", got, tc.want)
			}
		})
	}
}
