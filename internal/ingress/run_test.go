package ingress

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// TestSyncEventsOnceAndStatus: a problem is reported by one Event however many syncs
// see it, again when it comes back after going away, and the status is written once.
func TestSyncEventsOnceAndStatus(t *testing.T) {
	ing := makeIngress("default", "i", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.DefaultBackend = ptr.To(svcBackend("missing", 80))
	})
	lb := makeService("kube-system", "tranche-ingress", func(s *v1.Service) {
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "127.0.10.3"}}
	})
	f := NewFake(defaultClass(), ing, lb)
	client := fake.NewClientset(ing.DeepCopy())
	rec := record.NewFakeRecorder(10)
	s := &syncer{client: client, cache: f, proxy: NewProxy(ProxyConfig{}), log: slog.New(slog.DiscardHandler),
		publish: "kube-system/tranche-ingress", recorder: rec, posted: map[Problem]bool{}}
	ctx := context.Background()

	s.sync(ctx)
	s.sync(ctx)
	if got := len(rec.Events); got != 1 {
		t.Fatalf("%d events after two syncs of one problem, want 1", got)
	}
	if e := <-rec.Events; e != "Warning BackendMissing Service default/missing not found" {
		t.Errorf("event %q", e)
	}
	updates := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			updates++
		}
	}
	// The cache (not the fake client) decides: it still shows no status, so both syncs
	// write it; an informer would have delivered the update in between.
	if updates != 2 {
		t.Errorf("%d status updates, want 2 (one per sync while the cache shows none)", updates)
	}
	got, err := client.NetworkingV1().Ingresses("default").Get(ctx, "i", metav1.GetOptions{})
	if err != nil || len(got.Status.LoadBalancer.Ingress) != 1 || got.Status.LoadBalancer.Ingress[0].IP != "127.0.10.3" {
		t.Errorf("status after sync: %+v, %v", got.Status, err)
	}

	f.Add(makeService("default", "missing", nil))
	s.sync(ctx)
	if len(rec.Events) != 0 {
		t.Errorf("an event after the problem went away: %q", <-rec.Events)
	}
	fixed := makeIngress("default", "i", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.DefaultBackend = ptr.To(svcBackend("gone", 80))
	})
	f.Add(fixed)
	s.sync(ctx)
	if len(rec.Events) != 1 {
		t.Errorf("%d events for a new problem, want 1", len(rec.Events))
	}
}

// TestFailedStatusWriteIsRetried: a status write the API server refused is written
// again without any further change to wake the syncer.
func TestFailedStatusWriteIsRetried(t *testing.T) {
	ing := makeIngress("default", "i", 0, nil)
	lb := makeService("kube-system", "tranche-ingress", func(s *v1.Service) {
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "127.0.10.3"}}
	})
	f := NewFake(defaultClass(), ing, lb)
	client := fake.NewClientset(ing.DeepCopy())
	var refusals atomic.Int32
	client.PrependReactor("update", "ingresses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && refusals.Add(1) <= 2 {
			return true, nil, apierrors.NewServiceUnavailable("etcd is busy")
		}
		return false, nil, nil
	})
	s := &syncer{client: client, cache: f, proxy: NewProxy(ProxyConfig{}), log: slog.New(slog.DiscardHandler),
		publish: "kube-system/tranche-ingress", recorder: record.NewFakeRecorder(10), posted: map[Problem]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if s.sync(ctx) {
		t.Fatal("the first sync reports success though its status write was refused")
	}
	done := make(chan struct{})
	go func() { s.run(ctx, make(chan struct{}), false, time.Millisecond, time.Millisecond); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := client.NetworkingV1().Ingresses("default").Get(ctx, "i", metav1.GetOptions{})
		if err == nil && len(got.Status.LoadBalancer.Ingress) == 1 && got.Status.LoadBalancer.Ingress[0].IP == "127.0.10.3" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never written after %d refusals: %+v, %v", refusals.Load(), got.Status, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
}
