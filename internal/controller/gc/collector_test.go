package gc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	discoveryfake "k8s.io/client-go/discovery/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
)

// served is the discovery document of the fixtures.
func served() []*metav1.APIResourceList {
	verbs := []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	return []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: verbs},
			{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: verbs},
			{Name: "namespaces", Kind: "Namespace", Verbs: verbs},
			{Name: "nodes", Kind: "Node", Verbs: verbs},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Namespaced: true, Kind: "Deployment", Verbs: verbs},
			{Name: "replicasets", Namespaced: true, Kind: "ReplicaSet", Verbs: verbs},
		}},
	}
}

// newFixture returns a collector over fake clients holding objs. Like the
// API server, the fake keeps an object with finalizers on delete and only
// marks it deleted.
func newFixture(t *testing.T, objs ...*metav1.PartialObjectMetadata) (*Collector, *metadatafake.FakeMetadataClient) {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var ros []runtime.Object
	for _, o := range objs {
		ros = append(ros, o.DeepCopy())
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme, ros...)
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
		m.SetDeletionTimestamp(&now)
		return true, nil, meta.Tracker().Update(a.Resource, obj, a.Namespace)
	})
	disco := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{Resources: served()}}
	return New(Config{Metadata: meta, Discovery: disco, ResyncDiscovery: time.Hour}), meta
}

// describe renders the writes among actions as "verb resource ns/name detail".
func describeActions(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		switch a := a.(type) {
		case clienttesting.DeleteActionImpl:
			policy := "<none>"
			if p := a.DeleteOptions.PropagationPolicy; p != nil {
				policy = string(*p)
			}
			out = append(out, fmt.Sprintf("delete %s %s/%s %s", a.Resource.Resource, a.Namespace, a.Name, policy))
		case clienttesting.PatchActionImpl:
			out = append(out, fmt.Sprintf("patch %s %s/%s %s", a.Resource.Resource, a.Namespace, a.Name, a.Patch))
		}
	}
	return out
}

func TestAttemptToDelete(t *testing.T) {
	deploy := makeObj("Deployment", "ns", "web", "d1", nil)
	api := makeObj("Deployment", "ns", "api", "d2", nil)
	node := makeObj("Node", "", "n1", "n1", nil)
	rs := makeObj("ReplicaSet", "ns", "web-1", "r1", ownedBy(deploy, true))
	fg := func(o *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
		o = o.DeepCopy()
		deleting(metav1.FinalizerDeleteDependents)(o)
		return o
	}

	tests := []struct {
		name string
		objs []*metav1.PartialObjectMetadata
		uid  types.UID
		want []string
	}{
		{
			name: "dependent of an absent owner is deleted in the background",
			objs: []*metav1.PartialObjectMetadata{rs},
			uid:  "r1",
			want: []string{"delete replicasets ns/web-1 Background"},
		},
		{
			name: "an owner recreated with a new uid does not count",
			objs: []*metav1.PartialObjectMetadata{makeObj("Deployment", "ns", "web", "d9", nil), rs},
			uid:  "r1",
			want: []string{"delete replicasets ns/web-1 Background"},
		},
		{
			name: "dependent of a present owner is kept",
			objs: []*metav1.PartialObjectMetadata{deploy, rs},
			uid:  "r1",
		},
		{
			name: "a solid owner keeps it; the absent one is dropped",
			objs: []*metav1.PartialObjectMetadata{api, makeObj("ReplicaSet", "ns", "web-1", "r1", func(o *metav1.PartialObjectMetadata) {
				ownedBy(deploy, false)(o)
				ownedBy(api, false)(o)
			})},
			uid: "r1",
			want: []string{`patch replicasets ns/web-1 {"metadata":{"resourceVersion":"1",` +
				`"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"api","uid":"d2"}]}}`},
		},
		{
			name: "an owner uid living in another namespace counts as absent",
			objs: []*metav1.PartialObjectMetadata{makeObj("Deployment", "other", "web", "d1", nil), rs},
			uid:  "r1",
			want: []string{"delete replicasets ns/web-1 Background"},
		},
		{
			name: "a cluster-scoped owner of a namespaced dependent is found",
			objs: []*metav1.PartialObjectMetadata{node, makeObj("ConfigMap", "ns", "c", "c1", ownedBy(node, false))},
			uid:  "c1",
		},
		{
			name: "a cluster-scoped dependent of a namespaced owner is left alone",
			objs: []*metav1.PartialObjectMetadata{makeObj("Namespace", "", "x", "x1", ownedBy(deploy, false))},
			uid:  "x1",
		},
		{
			name: "blocking dependent of a foreground-deleting owner, without dependents: background",
			objs: []*metav1.PartialObjectMetadata{fg(deploy), rs},
			uid:  "r1",
			want: []string{"delete replicasets ns/web-1 Background"},
		},
		{
			name: "blocking dependent of a foreground-deleting owner, with dependents: foreground",
			objs: []*metav1.PartialObjectMetadata{fg(deploy), rs, makeObj("Pod", "ns", "p", "p1", ownedBy(rs, true))},
			uid:  "r1",
			want: []string{"delete replicasets ns/web-1 Foreground"},
		},
		{
			name: "foreground-deleting owner waits for a blocking dependent",
			objs: []*metav1.PartialObjectMetadata{fg(deploy), rs},
			uid:  "d1",
		},
		{
			name: "foreground-deleting owner with only non-blocking dependents is released",
			objs: []*metav1.PartialObjectMetadata{fg(deploy), makeObj("ReplicaSet", "ns", "web-1", "r1", ownedBy(deploy, false))},
			uid:  "d1",
			want: []string{`patch deployments ns/web {"metadata":{"resourceVersion":"1","finalizers":[]}}`},
		},
		{
			name: "an object being deleted in the background is left to finish",
			objs: []*metav1.PartialObjectMetadata{makeObj("ReplicaSet", "ns", "web-1", "r1", func(o *metav1.PartialObjectMetadata) {
				ownedBy(deploy, false)(o)
				deleting("example.com/hold")(o)
			})},
			uid: "r1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, meta := newFixture(t, tc.objs...)
			c.mapper = newMapper(served(), served())
			for _, o := range tc.objs {
				c.graph.observe(idOf(o), o)
			}
			if err := c.processAttemptToDelete(context.Background(), tc.uid); err != nil {
				t.Fatalf("processAttemptToDelete: %v", err)
			}
			if diff := cmp.Diff(tc.want, describeActions(meta.Actions())); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAttemptToOrphan(t *testing.T) {
	deploy := makeObj("Deployment", "ns", "web", "d1", deleting(metav1.FinalizerOrphanDependents))
	other := makeObj("Deployment", "ns", "api", "d2", nil)
	objs := []*metav1.PartialObjectMetadata{
		deploy,
		makeObj("ReplicaSet", "ns", "a", "r1", ownedBy(deploy, true)),
		makeObj("ReplicaSet", "ns", "b", "r2", func(o *metav1.PartialObjectMetadata) {
			ownedBy(other, false)(o)
			ownedBy(deploy, true)(o)
		}),
	}
	c, meta := newFixture(t, objs...)
	c.mapper = newMapper(served(), served())
	for _, o := range objs {
		c.graph.observe(idOf(o), o)
	}
	if err := c.processAttemptToOrphan(context.Background(), "d1"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`patch replicasets ns/a {"metadata":{"resourceVersion":"1","ownerReferences":[]}}`,
		`patch replicasets ns/b {"metadata":{"resourceVersion":"1",` +
			`"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"api","uid":"d2"}]}}`,
		`patch deployments ns/web {"metadata":{"resourceVersion":"1","finalizers":[]}}`,
	}
	if diff := cmp.Diff(want, describeActions(meta.Actions())); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

// start runs c until the test ends.
func start(t *testing.T, c *Collector) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.Run(ctx, 2)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitFor polls the fake's writes until cond holds, for at most 5s.
func waitFor(t *testing.T, meta *metadatafake.FakeMetadataClient, what string, cond func([]string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := describeActions(meta.Actions())
		if cond(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; writes: %q", what, got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settle waits until both queues stay empty for a few polls.
func settle(c *Collector) {
	quiet := 0
	for deadline := time.Now().Add(2 * time.Second); quiet < 10 && time.Now().Before(deadline); {
		if c.attemptToDelete.Len() == 0 && c.attemptToOrphan.Len() == 0 {
			quiet++
		} else {
			quiet = 0
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func count(writes []string, prefix string) int {
	n := 0
	for _, w := range writes {
		if strings.HasPrefix(w, prefix) {
			n++
		}
	}
	return n
}

// TestRunCascade: a ReplicaSet whose Deployment is gone is deleted once,
// in the background, and then its pod, whose owner it was.
func TestRunCascade(t *testing.T) {
	deploy := makeObj("Deployment", "ns", "web", "d1", nil)
	rs := makeObj("ReplicaSet", "ns", "web-1", "r1", ownedBy(deploy, true))
	pod := makeObj("Pod", "ns", "web-1-a", "p1", ownedBy(rs, true))
	kept := makeObj("ConfigMap", "ns", "kept", "c1", nil)
	c, meta := newFixture(t, rs, pod, kept)
	start(t, c)
	waitFor(t, meta, "the pod's deletion", func(w []string) bool {
		return slices.Contains(w, "delete pods ns/web-1-a Background")
	})
	settle(c)
	got := describeActions(meta.Actions())
	want := []string{"delete replicasets ns/web-1 Background", "delete pods ns/web-1-a Background"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

// TestRunForeground: an owner deleted in the foreground keeps its
// finalizer while a blocking dependent exists, and loses it once the
// dependent is gone.
func TestRunForeground(t *testing.T) {
	deploy := makeObj("Deployment", "ns", "web", "d1", deleting(metav1.FinalizerDeleteDependents))
	rs := makeObj("ReplicaSet", "ns", "web-1", "r1", func(o *metav1.PartialObjectMetadata) {
		ownedBy(deploy, true)(o)
		o.Finalizers = []string{"example.com/hold"}
	})
	c, meta := newFixture(t, deploy, rs)
	start(t, c)
	waitFor(t, meta, "the replicaset's deletion", func(w []string) bool {
		return count(w, "delete replicasets ns/web-1") > 0
	})
	settle(c)
	if got := describeActions(meta.Actions()); count(got, "patch deployments") != 0 {
		t.Fatalf("owner released while a blocking dependent remains: %q", got)
	}
	// The dependent's own finalizer completes: it goes away.
	rsGVR := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	if err := meta.Tracker().Delete(rsGVR, "ns", "web-1"); err != nil {
		t.Fatal(err)
	}
	got := waitFor(t, meta, "the owner's release", func(w []string) bool {
		return count(w, "patch deployments ns/web") > 0
	})
	want := `patch deployments ns/web {"metadata":{"resourceVersion":"1","finalizers":[]}}`
	if !slices.Contains(got, want) {
		t.Errorf("writes %q lack %s", got, want)
	}
	if n := count(got, "delete replicasets"); n != 1 {
		t.Errorf("%d deletes of the replicaset, want 1: %q", n, got)
	}
}

// TestRunOrphan: an owner deleted with orphaning loses its references on
// its dependents first, then its finalizer; nothing is deleted.
func TestRunOrphan(t *testing.T) {
	deploy := makeObj("Deployment", "ns", "web", "d1", deleting(metav1.FinalizerOrphanDependents))
	rs := makeObj("ReplicaSet", "ns", "web-1", "r1", ownedBy(deploy, true))
	c, meta := newFixture(t, deploy, rs)
	start(t, c)
	waitFor(t, meta, "the owner's release", func(w []string) bool {
		return count(w, "patch deployments ns/web") > 0
	})
	settle(c)
	got := describeActions(meta.Actions())
	want := []string{
		`patch replicasets ns/web-1 {"metadata":{"resourceVersion":"1","ownerReferences":[]}}`,
		`patch deployments ns/web {"metadata":{"resourceVersion":"1","finalizers":[]}}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

// TestSyncResources: re-discovery starts monitors for new resources and
// stops those of resources that went away.
func TestSyncResources(t *testing.T) {
	c, _ := newFixture(t)
	defer c.stopMonitors()
	disco := c.discovery.(*discoveryfake.FakeDiscovery)
	monitored := func() []string {
		var out []string
		for gvr := range c.monitors {
			out = append(out, gvr.Resource+"."+gvr.Group)
		}
		return slices.Sorted(slices.Values(out))
	}
	ctx := context.Background()
	if err := c.syncResources(ctx); err != nil {
		t.Fatal(err)
	}
	base := []string{"configmaps.", "deployments.apps", "namespaces.", "nodes.", "pods.", "replicasets.apps"}
	if diff := cmp.Diff(base, monitored()); diff != "" {
		t.Errorf("monitors (-want +got):\n%s", diff)
	}
	disco.Resources = append(disco.Resources, &metav1.APIResourceList{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: []string{"delete", "get", "list", "watch"}},
	}})
	if err := c.syncResources(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append(slices.Clone(base), "widgets.example.com"), monitored()); diff != "" {
		t.Errorf("monitors after a new resource (-want +got):\n%s", diff)
	}
	if _, ok := c.mapper.lookup("example.com/v1", "Widget"); !ok {
		t.Errorf("new kind Widget not mapped")
	}
	disco.Resources = served()
	if err := c.syncResources(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(base, monitored()); diff != "" {
		t.Errorf("monitors after removal (-want +got):\n%s", diff)
	}
}

// failingGroup is a discovery whose failing group version cannot be read, as an
// aggregated API whose server is down.
type failingGroup struct {
	*discoveryfake.FakeDiscovery
	failing string
}

func (d failingGroup) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	return d.ServerResourcesForGroupVersionWithContext(context.Background(), gv)
}

func (d failingGroup) ServerResourcesForGroupVersionWithContext(ctx context.Context, gv string) (*metav1.APIResourceList, error) {
	if gv == d.failing {
		return nil, fmt.Errorf("the server is currently unable to handle the request")
	}
	return d.FakeDiscovery.ServerResourcesForGroupVersionWithContext(ctx, gv)
}

// TestSyncResourcesPartialDiscovery: while one group's discovery fails, a resource of
// another group that went away (its CRD deleted) loses its monitor, and the failing
// group's resources keep theirs (unknown, not gone), as kube-controller-manager's
// collector does. Before, any failure kept every monitor, and the gone resource's
// informer went on failing to list it.
func TestSyncResourcesPartialDiscovery(t *testing.T) {
	c, _ := newFixture(t)
	defer c.stopMonitors()
	fake := c.discovery.(*discoveryfake.FakeDiscovery)
	verbs := []string{"delete", "get", "list", "watch"}
	widgets := &metav1.APIResourceList{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: verbs}}}
	gauges := &metav1.APIResourceList{GroupVersion: "metrics.example.com/v1", APIResources: []metav1.APIResource{
		{Name: "gauges", Namespaced: true, Kind: "Gauge", Verbs: verbs}}}
	fake.Resources = append(served(), widgets, gauges)
	ctx := context.Background()
	if err := c.syncResources(ctx); err != nil {
		t.Fatal(err)
	}
	has := func(resource string) bool {
		for gvr := range c.monitors {
			if gvr.Resource == resource {
				return true
			}
		}
		return false
	}
	if !has("widgets") || !has("gauges") {
		t.Fatalf("monitors %v: want widgets and gauges", c.monitors)
	}
	fake.Resources = append(served(), gauges)
	c.discovery = failingGroup{FakeDiscovery: fake, failing: "metrics.example.com/v1"}
	if err := c.syncResources(ctx); err == nil {
		t.Fatal("no error from a discovery with a failing group")
	}
	if has("widgets") {
		t.Error("widgets still monitored after they went away")
	}
	if !has("gauges") {
		t.Error("gauges no longer monitored while their group's discovery fails")
	}
	if !has("pods") {
		t.Error("pods no longer monitored")
	}
}
