package endpointslice

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/testutil"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// newFakeClient returns a fake clientset that, like the API server, names
// objects from generateName and bumps resourceVersions on writes.
func newFakeClient(objs ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objs...)
	var rv atomic.Int64
	rv.Store(100)
	stamp := func(action k8stesting.Action) (bool, runtime.Object, error) {
		var obj runtime.Object
		switch a := action.(type) {
		case k8stesting.CreateAction:
			obj = a.GetObject()
		case k8stesting.UpdateAction:
			obj = a.GetObject()
		}
		if s, ok := obj.(metav1.Object); ok {
			n := rv.Add(1)
			if s.GetName() == "" {
				s.SetName(s.GetGenerateName() + strconv.FormatInt(n, 10))
			}
			s.SetResourceVersion(strconv.FormatInt(n, 10))
		}
		return false, nil, nil
	}
	client.PrependReactor("create", "*", stamp)
	client.PrependReactor("update", "*", stamp)
	return client
}

// writes returns the create/update/delete actions on EndpointSlices.
func writes(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "endpointslices" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a.GetVerb())
		}
	}
	return out
}

// startController builds a controller on client and starts its informers,
// without workers: tests drive sync themselves.
func startController(t *testing.T, client *fake.Clientset) *Controller {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(Config{Client: client, Informers: factory})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	// The fake clientset drops events written before an informer's watch is
	// established; wait until a probe slice arrives through the watch so the
	// test's own writes cannot be lost.
	probe := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "watch-probe", Namespace: "probe-ns"}, AddressType: discovery.AddressTypeIPv4}
	if _, err := client.DiscoveryV1().EndpointSlices("probe-ns").Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lister := factory.Discovery().V1().EndpointSlices().Lister()
	testutil.Eventually(t, 5*time.Second, "the slice watch to be live", func() bool {
		_, err := lister.EndpointSlices("probe-ns").Get("watch-probe")
		return err == nil
	})
	client.ClearActions()
	return c
}

func TestControllerWritesOnlyChanges(t *testing.T) {
	ctx := context.Background()
	svc := makeService(ns, "web", func(s *v1.Service) { s.Spec.Selector = map[string]string{"app": "web"} })
	objs := []runtime.Object{svc, testNodes["node-a"]}
	for _, p := range makePods(0, 100, nil) {
		objs = append(objs, p)
	}
	client := newFakeClient(objs...)
	c := startController(t, client)
	key := ns + "/web"

	if err := c.sync(ctx, key); err != nil {
		t.Fatalf("first sync: %v", err)
	}
	if got := writes(client); fmt.Sprint(got) != "[create]" {
		t.Fatalf("first sync wrote %v, want one create", got)
	}
	testutil.Eventually(t, 5*time.Second, "the slice in the cache", func() bool {
		return !c.writes.Stale(key, func(n string) (string, bool) {
			s, err := c.slices.EndpointSlices(ns).Get(n)
			if err != nil {
				return "", false
			}
			return s.ResourceVersion, true
		})
	})

	client.ClearActions()
	if err := c.sync(ctx, key); err != nil {
		t.Fatalf("resync: %v", err)
	}
	if got := writes(client); len(got) != 0 {
		t.Fatalf("resync with nothing changed wrote %v", got)
	}

	pod := makePod(ns, "pod-042", notReady)
	pod.ResourceVersion = "2"
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the pod in the cache", func() bool {
		p, err := c.pods.Pods(ns).Get("pod-042")
		return err == nil && !podReady(p)
	})
	client.ClearActions()
	if err := c.sync(ctx, key); err != nil {
		t.Fatalf("sync after readiness flip: %v", err)
	}
	if got := writes(client); fmt.Sprint(got) != "[update]" {
		t.Fatalf("readiness flip wrote %v, want exactly one update", got)
	}
	if c.queue.Len() == 0 {
		t.Errorf("the pod update did not enqueue its service")
	}
}

func TestControllerRecreatesDeletedSlice(t *testing.T) {
	ctx := context.Background()
	svc := makeService(ns, "web", func(s *v1.Service) { s.Spec.Selector = map[string]string{"app": "web"} })
	client := newFakeClient(svc, testNodes["node-a"], makePod(ns, "pod-000", nil))
	c := startController(t, client)
	key := ns + "/web"
	if err := c.sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the slice in the cache", func() bool {
		return !c.writes.Stale(key, func(n string) (string, bool) {
			s, err := c.slices.EndpointSlices(ns).Get(n)
			if err != nil {
				return "", false
			}
			return s.ResourceVersion, true
		})
	})
	for c.queue.Len() > 0 {
		k, _ := c.queue.Get()
		c.queue.Done(k)
	}
	slices, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(slices.Items) != 1 {
		t.Fatalf("slices: %v, %v", slices, err)
	}
	if err := client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, slices.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the deletion to enqueue the service", func() bool { return c.queue.Len() == 1 })
	client.ClearActions()
	if err := c.sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	if got := writes(client); fmt.Sprint(got) != "[create]" {
		t.Fatalf("wrote %v, want the slice recreated", got)
	}
}

func TestControllerDeletesSlicesOfDeletedService(t *testing.T) {
	ctx := context.Background()
	web := makeService(ns, "web", nil)
	mine := slice(web, "web-a", nil)
	theirs := slice(web, "web-b", nil)
	theirs.Labels[discovery.LabelManagedBy] = "someone-else"
	client := newFakeClient(mine, theirs)
	c := startController(t, client)
	if err := c.sync(ctx, ns+"/web"); err != nil {
		t.Fatal(err)
	}
	slices, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(slices.Items) != 1 || slices.Items[0].Name != "web-b" {
		t.Fatalf("want only the foreign slice left, got %v (%v)", slices, err)
	}
}

// A sync that finds the cache behind the controller's own write is queued again by that
// write's event, at once, not after the rate limiter's backoff; an own write's event
// queues nothing when no sync waits for it.
func TestControllerStaleSyncWokenByOwnWrite(t *testing.T) {
	ctx := context.Background()
	svc := makeService(ns, "web", func(s *v1.Service) { s.Spec.Selector = map[string]string{"app": "web"} })
	client := newFakeClient(svc, testNodes["node-a"], makePod(ns, "pod-000", nil))
	c := startController(t, client)
	key := ns + "/web"
	own := func(name, rv string) *discovery.EndpointSlice {
		return &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv,
			Labels: map[string]string{discovery.LabelServiceName: "web", discovery.LabelManagedBy: ControllerName}}}
	}
	for c.queue.Len() > 0 { // the informers' initial events
		k, _ := c.queue.Get()
		c.queue.Done(k)
	}

	c.writes.Wrote(key, "web-idle", "41")
	c.onSlice(nil, own("web-idle", "41"))
	if n := c.queue.Len(); n != 0 {
		t.Fatalf("an own write's event with no sync waiting queued %d keys", n)
	}

	// The API acknowledged a write the informer has not delivered yet.
	c.writes.Wrote(key, "web-abcde", "42")
	if err := c.sync(ctx, key); !isStale(err) {
		t.Fatalf("sync on a cache behind our write: %v, want the stale error", err)
	}
	if n := c.queue.Len(); n != 0 {
		t.Fatalf("queue holds %d keys before the write's event", n)
	}
	c.onSlice(nil, own("web-abcde", "42"))
	if n := c.queue.Len(); n != 1 {
		t.Fatalf("the write's event queued %d keys, want the waiting Service", n)
	}
	if k, _ := c.queue.Get(); k != key {
		t.Fatalf("queued %q, want %q", k, key)
	}
}
