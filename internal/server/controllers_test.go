package server

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"runtime"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"github.com/tranche/tranche/internal/allocator"
	"github.com/tranche/tranche/internal/controller/manager"
	"github.com/tranche/tranche/internal/controller/servicelb"
	"github.com/tranche/tranche/internal/storage/memory"
)

// TestControllerManagerStartsAndStops runs the real list of controllers on a fake
// clientset: names are unique, every constructor succeeds, and the manager's Run returns
// once its context ends, i.e. every controller stopped with all its workers.
func TestControllerManagerStartsAndStops(t *testing.T) {
	client := fake.NewClientset()
	scheme := k8sruntime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	opts := controllerOptions{clusterCIDR: netip.MustParsePrefix("10.244.0.0/16"), lbPool: servicelb.MustParsePool("127.0.10.0/24"), pvRoot: t.TempDir(),
		alloc: &allocator.Services{CIDR: netip.MustParsePrefix("10.96.0.0/12"), Ports: allocator.PortRange{First: 30000, Last: 32767}, Store: memory.New(time.Second)}}
	descs := controllerDescriptors(opts, apiClients{meta: metadatafake.NewSimpleMetadataClient(scheme), disc: client.Discovery(), resourceMetrics: metricsfake.NewSimpleClientset()})
	seen := map[string]bool{}
	for _, d := range descs {
		if seen[d.Name] {
			t.Errorf("controller %s listed twice", d.Name)
		}
		seen[d.Name] = true
		if d.Disabled {
			t.Errorf("controller %s disabled although everything is configured", d.Name)
		}
	}
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	m := &manager.Manager{Client: client, Descriptors: descs, Started: func() { close(started) }}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("manager stopped at start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("manager did not start")
	}
	running := runtime.NumGoroutine()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("manager did not stop: a controller's Run outlived its context")
	}
	t.Logf("goroutines: %d before, %d running, %d right after Run returned", before, running, runtime.NumGoroutine())
}

// TestServiceLBDisabledWithoutPool: without a pool, LoadBalancer Services are left to
// another implementation.
func TestServiceLBDisabledWithoutPool(t *testing.T) {
	for _, d := range controllerDescriptors(controllerOptions{}, apiClients{}) {
		if d.Name == "servicelb" && !d.Disabled {
			t.Fatal("servicelb enabled without a pool")
		}
	}
}
