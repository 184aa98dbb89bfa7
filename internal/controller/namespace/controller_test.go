package namespace

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	discoveryfake "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
)

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// fixture is a controller over fake clients.
type fixture struct {
	c     *Controller
	kube  *kubefake.Clientset
	meta  *metadatafake.FakeMetadataClient
	disco *discoveryfake.FakeDiscovery
}

// newFixture serves configmaps (with deletecollection) and deployments
// (without), holding ns and the given object metadata.
func newFixture(t *testing.T, ns *v1.Namespace, objs ...runtime.Object) *fixture {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme, objs...)
	// The fake tracker has no deletecollection; emulate the server's.
	meta.PrependReactor("delete-collection", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		gvr, namespace := action.GetResource(), action.GetNamespace()
		// Calling the client from a reactor would deadlock: use the tracker.
		list, err := meta.Tracker().List(gvr, schema.GroupVersionKind{Group: "fake-metadata-client-group", Version: "v1"}, namespace)
		if err != nil {
			return true, nil, err
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return true, nil, err
		}
		for _, item := range items {
			m, err := apimeta.Accessor(item)
			if err != nil {
				return true, nil, err
			}
			if len(m.GetFinalizers()) > 0 {
				continue
			}
			if err := meta.Tracker().Delete(gvr, namespace, m.GetName()); err != nil {
				return true, nil, err
			}
		}
		return true, nil, nil
	})
	// Like the server, keep objects with finalizers, marked for deletion.
	meta.PrependReactor("delete", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		a := action.(clienttesting.DeleteActionImpl)
		obj, err := meta.Tracker().Get(a.Resource, a.Namespace, a.Name)
		if err != nil {
			return false, nil, nil
		}
		m, err := apimeta.Accessor(obj)
		if err != nil || len(m.GetFinalizers()) == 0 {
			return false, nil, nil
		}
		m.SetDeletionTimestamp(&t1)
		return true, nil, meta.Tracker().Update(a.Resource, obj, a.Namespace)
	})
	disco := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"create", "delete", "deletecollection", "get", "list", "watch"}},
			{Name: "namespaces", Namespaced: false, Kind: "Namespace", Verbs: []string{"create", "delete", "get", "list", "watch"}},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Namespaced: true, Kind: "Deployment", Verbs: []string{"create", "delete", "get", "list", "watch"}},
		}},
	}}}
	kube := kubefake.NewClientset(ns)
	c := New(Config{Client: kube, Metadata: meta, Discovery: disco})
	c.now = func() time.Time { return t1.Time }
	return &fixture{c: c, kube: kube, meta: meta, disco: disco}
}

// makeObject returns the metadata of a namespaced object of kind gvk.
func makeObject(apiVersion, kind, namespace, name string, mutate func(*metav1.PartialObjectMetadata)) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
	}
	if mutate != nil {
		mutate(obj)
	}
	return obj
}

// describe renders the fake client actions that change or remove state, as
// "verb resource ns/name [detail]".
func describe(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		switch a := a.(type) {
		case clienttesting.DeleteActionImpl:
			policy := "<none>"
			if p := a.DeleteOptions.PropagationPolicy; p != nil {
				policy = string(*p)
			}
			out = append(out, fmt.Sprintf("delete %s %s/%s %s", res, a.Namespace, a.Name, policy))
		case clienttesting.DeleteCollectionActionImpl:
			out = append(out, fmt.Sprintf("delete-collection %s %s", res, a.Namespace))
		case clienttesting.ListActionImpl:
			out = append(out, fmt.Sprintf("list %s %s", res, a.Namespace))
		case clienttesting.CreateActionImpl:
			if ns, ok := a.Object.(*v1.Namespace); ok {
				out = append(out, fmt.Sprintf("create %s %s %v", res, ns.Name, ns.Spec.Finalizers))
			}
		case clienttesting.UpdateActionImpl:
			if ns, ok := a.Object.(*v1.Namespace); ok {
				out = append(out, fmt.Sprintf("update %s %s %s", res, ns.Name, ns.Status.Phase))
			}
		}
	}
	return out
}

func TestSync(t *testing.T) {
	tests := []struct {
		name      string
		ns        *v1.Namespace
		objs      []runtime.Object
		wantWait  bool
		wantErr   string
		wantMeta  []string
		wantKube  []string
		wantConds map[v1.NamespaceConditionType]string // type -> reason
	}{
		{
			name: "content is deleted and the namespace finalized",
			ns:   makeNamespace("a", nil),
			objs: []runtime.Object{
				makeObject("v1", "ConfigMap", "a", "cm1", nil),
				makeObject("v1", "ConfigMap", "other", "cm2", nil),
				makeObject("apps/v1", "Deployment", "a", "web", nil),
			},
			wantMeta: []string{
				"delete-collection configmaps a",
				"list configmaps a",
				"list deployments a", // no deletecollection: one by one
				"delete deployments a/web Background",
				"list deployments a",
			},
			wantKube: []string{
				"update namespaces/status a Terminating",
				"create namespaces/finalize a []",
			},
			wantConds: map[v1.NamespaceConditionType]string{v1.NamespaceContentRemaining: "ContentRemoved"},
		},
		{
			name: "content held by a finalizer makes it wait without finalizing",
			ns:   makeNamespace("a", nil),
			objs: []runtime.Object{
				makeObject("apps/v1", "Deployment", "a", "web", func(o *metav1.PartialObjectMetadata) {
					o.Finalizers = []string{"example.com/hold"}
				}),
			},
			wantWait: true,
			wantMeta: []string{
				"delete-collection configmaps a",
				"list configmaps a",
				"list deployments a",
				"delete deployments a/web Background",
				"list deployments a",
			},
			wantKube: []string{"update namespaces/status a Terminating"},
			wantConds: map[v1.NamespaceConditionType]string{
				v1.NamespaceContentRemaining:    "SomeResourcesRemain",
				v1.NamespaceFinalizersRemaining: "SomeFinalizersRemain",
			},
		},
		{
			name: "a namespace that is not being deleted is left alone",
			ns:   makeNamespace("a", func(ns *v1.Namespace) { ns.DeletionTimestamp = nil; ns.Status.Phase = v1.NamespaceActive }),
			objs: []runtime.Object{makeObject("v1", "ConfigMap", "a", "cm1", nil)},
		},
		{
			name: "a non-terminating phase is fixed first",
			ns: makeNamespace("a", func(ns *v1.Namespace) {
				ns.Status.Phase = v1.NamespaceActive
				ns.Status.Conditions = okStatus(t0)
			}),
			wantMeta: []string{
				"delete-collection configmaps a",
				"list configmaps a",
				"list deployments a",
				"list deployments a",
			},
			wantKube: []string{
				"update namespaces/status a Terminating",
				"create namespaces/finalize a []",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.ns, tc.objs...)
			f.meta.ClearActions()
			wait, err := f.c.sync(context.Background(), tc.ns.Name)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr || wait != tc.wantWait {
				t.Fatalf("sync = %v, %q; want %v, %q", wait, gotErr, tc.wantWait, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantMeta, describe(f.meta.Actions())); diff != "" {
				t.Errorf("metadata actions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantKube, describe(f.kube.Actions())); diff != "" {
				t.Errorf("namespace actions (-want +got):\n%s", diff)
			}
			ns, err := f.kube.CoreV1().Namespaces().Get(context.Background(), tc.ns.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for typ, reason := range tc.wantConds {
				if c := findCondition(ns.Status.Conditions, typ); c == nil || c.Reason != reason {
					t.Errorf("condition %s = %+v, want reason %s", typ, c, reason)
				}
			}
		})
	}
}

// TestPodsWaitForGracePeriod checks that terminating pods are waited for
// (requeue) rather than reported as a failure.
func TestPodsWaitForGracePeriod(t *testing.T) {
	ns := makeNamespace("a", func(ns *v1.Namespace) { ns.DeletionTimestamp = &t1 })
	f := newFixture(t, ns, makeObject("v1", "Pod", "a", "p", func(o *metav1.PartialObjectMetadata) { o.DeletionTimestamp = &t1 }))
	f.disco.Resources[0].APIResources = append(f.disco.Resources[0].APIResources,
		metav1.APIResource{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: []string{"delete", "list"}})
	grace := int64(30)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"}, Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace}}
	if _, err := f.kube.CoreV1().Pods("a").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Deleting a pod is graceful on the server: it stays for now.
	f.meta.PrependReactor("delete", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil
	})
	wait, err := f.c.sync(context.Background(), "a")
	if err != nil || !wait {
		t.Fatalf("sync = %v, %v; want wait without error", wait, err)
	}
	for _, a := range describe(f.kube.Actions()) {
		if strings.Contains(a, "finalize") {
			t.Errorf("namespace finalized while a pod remains: %v", a)
		}
	}
}

// TestRun checks the informer-driven path end to end: a namespace being
// deleted gets finalized once its content is gone.
func TestRun(t *testing.T) {
	f := newFixture(t, makeNamespace("a", nil), makeObject("v1", "ConfigMap", "a", "cm1", nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		f.c.Run(ctx, 2)
		close(done)
	}()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ns, err := f.kube.CoreV1().Namespaces().Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ns.Spec.Finalizers) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace not finalized; actions: %v", describe(f.kube.Actions()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := f.meta.Resource(configMapsGVR).Namespace("a").Get(ctx, "cm1", metav1.GetOptions{}); err == nil {
		t.Errorf("configmap a/cm1 still exists")
	}
}

// TestPodsDeletedFirst: ordered namespace deletion (KEP-5080) deletes the pods
// first and nothing else while one remains, with the conditions Kubernetes
// writes meanwhile (all five, none True); once the pods are gone the rest goes
// and the namespace is finalized.
func TestPodsDeletedFirst(t *testing.T) {
	ns := makeNamespace("a", nil)
	f := newFixture(t, ns,
		makeObject("v1", "Pod", "a", "p", func(o *metav1.PartialObjectMetadata) { o.Finalizers = []string{"e2e.example.com/finalizer"} }),
		makeObject("v1", "ConfigMap", "a", "cm", nil))
	f.disco.Resources[0].APIResources = append(f.disco.Resources[0].APIResources,
		metav1.APIResource{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: []string{"delete", "deletecollection", "list"}})
	grace := int64(30)
	if _, err := f.kube.CoreV1().Pods("a").Create(context.Background(), &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.meta.ClearActions()
	wait, err := f.c.sync(context.Background(), "a")
	if err != nil || !wait {
		t.Fatalf("sync with a pod left = %v, %v; want wait without error", wait, err)
	}
	if diff := cmp.Diff([]string{"delete-collection pods a", "list pods a"}, describe(f.meta.Actions())); diff != "" {
		t.Errorf("metadata actions while the pod remains (-want +got):\n%s", diff)
	}
	if _, err := f.meta.Resource(configMapsGVR).Namespace("a").Get(context.Background(), "cm", metav1.GetOptions{}); err != nil {
		t.Errorf("configmap deleted while a pod remains: %v", err)
	}
	got, err := f.kube.CoreV1().Namespaces().Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[v1.NamespaceConditionType]string{
		v1.NamespaceDeletionDiscoveryFailure: "ResourcesDiscovered",
		v1.NamespaceDeletionGVParsingFailure: "ParsedGroupVersions",
		v1.NamespaceDeletionContentFailure:   "ContentDeleted",
		v1.NamespaceContentRemaining:         "ContentRemoved",
		v1.NamespaceFinalizersRemaining:      "ContentHasNoFinalizers",
	}
	for typ, reason := range want {
		if c := findCondition(got.Status.Conditions, typ); c == nil || c.Reason != reason || c.Status != v1.ConditionFalse {
			t.Errorf("condition %s = %+v, want False %s", typ, c, reason)
		}
	}

	if err := f.meta.Tracker().Delete(podsGVR, "a", "p"); err != nil {
		t.Fatal(err)
	}
	f.meta.ClearActions()
	f.kube.ClearActions()
	if wait, err := f.c.sync(context.Background(), "a"); err != nil || wait {
		t.Fatalf("sync without pods = %v, %v; want done", wait, err)
	}
	if _, err := f.meta.Resource(configMapsGVR).Namespace("a").Get(context.Background(), "cm", metav1.GetOptions{}); err == nil {
		t.Errorf("configmap still there once the pods are gone")
	}
	if diff := cmp.Diff([]string{"list pods a", "create namespaces/finalize a []"}, describe(f.kube.Actions())); diff != "" {
		t.Errorf("namespace actions once the pods are gone (-want +got):\n%s", diff)
	}
}
