package node

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestRegisterAndLease(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	client := fake.NewSimpleClientset()
	a := New(Config{Name: "n1", InternalIP: "10.240.0.10", Zone: "a", CPU: 2, Memory: 4 << 30, Clock: clk}, client)
	n, err := a.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["topology.kubernetes.io/zone"] != "a" || n.Labels["kubernetes.io/hostname"] != "n1" {
		t.Fatalf("labels %v", n.Labels)
	}
	if got := n.Status.Allocatable.Pods().Value(); got != MaxPods {
		t.Fatalf("pods allocatable %d", got)
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue && c.Reason == "KubeletReady" {
			ready = true
		}
	}
	if !ready || n.Status.Addresses[0].Address != "10.240.0.10" {
		t.Fatalf("status %+v", n.Status)
	}
	// Registering again (agent restart) keeps the node.
	if _, err := a.Register(ctx); err != nil {
		t.Fatal(err)
	}
	go a.Run(ctx)
	var renew time.Time
	for i := 0; i < 100; i++ {
		l, err := client.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "n1", metav1.GetOptions{})
		if err == nil {
			renew = l.Spec.RenewTime.Time
			if l.OwnerReferences[0].Kind != "Node" || *l.Spec.LeaseDurationSeconds != 40 {
				t.Fatalf("lease %+v", l)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if renew.IsZero() {
		t.Fatal("no lease created")
	}
	for i := 0; i < 200; i++ {
		if clk.HasWaiters() {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	clk.Step(RenewInterval)
	for i := 0; i < 200; i++ {
		l, _ := client.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "n1", metav1.GetOptions{})
		if l.Spec.RenewTime.Time.After(renew) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("lease not renewed after RenewInterval")
}

// TestLastContact: the agent's contact with the API server is its creation, then each
// registration and lease renewal that succeeded (at the time it was sent); a renewal
// that fails leaves it where it was.
func TestLastContact(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	client := fake.NewClientset()
	a := New(Config{Name: "n1", InternalIP: "10.240.0.10", Clock: clk}, client)
	if got := a.LastContact(); !got.Equal(t0) {
		t.Errorf("before any request: %v, want the agent's creation %v", got, t0)
	}
	clk.Step(time.Second)
	if _, err := a.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if got := a.LastContact(); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("after registering: %v", got)
	}
	clk.Step(RenewInterval)
	if err := a.renewLease(ctx); err != nil {
		t.Fatal(err)
	}
	renewed := t0.Add(time.Second + RenewInterval)
	if got := a.LastContact(); !got.Equal(renewed) {
		t.Errorf("after a renewal: %v, want %v", got, renewed)
	}
	client.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection timed out")
	})
	clk.Step(RenewInterval)
	if err := a.renewLease(ctx); err == nil {
		t.Fatal("the renewal did not fail")
	}
	if got := a.LastContact(); !got.Equal(renewed) {
		t.Errorf("after a failed renewal: %v, want the last one that succeeded, %v", got, renewed)
	}
}
