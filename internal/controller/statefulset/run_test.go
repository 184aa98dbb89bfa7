package statefulset

import (
	"context"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRunWithInformers drives the controller through its informers and
// queue: each ordinal appears only once the previous one is Ready.
func TestRunWithInformers(t *testing.T) {
	f := newFixture(t, makeSet("postgres", 3, nil))
	ctx, cancel := context.WithCancel(context.Background())
	f.factory.Start(ctx.Done())
	go f.c.Run(ctx, 1)
	defer func() {
		cancel()
		f.factory.Shutdown()
	}()
	for _, name := range []string{"postgres-0", "postgres-1", "postgres-2"} {
		testutil.Eventually(t, 5*time.Second, "the condition", func() bool {
			_, err := f.client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			return err == nil
		})
		f.makeReady(t, name)
	}
	testutil.Eventually(t, 5*time.Second, "the condition", func() bool { return f.set(t, "postgres").Status.ReadyReplicas == 3 })
	claims, err := f.client.CoreV1().PersistentVolumeClaims("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(claims.Items) != 3 {
		t.Fatalf("claims %d, %v", len(claims.Items), err)
	}
}
