package server

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/storage/memory"
)

// endpointIPs reads what the kubernetes Endpoints and EndpointSlice list, and fails
// when the two disagree.
func endpointIPs(t *testing.T, client kubernetes.Interface) []string {
	t.Helper()
	ctx := context.Background()
	ep, err := client.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice, err := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var fromEp, fromSlice []string
	for _, s := range ep.Subsets {
		for _, a := range s.Addresses {
			fromEp = append(fromEp, a.IP)
		}
	}
	for _, e := range slice.Endpoints {
		fromSlice = append(fromSlice, e.Addresses...)
	}
	if diff := cmp.Diff(fromEp, fromSlice); diff != "" {
		t.Fatalf("Endpoints and EndpointSlice disagree (-endpoints +slice):\n%s", diff)
	}
	return fromEp
}

// TestAPIEndpointsFollowLeases: two servers over one store both appear in the
// endpoints; when one stops renewing, it leaves them once its TTL passed (not before);
// one that shuts down leaves them at once.
func TestAPIEndpointsFollowLeases(t *testing.T) {
	ctx := context.Background()
	store := memory.New(time.Hour)
	client := fake.NewClientset()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	server := func(ip string) *apiEndpoints {
		return &apiEndpoints{store: store, client: client, ip: ip, port: 6443, ttl: apiLeaseTTL, now: clock, log: slog.New(slog.DiscardHandler)}
	}
	a, b := server("10.0.0.2"), server("10.0.0.1")
	for _, s := range []*apiEndpoints{a, b} {
		if err := s.reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"10.0.0.1", "10.0.0.2"}, endpointIPs(t, client)); diff != "" {
		t.Fatalf("both live (-want +got):\n%s", diff)
	}
	// b dies: a keeps renewing.
	now = now.Add(apiLeaseTTL)
	if err := a.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"10.0.0.1", "10.0.0.2"}, endpointIPs(t, client)); diff != "" {
		t.Fatalf("b left before its TTL passed (-want +got):\n%s", diff)
	}
	now = now.Add(time.Second)
	if err := a.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"10.0.0.2"}, endpointIPs(t, client)); diff != "" {
		t.Fatalf("after b's TTL (-want +got):\n%s", diff)
	}
	// b comes back, then shuts down cleanly.
	if err := b.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"10.0.0.1", "10.0.0.2"}, endpointIPs(t, client)); diff != "" {
		t.Fatalf("b back (-want +got):\n%s", diff)
	}
	if err := b.remove(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"10.0.0.2"}, endpointIPs(t, client)); diff != "" {
		t.Fatalf("b shut down (-want +got):\n%s", diff)
	}
	// Someone edits the endpoints: the next reconcile puts them back.
	ep, _ := client.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	ep.Subsets[0].Addresses[0].IP = "192.0.2.9"
	if _, err := client.CoreV1().Endpoints("default").Update(ctx, ep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"10.0.0.2"}, endpointIPs(t, client)); diff != "" {
		t.Fatalf("after an edit (-want +got):\n%s", diff)
	}
}

func TestAPIServerID(t *testing.T) {
	id := apiServerID("host-a")
	if len(id) != len("apiserver-")+26 || id[:10] != "apiserver-" || id == apiServerID("host-b") {
		t.Fatalf("apiServerID = %q: want apiserver- and 26 lower-case base32 characters, distinct per host", id)
	}
	if id != apiServerID("host-a") {
		t.Fatal("apiServerID is not stable")
	}
}

// TestGCIdentityLeases deletes expired identity leases only.
func TestGCIdentityLeases(t *testing.T) {
	now := time.Now()
	lease := func(name string, renewed time.Time, identity bool) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
			Spec: coordinationv1.LeaseSpec{RenewTime: ptr.To(metav1.NewMicroTime(renewed)), LeaseDurationSeconds: ptr.To(int32(3600))}}
		if identity {
			l.Labels = map[string]string{identityLabel: identityLabelValue}
		}
		return l
	}
	client := fake.NewClientset(
		lease("apiserver-live", now.Add(-time.Minute), true),
		lease("apiserver-gone", now.Add(-2*time.Hour), true),
		lease("kube-controller-manager", now.Add(-2*time.Hour), false),
	)
	if err := gcIdentityLeases(context.Background(), client, now); err != nil {
		t.Fatal(err)
	}
	list, _ := client.CoordinationV1().Leases("kube-system").List(context.Background(), metav1.ListOptions{})
	var names []string
	for _, l := range list.Items {
		names = append(names, l.Name)
	}
	if diff := cmp.Diff([]string{"apiserver-live", "kube-controller-manager"}, names); diff != "" {
		t.Fatalf("leases left (-want +got):\n%s", diff)
	}
}
