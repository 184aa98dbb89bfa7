package resourcequota

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
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

// TestControllerComputesAndResyncs: the controller sets status.hard from spec.hard and
// status.used from the pods that exist, and its full resync puts back a status someone
// else overwrote (the controller ignores status-only updates between resyncs).
func TestControllerComputesAndResyncs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"},
		Spec: v1.ResourceQuotaSpec{Hard: v1.ResourceList{v1.ResourcePods: resource.MustParse("5"), v1.ResourceRequestsCPU: resource.MustParse("2")}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c",
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")}}}}}}
	client := fake.NewClientset(q, pod)
	client.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"create", "delete", "get", "list", "watch"}},
		{Name: "resourcequotas", Namespaced: true, Kind: "ResourceQuota", Verbs: metav1.Verbs{"create", "delete", "get", "list", "watch"}},
	}}}
	f := informers.NewSharedInformerFactory(client, 0)
	c, err := New(ctx, Config{Client: client, Informers: f, Metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()),
		Discovery: preferredDiscovery{client.Discovery().(*fakediscovery.FakeDiscovery)}, SyncPeriod: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"},
		Spec: v1.ResourceQuotaSpec{Hard: v1.ResourceList{v1.ResourceQuotas: resource.MustParse("1")}}}
	client := fake.NewClientset(q)
	client.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "resourcequotas", Namespaced: true, Kind: "ResourceQuota", Verbs: metav1.Verbs{"create", "delete", "get", "list", "watch"}},
	}}}
	behind := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	c, err := New(ctx, Config{Client: client, Informers: behind, Metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()),
		Discovery: preferredDiscovery{client.Discovery().(*fakediscovery.FakeDiscovery)}})
	if err != nil {
		t.Fatal(err)
	}
	behind.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	testutil.EventuallyEvery(t, 10*time.Second, 20*time.Millisecond, "the quota counting itself", func() (bool, string) {
		got, err := client.CoreV1().ResourceQuotas("ns").Get(ctx, "q", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		used, ok := got.Status.Used[v1.ResourceQuotas]
		return ok && used.String() == "1", fmt.Sprintf("used %v", got.Status.Used)
	})
}
