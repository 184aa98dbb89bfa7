package servicecidr

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func makeCIDR(name string, mutate func(*networkingv1.ServiceCIDR), cidrs ...string) *networkingv1.ServiceCIDR {
	c := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func deleting(at time.Time) func(*networkingv1.ServiceCIDR) {
	return func(c *networkingv1.ServiceCIDR) {
		c.Finalizers = []string{Finalizer}
		c.DeletionTimestamp = &metav1.Time{Time: at}
	}
}

func service(ip string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "svc-" + ip},
		Spec: v1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}}}
}

func newController(t *testing.T, objs ...runtime.Object) (*Controller, *fake.Clientset) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	c := New(Config{Client: client, Informers: f, Clock: clocktesting.NewFakeClock(now)})
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("caches did not sync")
	}
	return c, client
}

func get(t *testing.T, client *fake.Clientset, name string) *networkingv1.ServiceCIDR {
	t.Helper()
	c, err := client.NetworkingV1().ServiceCIDRs().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSync(t *testing.T) {
	tests := []struct {
		name           string
		objs           []runtime.Object
		wantFinalizers []string
		wantReady      *metav1.Condition
	}{
		{name: "new range gets the finalizer and Ready",
			objs:           []runtime.Object{makeCIDR("extra", nil, "203.0.113.0/24")},
			wantFinalizers: []string{Finalizer},
			wantReady:      &metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Message: ReadyMessage}},
		{name: "deleted range holding a ClusterIP stays, Terminating",
			objs:           []runtime.Object{makeCIDR("extra", deleting(now), "203.0.113.0/24"), service("203.0.113.10")},
			wantFinalizers: []string{Finalizer},
			wantReady:      &metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Terminating", Message: TerminatingMessage}},
		{name: "deleted range holding an IPAddress stays",
			objs: []runtime.Object{makeCIDR("extra", deleting(now), "203.0.113.0/24"),
				&networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "203.0.113.7"}}},
			wantFinalizers: []string{Finalizer},
			wantReady:      &metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Terminating", Message: TerminatingMessage}},
		{name: "deleted range whose addresses another covers goes after the grace period",
			objs: []runtime.Object{makeCIDR("extra", deleting(now.Add(-DeletionGracePeriod)), "203.0.113.0/24"),
				makeCIDR("wide", nil, "203.0.0.0/16"), service("203.0.113.10")}},
		{name: "deleted unused range waits for the grace period",
			objs:           []runtime.Object{makeCIDR("extra", deleting(now.Add(-time.Second)), "203.0.113.0/24"), service("10.96.0.1")},
			wantFinalizers: []string{Finalizer}},
		{name: "deleted unused range goes",
			objs: []runtime.Object{makeCIDR("extra", deleting(now.Add(-DeletionGracePeriod)), "203.0.113.0/24"), service("10.96.0.1")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, client := newController(t, tc.objs...)
			if err := c.sync(context.Background(), "extra"); err != nil {
				t.Fatal(err)
			}
			got := get(t, client, "extra")
			if diff := cmp.Diff(tc.wantFinalizers, got.Finalizers, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
			ready := apimeta.FindStatusCondition(got.Status.Conditions, "Ready")
			if ready != nil {
				ready.LastTransitionTime = metav1.Time{}
			}
			if diff := cmp.Diff(tc.wantReady, ready); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadyWrittenOnce(t *testing.T) {
	c, client := newController(t, makeCIDR("extra", nil, "203.0.113.0/24"))
	if err := c.sync(context.Background(), "extra"); err != nil {
		t.Fatal(err)
	}
	// The second sync must see the first one's writes in the cache.
	deadline := time.Now().Add(10 * time.Second)
	for {
		cached, _ := c.cidrs.Get("extra")
		if len(cached.Status.Conditions) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cache never saw the status")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.sync(context.Background(), "extra"); err != nil {
		t.Fatal(err)
	}
	writes := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" {
			writes++
		}
	}
	if writes != 2 {
		t.Errorf("%d updates, want 2 (finalizer, then status)", writes)
	}
}

func TestEnsureDefault(t *testing.T) {
	client := fake.NewClientset()
	ctx := context.Background()
	if err := ensureDefault(ctx, client, netip.MustParsePrefix("10.96.0.0/12"), now); err != nil {
		t.Fatal(err)
	}
	got := get(t, client, DefaultName)
	if diff := cmp.Diff([]string{"10.96.0.0/12"}, got.Spec.CIDRs); diff != "" {
		t.Errorf("cidrs (-want +got):\n%s", diff)
	}
	ready := apimeta.FindStatusCondition(got.Status.Conditions, "Ready")
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.Message != DefaultReadyMessage {
		t.Errorf("Ready = %+v", ready)
	}
	if err := ensureDefault(ctx, client, netip.MustParsePrefix("10.96.0.0/12"), now); err != nil {
		t.Errorf("second run: %v", err)
	}
	if err := ensureDefault(ctx, client, netip.MustParsePrefix("172.20.0.0/16"), now); err == nil {
		t.Error("another range accepted silently")
	}
}
