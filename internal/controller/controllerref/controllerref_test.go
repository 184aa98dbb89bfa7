package controllerref

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

var dsKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

func makeOwner(mutate func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ds", UID: "ds-uid"}}
	if mutate != nil {
		mutate(ds)
	}
	return ds
}

func makePod(name string, mutate func(*v1.Pod)) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, UID: types.UID(name + "-uid"),
		Labels: map[string]string{"app": "a"},
	}}
	if mutate != nil {
		mutate(pod)
	}
	return pod
}

func ownedBy(uid types.UID) func(*v1.Pod) {
	return func(p *v1.Pod) {
		t := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "x", UID: uid, Controller: &t}}
	}
}

func relabel(p *v1.Pod) { p.Labels = map[string]string{"app": "other"} }

var now = metav1.Now()

func deleting(o metav1.Object) { o.SetDeletionTimestamp(&now) }

// patches returns "pod-name patch" for every pod patch the client saw.
func patches(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetResource().Resource == "pods" {
			if p.GetPatchType() != types.StrategicMergePatchType {
				out = append(out, "wrong patch type "+string(p.GetPatchType()))
			}
			out = append(out, p.GetName()+" "+string(p.GetPatch()))
		}
	}
	return out
}

const (
	adoptA   = `a {"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"ds","uid":"ds-uid","controller":true,"blockOwnerDeletion":true}],"uid":"a-uid"}}`
	releaseB = `b {"metadata":{"uid":"b-uid","ownerReferences":[{"$patch":"delete","uid":"ds-uid"}]}}`
)

func TestClaimPods(t *testing.T) {
	sel := labels.SelectorFromSet(labels.Set{"app": "a"})
	cases := []struct {
		name        string
		owner       *appsv1.DaemonSet
		pods        []*v1.Pod
		filters     []func(*v1.Pod) bool
		finalizers  []string
		wantClaimed []string
		wantPatches []string
	}{{
		name:        "matching orphan is adopted",
		owner:       makeOwner(nil),
		pods:        []*v1.Pod{makePod("a", nil)},
		wantClaimed: []string{"a"},
		wantPatches: []string{adoptA},
	}, {
		name:        "owned pod that matches is kept without a patch",
		owner:       makeOwner(nil),
		pods:        []*v1.Pod{makePod("a", ownedBy("ds-uid"))},
		wantClaimed: []string{"a"},
	}, {
		name:        "owned pod that stopped matching is released",
		owner:       makeOwner(nil),
		pods:        []*v1.Pod{makePod("b", func(p *v1.Pod) { ownedBy("ds-uid")(p); relabel(p) })},
		wantPatches: []string{releaseB},
	}, {
		name:  "an owner being deleted neither adopts nor releases",
		owner: makeOwner(func(ds *appsv1.DaemonSet) { deleting(ds) }),
		pods: []*v1.Pod{
			makePod("a", nil),
			makePod("b", func(p *v1.Pod) { ownedBy("ds-uid")(p); relabel(p) }),
			makePod("c", ownedBy("ds-uid")),
		},
		wantClaimed: []string{"c"},
	}, {
		name:  "pods of another controller, non-matching, deleted or elsewhere are left alone",
		owner: makeOwner(nil),
		pods: []*v1.Pod{
			makePod("other", ownedBy("x-uid")),
			makePod("stray", relabel),
			makePod("dying", func(p *v1.Pod) { deleting(p) }),
			makePod("elsewhere", func(p *v1.Pod) { p.Namespace = "ns2" }),
		},
	}, {
		name:        "a filter that fails releases an owned pod and skips an orphan",
		owner:       makeOwner(nil),
		pods:        []*v1.Pod{makePod("a", nil), makePod("b", ownedBy("ds-uid"))},
		filters:     []func(*v1.Pod) bool{func(p *v1.Pod) bool { return false }},
		wantPatches: []string{releaseB},
	}, {
		name:        "finalizers are added on adoption and removed on release",
		owner:       makeOwner(nil),
		pods:        []*v1.Pod{makePod("a", nil), makePod("b", func(p *v1.Pod) { ownedBy("ds-uid")(p); relabel(p) })},
		finalizers:  []string{"batch.kubernetes.io/job-tracking"},
		wantClaimed: []string{"a"},
		wantPatches: []string{
			`a {"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"ds","uid":"ds-uid","controller":true,"blockOwnerDeletion":true}],"uid":"a-uid","finalizers":["batch.kubernetes.io/job-tracking"]}}`,
			`b {"metadata":{"uid":"b-uid","ownerReferences":[{"$patch":"delete","uid":"ds-uid"}],"$deleteFromPrimitiveList/finalizers":["batch.kubernetes.io/job-tracking"]}}`,
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{}
			for _, p := range tc.pods {
				objs = append(objs, p.DeepCopy())
			}
			client := fake.NewClientset(objs...)
			m := NewPodManager(client.CoreV1(), tc.owner, dsKind, sel, nil, tc.finalizers...)
			claimed, err := m.ClaimPods(context.Background(), tc.pods, tc.filters...)
			if err != nil {
				t.Fatalf("ClaimPods: %v", err)
			}
			var names []string
			for _, p := range claimed {
				names = append(names, p.Name)
			}
			if diff := cmp.Diff(tc.wantClaimed, names); diff != "" {
				t.Errorf("claimed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPatches, patches(client)); diff != "" {
				t.Errorf("patches (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAdoptedPodCarriesOwner(t *testing.T) {
	client := fake.NewClientset(makePod("a", nil))
	m := NewPodManager(client.CoreV1(), makeOwner(nil), dsKind, labels.Everything(), nil)
	if _, err := m.ClaimPods(context.Background(), []*v1.Pod{makePod("a", nil)}); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Pods("ns").Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != "ds-uid" || ref.Kind != "DaemonSet" {
		t.Errorf("controller of adopted pod = %+v, want DaemonSet ds-uid", ref)
	}
}

func TestAdoptionRecheck(t *testing.T) {
	owner := makeOwner(nil)
	cases := []struct {
		name    string
		fresh   *appsv1.DaemonSet
		getErr  error
		wantErr string
	}{
		{name: "same owner adopts", fresh: makeOwner(nil)},
		{name: "recreated owner", fresh: makeOwner(func(ds *appsv1.DaemonSet) { ds.UID = "new" }), wantErr: "original DaemonSet ns/ds is gone: got uid new, wanted ds-uid"},
		{name: "owner being deleted", fresh: makeOwner(func(ds *appsv1.DaemonSet) { deleting(ds) }), wantErr: "ns/ds has just been deleted at"},
		{name: "owner unreadable", getErr: errors.New("boom"), wantErr: "can't recheck DeletionTimestamp: boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gets := 0
			check := Recheck(owner, "DaemonSet", func(context.Context) (metav1.Object, error) {
				gets++
				if tc.getErr != nil {
					return nil, tc.getErr
				}
				return tc.fresh, nil
			})
			pods := []*v1.Pod{makePod("a", nil), makePod("b", nil)}
			client := fake.NewClientset(pods[0].DeepCopy(), pods[1].DeepCopy())
			m := NewPodManager(client.CoreV1(), owner, dsKind, labels.Everything(), check)
			claimed, err := m.ClaimPods(context.Background(), pods)
			if gets != 1 {
				t.Errorf("owner read %d times, want once per manager", gets)
			}
			if tc.wantErr == "" {
				if err != nil || len(claimed) != 2 || len(patches(client)) != 2 {
					t.Errorf("claimed %d pods with %d patches, err %v; want both adopted", len(claimed), len(patches(client)), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "can't adopt Pod ns/a (a-uid)") {
				t.Errorf("error = %v, want one naming the pod and containing %q", err, tc.wantErr)
			}
			if len(claimed) != 0 || len(patches(client)) != 0 {
				t.Errorf("claimed %d pods with patches %v after a failed recheck", len(claimed), patches(client))
			}
		})
	}
}

func TestVanishedPods(t *testing.T) {
	// Neither pod exists in the API server: adoption and release both
	// find nothing, which is not an error.
	client := fake.NewClientset()
	m := NewPodManager(client.CoreV1(), makeOwner(nil), dsKind, labels.SelectorFromSet(labels.Set{"app": "a"}), nil)
	claimed, err := m.ClaimPods(context.Background(), []*v1.Pod{
		makePod("a", nil),
		makePod("b", func(p *v1.Pod) { ownedBy("ds-uid")(p); relabel(p) }),
	})
	if err != nil || len(claimed) != 0 {
		t.Errorf("ClaimPods of vanished pods = %d pods, %v; want none, no error", len(claimed), err)
	}
}

func TestPatchFailuresAreReported(t *testing.T) {
	client := fake.NewClientset(makePod("a", nil), makePod("b", nil))
	client.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd down")
	})
	m := NewPodManager(client.CoreV1(), makeOwner(nil), dsKind, labels.SelectorFromSet(labels.Set{"app": "a"}), nil)
	claimed, err := m.ClaimPods(context.Background(), []*v1.Pod{
		makePod("a", nil),
		makePod("b", func(p *v1.Pod) { ownedBy("ds-uid")(p); relabel(p) }),
	})
	if len(claimed) != 0 {
		t.Errorf("claimed %d pods whose adoption failed", len(claimed))
	}
	for _, want := range []string{"adopting pod ns/a into DaemonSet ns/ds: etcd down", "releasing pod ns/b from DaemonSet ns/ds: etcd down"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v, want it to contain %q", err, want)
		}
	}
}
