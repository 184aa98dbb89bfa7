package gc

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func policy(p metav1.DeletionPropagation) *metav1.DeletionPropagation { return &p }

func TestClassifyOwner(t *testing.T) {
	ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "d1"}
	tests := []struct {
		name  string
		owner *metav1.PartialObjectMetadata
		want  ownerState
	}{
		{"not found", nil, dangling},
		{"recreated with a new uid", makeObj("Deployment", "ns", "web", "d2", nil), dangling},
		{"present", makeObj("Deployment", "ns", "web", "d1", nil), solid},
		{"deleting in the background", makeObj("Deployment", "ns", "web", "d1", deleting("example.com/x")), solid},
		{"deleting in the foreground", makeObj("Deployment", "ns", "web", "d1", deleting(metav1.FinalizerDeleteDependents)), waiting},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := classifyOwner(ref, tc.owner); got != tc.want {
				t.Errorf("classifyOwner = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlanDependent(t *testing.T) {
	check := func(uid types.UID, s ownerState) ownerCheck {
		return ownerCheck{ref: metav1.OwnerReference{UID: uid}, state: s}
	}
	plain := makeObj("ReplicaSet", "ns", "rs", "r1", nil)
	tests := []struct {
		name          string
		obj           *metav1.PartialObjectMetadata
		checks        []ownerCheck
		hasDependents bool
		depDeleting   bool
		want          dependentPlan
	}{
		{name: "no owners", obj: plain},
		{name: "solid owner", obj: plain, checks: []ownerCheck{check("a", solid)}},
		{
			name:   "only owner absent: background delete",
			obj:    plain,
			checks: []ownerCheck{check("a", dangling)},
			want:   dependentPlan{delete: policy(metav1.DeletePropagationBackground)},
		},
		{
			name:   "all owners absent",
			obj:    plain,
			checks: []ownerCheck{check("a", dangling), check("b", dangling)},
			want:   dependentPlan{delete: policy(metav1.DeletePropagationBackground)},
		},
		{
			name:   "one solid owner keeps it: absent and waiting references are dropped",
			obj:    plain,
			checks: []ownerCheck{check("a", dangling), check("b", solid), check("c", waiting)},
			want:   dependentPlan{dropOwners: []types.UID{"a", "c"}},
		},
		{
			name:   "owner deleting in the foreground, no dependents of its own: background",
			obj:    plain,
			checks: []ownerCheck{check("a", waiting)},
			want:   dependentPlan{delete: policy(metav1.DeletePropagationBackground)},
		},
		{
			name:          "owner deleting in the foreground, with dependents: foreground",
			obj:           plain,
			checks:        []ownerCheck{check("a", waiting)},
			hasDependents: true,
			want:          dependentPlan{delete: policy(metav1.DeletePropagationForeground)},
		},
		{
			name:          "foreground cycle: unblock first",
			obj:           plain,
			checks:        []ownerCheck{check("a", waiting)},
			hasDependents: true,
			depDeleting:   true,
			want:          dependentPlan{unblock: true, delete: policy(metav1.DeletePropagationForeground)},
		},
		{
			name:   "own orphan finalizer is honoured",
			obj:    makeObj("ReplicaSet", "ns", "rs", "r1", func(o *metav1.PartialObjectMetadata) { o.Finalizers = []string{metav1.FinalizerOrphanDependents} }),
			checks: []ownerCheck{check("a", dangling)},
			want:   dependentPlan{delete: policy(metav1.DeletePropagationOrphan)},
		},
		{
			name:   "own foreground finalizer is honoured",
			obj:    makeObj("ReplicaSet", "ns", "rs", "r1", func(o *metav1.PartialObjectMetadata) { o.Finalizers = []string{metav1.FinalizerDeleteDependents} }),
			checks: []ownerCheck{check("a", dangling)},
			want:   dependentPlan{delete: policy(metav1.DeletePropagationForeground)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := planDependent(tc.obj, tc.checks, tc.hasDependents, tc.depDeleting)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(dependentPlan{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBlockingDependents(t *testing.T) {
	owner := makeObj("Deployment", "ns", "web", "d1", nil)
	other := makeObj("Deployment", "ns", "api", "d2", nil)
	nodeOf := func(o *metav1.PartialObjectMetadata) *node {
		return &node{id: idOf(o), observed: true, owners: o.OwnerReferences}
	}
	deps := []*node{
		nodeOf(makeObj("ReplicaSet", "ns", "a", "r1", ownedBy(owner, true))),
		nodeOf(makeObj("ReplicaSet", "ns", "b", "r2", ownedBy(owner, false))),
		nodeOf(makeObj("ReplicaSet", "ns", "c", "r3", func(o *metav1.PartialObjectMetadata) {
			ownedBy(other, true)(o)
			ownedBy(owner, false)(o)
		})),
	}
	var got []types.UID
	for _, d := range blockingDependents("d1", deps) {
		got = append(got, d.id.UID)
	}
	if diff := cmp.Diff([]types.UID{"r1"}, got); diff != "" {
		t.Errorf("blocking (-want +got):\n%s", diff)
	}
}

func TestPatches(t *testing.T) {
	a := makeObj("Deployment", "ns", "a", "ua", nil)
	b := makeObj("Deployment", "ns", "b", "ub", nil)
	obj := makeObj("ReplicaSet", "ns", "rs", "r1", func(o *metav1.PartialObjectMetadata) {
		ownedBy(a, true)(o)
		ownedBy(b, false)(o)
		o.Finalizers = []string{"x", metav1.FinalizerOrphanDependents}
		o.ResourceVersion = "7"
	})
	tests := []struct {
		name string
		make func() ([]byte, error)
		want string
	}{
		{
			name: "drop one owner",
			make: func() ([]byte, error) { return dropOwnersPatch(obj, []types.UID{"ua"}) },
			want: `{"metadata":{"resourceVersion":"7","ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"b","uid":"ub"}]}}`,
		},
		{
			name: "drop every owner",
			make: func() ([]byte, error) { return dropOwnersPatch(obj, []types.UID{"ua", "ub"}) },
			want: `{"metadata":{"resourceVersion":"7","ownerReferences":[]}}`,
		},
		{
			name: "drop an owner it does not have",
			make: func() ([]byte, error) { return dropOwnersPatch(obj, []types.UID{"zz"}) },
		},
		{
			name: "unblock",
			make: func() ([]byte, error) { return unblockPatch(obj) },
			want: `{"metadata":{"resourceVersion":"7","ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"a","uid":"ua","blockOwnerDeletion":false},{"apiVersion":"apps/v1","kind":"Deployment","name":"b","uid":"ub"}]}}`,
		},
		{
			name: "remove finalizer",
			make: func() ([]byte, error) { return removeFinalizerPatch(obj, metav1.FinalizerOrphanDependents) },
			want: `{"metadata":{"resourceVersion":"7","finalizers":["x"]}}`,
		},
		{
			name: "remove a finalizer it does not have",
			make: func() ([]byte, error) { return removeFinalizerPatch(obj, metav1.FinalizerDeleteDependents) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.make()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("patch = %s\nwant    %s", got, tc.want)
			}
		})
	}
}

func TestResources(t *testing.T) {
	preferred := []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: []string{"create", "delete", "get", "list", "watch"}},
			{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: []string{"get", "patch"}},
			{Name: "events", Namespaced: true, Kind: "Event", Verbs: []string{"delete", "list", "watch"}},
			{Name: "bindings", Namespaced: true, Kind: "Binding", Verbs: []string{"create"}},
			{Name: "nodes", Kind: "Node", Verbs: []string{"delete", "list", "watch"}},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Namespaced: true, Kind: "Deployment", Verbs: []string{"delete", "list", "watch"}},
		}},
	}
	all := append([]*metav1.APIResourceList{{GroupVersion: "apps/v1beta2", APIResources: []metav1.APIResource{
		{Name: "deployments", Namespaced: true, Kind: "Deployment", Verbs: []string{"delete", "list", "watch"}},
	}}}, preferred...)

	var got []string
	for gvr := range monitorable(preferred) {
		got = append(got, gvr.String())
	}
	want := []string{"/v1, Resource=nodes", "/v1, Resource=pods", "apps/v1, Resource=deployments"}
	if diff := cmp.Diff(want, slices.Sorted(slices.Values(got))); diff != "" {
		t.Errorf("monitorable (-want +got):\n%s", diff)
	}

	m := newMapper(all, preferred)
	lookups := []struct {
		apiVersion, kind string
		want             schema.GroupVersionResource
		namespaced, ok   bool
	}{
		{"apps/v1", "Deployment", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true, true},
		{"apps/v1beta2", "Deployment", schema.GroupVersionResource{Group: "apps", Version: "v1beta2", Resource: "deployments"}, true, true},
		{"apps/v1beta1", "Deployment", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true, true},
		{"v1", "Node", schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, false, true},
		{"example.com/v1", "Widget", schema.GroupVersionResource{}, false, false},
	}
	for _, l := range lookups {
		ri, ok := m.lookup(l.apiVersion, l.kind)
		if ok != l.ok || ri.gvr != l.want || ri.namespaced != l.namespaced {
			t.Errorf("lookup(%s, %s) = %v %v %v, want %v %v %v", l.apiVersion, l.kind, ri.gvr, ri.namespaced, ok, l.want, l.namespaced, l.ok)
		}
	}
}
