package allocator_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/allocator"
	"github.com/tranche/tranche/internal/storage"
)

// racingStore runs during once, right after the repair listed the Services: what
// another API server does while this one starts.
type racingStore struct {
	storage.Interface
	once   sync.Once
	during func()
}

func (r *racingStore) List(ctx context.Context, prefix string, opts storage.ListOptions) (*storage.ListResult, error) {
	res, err := r.Interface.List(ctx, prefix, opts)
	if prefix == allocator.ServicesPrefix {
		r.once.Do(r.during)
	}
	return res, err
}

// TestRepairWhileAnotherServerCreates: a Service created through another API server
// while a starting server repairs keeps its allocations and its IPAddress, so its
// ClusterIP is never given twice.
func TestRepairWhileAnotherServerCreates(t *testing.T) {
	f := newFixture(t, "10.96.0.0/12")
	var created string
	racing := &racingStore{Interface: f.store, during: func() {
		s, err := f.client.CoreV1().Services("default").Create(f.ctx, makeService("meanwhile", nil), metav1.CreateOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		created = s.Spec.ClusterIP
	}}
	starting := &allocator.Services{CIDR: f.alloc.CIDR, Ports: f.alloc.Ports, Reserved: f.alloc.Reserved, Store: racing}
	if err := starting.Repair(f.ctx, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if created == "" {
		t.Fatal("the concurrent Service was not created")
	}
	if got := strings.Join(f.keys(t), ","); got != created {
		t.Fatalf("allocation keys after the repair: %q, want the concurrent Service's %q", got, created)
	}
	if got := strings.Join(f.ipAddresses(t), ","); !strings.HasPrefix(got, created+" ") {
		t.Fatalf("IPAddress objects after the repair: %q, want the one of %s", got, created)
	}
}
