package resourcequota

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/tranche/tranche/internal/testutil"
)

// preferredDiscovery answers ServerPreferredNamespacedResources from the fake's
// resources, which client-go's fake discovery leaves empty.
type preferredDiscovery struct{ *fakediscovery.FakeDiscovery }

func (d preferredDiscovery) ServerPreferredNamespacedResources() ([]*metav1.APIResourceList, error) {
	return d.Resources, nil
}

var _ discovery.DiscoveryInterface = preferredDiscovery{}

// run starts the controller cfg describes, and cfg.Informers, until the test ends;
// it returns the context they run in.
func run(t *testing.T, cfg Config) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cfg.Informers.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ctx
}

// TestControllerComputesAndResyncs: the controller sets status.hard from spec.hard and
// status.used from the pods that exist, and its full resync puts back a status someone
// else overwrote (the controller ignores status-only updates between resyncs).
func TestControllerComputesAndResyncs(t *testing.T) {
	q := &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"},
		Spec: v1.ResourceQuotaSpec{Hard: v1.ResourceList{v1.ResourcePods: resource.MustParse("5"), v1.ResourceRequestsCPU: resource.MustParse("2")}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c",
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")}}}}}}
	client := fake.NewClientset(q, pod)
	client.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"create", "delete", "get", "list", "watch"}},
		{Name: "resourcequotas", Namespaced: true, Kind: "ResourceQuota", Verbs: metav1.Verbs{"create", "delete", "get", "list", "watch"}},
	}}}
	ctx := run(t, Config{Client: client, Informers: informers.NewSharedInformerFactory(client, 0), Metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()),
		Discovery: preferredDiscovery{client.Discovery().(*fakediscovery.FakeDiscovery)}, SyncPeriod: time.Second})

	computed := func(want string) func() (bool, string) {
		return func() (bool, string) {
			got, err := client.CoreV1().ResourceQuotas("ns").Get(ctx, "q", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			s := got.Status.Hard.Pods().String() + " " + got.Status.Used.Pods().String() + " " + got.Status.Used.Name(v1.ResourceRequestsCPU, resource.DecimalSI).String()
			return s == want, s
		}
	}
	testutil.EventuallyEvery(t, 10*time.Second, 20*time.Millisecond, "status computed", computed("5 1 250m"))

	cur, err := client.CoreV1().ResourceQuotas("ns").Get(ctx, "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.Hard = v1.ResourceList{v1.ResourcePods: resource.MustParse("9")}
	cur.Status.Used = v1.ResourceList{v1.ResourcePods: resource.MustParse("7")}
	if _, err := client.CoreV1().ResourceQuotas("ns").UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyEvery(t, 10*time.Second, 20*time.Millisecond, "status reset by the resync", computed("5 1 250m"))
}

// TestQuotaCountsItself: a quota's resourcequotas usage is counted from the informer that
// delivered the quota to the controller. The manager's shared informers are here those
// of another client that never sees the quota (a shared cache behind the controller's
// own, as under load): counting from them gave 0, and as adds do not replenish usage
// (admission charges creates), that 0 stayed until the five-minute resync.
func TestQuotaCountsItself(t *testing.T) {
	q := &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"},
		Spec: v1.ResourceQuotaSpec{Hard: v1.ResourceList{v1.ResourceQuotas: resource.MustParse("1")}}}
	client := fake.NewClientset(q)
	client.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "resourcequotas", Namespaced: true, Kind: "ResourceQuota", Verbs: metav1.Verbs{"create", "delete", "get", "list", "watch"}},
	}}}
	behind := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	ctx := run(t, Config{Client: client, Informers: behind, Metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()),
		Discovery: preferredDiscovery{client.Discovery().(*fakediscovery.FakeDiscovery)}})
	testutil.EventuallyEvery(t, 10*time.Second, 20*time.Millisecond, "the quota counting itself", func() (bool, string) {
		got, err := client.CoreV1().ResourceQuotas("ns").Get(ctx, "q", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		used, ok := got.Status.Used[v1.ResourceQuotas]
		return ok && used.String() == "1", fmt.Sprintf("used %v", got.Status.Used)
	})
}

// switchingDiscovery serves the namespaced resources it is set to.
type switchingDiscovery struct {
	*fakediscovery.FakeDiscovery
	mu        sync.Mutex
	resources []*metav1.APIResourceList
}

func (d *switchingDiscovery) set(r ...*metav1.APIResourceList) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resources = r
}

func (d *switchingDiscovery) ServerPreferredNamespacedResources() ([]*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.resources, nil
}

// watchCounting is a metadata client that counts the watches open on each resource.
type watchCounting struct {
	*metadatafake.FakeMetadataClient
	mu   sync.Mutex
	open map[schema.GroupVersionResource]int
}

func (c *watchCounting) Resource(r schema.GroupVersionResource) metadata.Getter {
	return countingGetter{Getter: c.FakeMetadataClient.Resource(r), c: c, r: r}
}

func (c *watchCounting) opened(r schema.GroupVersionResource) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open[r]
}

type countingGetter struct {
	metadata.Getter
	c *watchCounting
	r schema.GroupVersionResource
}

func (g countingGetter) Namespace(ns string) metadata.ResourceInterface {
	return countingResource{ResourceInterface: g.Getter.Namespace(ns), c: g.c, r: g.r}
}

type countingResource struct {
	metadata.ResourceInterface
	c *watchCounting
	r schema.GroupVersionResource
}

func (r countingResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := r.ResourceInterface.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	r.c.mu.Lock()
	r.c.open[r.r]++
	r.c.mu.Unlock()
	return &countedWatch{Interface: w, done: func() {
		r.c.mu.Lock()
		r.c.open[r.r]--
		r.c.mu.Unlock()
	}}, nil
}

type countedWatch struct {
	watch.Interface
	once sync.Once
	done func()
}

func (w *countedWatch) Stop() {
	w.once.Do(w.done)
	w.Interface.Stop()
}

// TestMonitorStopsWithItsResource: a custom resource is counted (count/widgets.example.com)
// while discovery lists it; once it is gone from discovery (its CRD deleted) the monitor's
// informer stops watching it, where kube-controller-manager's shared one goes on failing
// to list it for as long as it runs; and when it is served again it is counted again.
func TestMonitorStopsWithItsResource(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	countWidgets := v1.ResourceName("count/widgets.example.com")
	q := &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"},
		Spec: v1.ResourceQuotaSpec{Hard: v1.ResourceList{countWidgets: resource.MustParse("5")}}}
	client := fake.NewClientset(q)
	core := &metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "resourcequotas", Namespaced: true, Kind: "ResourceQuota", Verbs: metav1.Verbs{"create", "delete", "get", "list", "watch"}}}}
	custom := &metav1.APIResourceList{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: metav1.Verbs{"create", "delete", "get", "list", "watch"}}}}
	disc := &switchingDiscovery{FakeDiscovery: client.Discovery().(*fakediscovery.FakeDiscovery)}
	disc.set(core, custom)
	meta := &watchCounting{FakeMetadataClient: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), open: map[schema.GroupVersionResource]int{}}
	for _, name := range []string{"a", "b"} {
		w := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Widget"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
		if err := meta.Tracker().Create(widgets, w, "ns"); err != nil {
			t.Fatal(err)
		}
	}
	ctx := run(t, Config{Client: client, Informers: informers.NewSharedInformerFactory(client, 0), Metadata: meta, Discovery: disc,
		SyncPeriod: time.Second, DiscoveryPeriod: 50 * time.Millisecond})

	counted := func(what string) {
		t.Helper()
		testutil.EventuallyEvery(t, 10*time.Second, 20*time.Millisecond, what, func() (bool, string) {
			got, err := client.CoreV1().ResourceQuotas("ns").Get(ctx, "q", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			used := got.Status.Used[countWidgets]
			return used.String() == "2" && meta.opened(widgets) == 1, fmt.Sprintf("used %v, %d watches", got.Status.Used, meta.opened(widgets))
		})
	}
	counted("the widgets counted, one watch on them")
	disc.set(core)
	testutil.EventuallyEvery(t, 10*time.Second, 20*time.Millisecond, "no watch on widgets once they are not served", func() (bool, string) {
		n := meta.opened(widgets)
		return n == 0, fmt.Sprintf("%d watches", n)
	})
	disc.set(core, custom)
	counted("the widgets counted again once served again")
}
