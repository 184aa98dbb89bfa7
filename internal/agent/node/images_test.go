package node

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/random"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tranche/tranche/internal/imagestore"
)

func TestContainerImages(t *testing.T) {
	var images []imagestore.Image
	for i := range 60 {
		images = append(images, imagestore.Image{Digest: fmt.Sprintf("sha256:%064d", i), Size: int64(1000 + i),
			Names: []string{fmt.Sprintf("docker.io/library/img%d:1", i), fmt.Sprintf("docker.io/library/img%d@sha256:%064d", i, i)}})
	}
	images[3].Names = []string{
		"docker.io/library/busybox:1.36", "docker.io/library/busybox:1.37", "docker.io/library/busybox@sha256:aa",
		"registry.k8s.io/e2e-test-images/busybox:1.29", "registry.k8s.io/e2e-test-images/busybox@sha256:aa",
		"tranche.local/catalog/docker.io/library/busybox:key", "tranche.local/catalog/docker.io/library/busybox@sha256:aa",
		"docker.io/library/busybox:latest",
	}
	images[3].Size = 1 << 30
	got := ContainerImages(images)
	if len(got) != MaxImagesInNodeStatus {
		t.Fatalf("%d images reported, want %d", len(got), MaxImagesInNodeStatus)
	}
	// Largest first; digests before tags; at most five names; the catalog's bookkeeping
	// names left out.
	want := v1.ContainerImage{SizeBytes: 1 << 30, Names: []string{
		"docker.io/library/busybox@sha256:aa", "registry.k8s.io/e2e-test-images/busybox@sha256:aa",
		"docker.io/library/busybox:1.36", "docker.io/library/busybox:1.37", "registry.k8s.io/e2e-test-images/busybox:1.29",
	}}
	if diff := cmp.Diff(want, got[0]); diff != "" {
		t.Errorf("largest image (-want +got):\n%s", diff)
	}
	if got[1].SizeBytes != 1059 || got[49].SizeBytes != 1011 {
		t.Errorf("sizes %d ... %d, want 1059 ... 1011 (the ten smallest left out)", got[1].SizeBytes, got[49].SizeBytes)
	}
	if diff := cmp.Diff([]string{"docker.io/library/img59@sha256:" + fmt.Sprintf("%064d", 59), "docker.io/library/img59:1"}, got[1].Names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}

// TestStatusReportsImages: the registered status carries the store's images, and a new image
// is reported at the next lease renewal.
func TestStatusReportsImages(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := imagestore.Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	putRandom(t, store, "first:1")
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	client := fake.NewSimpleClientset()
	a := New(Config{Name: "n1", InternalIP: "10.240.0.10", CPU: 2, Memory: 4 << 30, Clock: clk}, client)
	a.SetImages(StoreImages(store))
	n, err := a.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Status.Images) != 1 || !contains(n.Status.Images[0].Names, "docker.io/library/first:1") || n.Status.Images[0].SizeBytes <= 0 {
		t.Fatalf("status.images %+v", n.Status.Images)
	}
	go a.Run(ctx)
	putRandom(t, store, "second:1")
	for i := 0; i < 400; i++ {
		if clk.HasWaiters() {
			clk.Step(RenewInterval)
		}
		n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err == nil && len(n.Status.Images) == 2 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("a new image was not reported at the next renewal")
}

// TestRunImageGC: past the high threshold with nothing to remove, a FreeDiskSpaceFailed
// warning with kubelet's message, and on the next failed run ImageGCFailed.
func TestRunImageGC(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := imagestore.Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	rec := record.NewFakeRecorder(10)
	full := func() (imagestore.Usage, error) {
		return imagestore.Usage{Capacity: 100 << 30, Available: 1 << 30}, nil
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		RunImageGC(ctx, ImageGC{Node: "n1", Store: store, Policy: imagestore.GCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80},
			Usage: full, Recorder: rec, Clock: clk})
	}()
	first := <-rec.Events
	if !strings.HasPrefix(first, "Warning FreeDiskSpaceFailed Insufficient free disk space on the node's image filesystem (99% of 100.0 GiB used).") {
		t.Errorf("first event %q", first)
	}
	for !clk.HasWaiters() {
		time.Sleep(5 * time.Millisecond)
	}
	clk.Step(ImageGCPeriod)
	for _, want := range []string{"Warning FreeDiskSpaceFailed", "Warning ImageGCFailed Insufficient free disk space"} {
		if got := <-rec.Events; !strings.HasPrefix(got, want) {
			t.Errorf("event %q, want %q...", got, want)
		}
	}
	cancel()
	wg.Wait()
}

func putRandom(t *testing.T, s *imagestore.Store, name string) {
	t.Helper()
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(context.Background(), img, name); err != nil {
		t.Fatal(err)
	}
}

func contains(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}
