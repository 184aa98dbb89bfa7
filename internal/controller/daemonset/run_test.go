package daemonset

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
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
	poll(t, func() bool { return cmp.Equal(want, f.podNodes(t)) })
	if _, err := f.client.CoreV1().Nodes().Create(ctx, makeNode("n5", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want = append(want, "n5")
	poll(t, func() bool { return cmp.Equal(want, f.podNodes(t)) })
	poll(t, func() bool { return f.daemonSet(t, "default", "log-collector").Status.DesiredNumberScheduled == 5 })
	// Nothing more was created while the informer caught up.
	if got := f.podNodes(t); !cmp.Equal(want, got) {
		t.Fatalf("pods on %v", got)
	}
}

// poll waits for cond, failing after five seconds.
func poll(t *testing.T, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatal("condition not reached within 5s")
	}
}
