package job

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestOrphanPodsLoseTrackingFinalizer: the pods of a deleted Job, and pods
// with no controller, lose the tracking finalizer (else they could never be
// deleted); pods of a live Job or of another kind of controller keep it.
func TestOrphanPodsLoseTrackingFinalizer(t *testing.T) {
	live := makeJob("default", "live", nil)
	owned := func(name, kind, owner string) *v1.Pod {
		return makePod(name, func(p *v1.Pod) {
			p.Namespace = "default"
			p.Status.Phase = v1.PodRunning
			if kind != "" {
				apiVersion := "batch/v1"
				if kind != "Job" {
					apiVersion = "apps/v1"
				}
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner,
					UID: types.UID("uid-" + owner), Controller: ptrTo(true)}}
			}
		})
	}
	f := newFixture(t, live,
		owned("of-deleted", "Job", "gone"),
		owned("of-live", "Job", "live"),
		owned("no-controller", "", ""),
		owned("of-replicaset", "ReplicaSet", "web"))
	f.sync(t, "default/gone")
	f.sync(t, orphanPrefix+"default/no-controller")
	f.sync(t, orphanPrefix+"default/of-replicaset")
	f.sync(t, orphanPrefix+"default/of-live")
	got := map[string]bool{}
	for _, p := range f.pods(t) {
		got[p.Name] = hasFinalizer(&p)
	}
	want := map[string]bool{"of-deleted": false, "of-live": true, "no-controller": false, "of-replicaset": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tracking finalizer kept (-want +got):\n%s", diff)
	}
}
