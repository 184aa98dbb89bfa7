package daemonset

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche/tranche/internal/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRunWithInformers drives the controller through its informers and
// queue: four nodes get four pods, a fifth node its own.
func TestRunWithInformers(t *testing.T) {
	objs := append(nodes("n1", "n2", "n3", "n4"), makeDaemonSet("default", "log-collector", nil))
	f := newFixture(t, objs...)
	ctx, cancel := context.WithCancel(context.Background())
	f.factory.Start(ctx.Done())
	go f.c.Run(ctx, 2)
	defer func() {
		cancel()
		f.factory.Shutdown()
	}()
	want := []string{"n1", "n2", "n3", "n4"}
	testutil.Eventually(t, 5*time.Second, "the condition", func() bool { return cmp.Equal(want, f.podNodes(t)) })
	if _, err := f.client.CoreV1().Nodes().Create(ctx, makeNode("n5", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want = append(want, "n5")
	testutil.Eventually(t, 5*time.Second, "the condition", func() bool { return cmp.Equal(want, f.podNodes(t)) })
	testutil.Eventually(t, 5*time.Second, "the condition", func() bool { return f.daemonSet(t, "default", "log-collector").Status.DesiredNumberScheduled == 5 })
	// Nothing more was created while the informer caught up.
	if got := f.podNodes(t); !cmp.Equal(want, got) {
		t.Fatalf("pods on %v", got)
	}
}
