package job

import (
	"context"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/testutil"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRunWithInformers drives the controller through its informers and
// queue: a Job's pod appears, succeeds, and the Job completes.
func TestRunWithInformers(t *testing.T) {
	f := newFixture(t, makeJob("default", "migration", nil))
	ctx, cancel := context.WithCancel(context.Background())
	f.factory.Start(ctx.Done())
	go f.c.Run(ctx, 1)
	defer func() {
		cancel()
		f.factory.Shutdown()
	}()

	var pod v1.Pod
	testutil.Eventually(t, 5*time.Second, "the condition", func() bool {
		pods := f.pods(t)
		if len(pods) == 1 {
			pod = pods[0]
		}
		return len(pods) == 1
	})
	f.finishPod(t, pod, v1.PodSucceeded)
	testutil.Eventually(t, 5*time.Second, "the condition", func() bool {
		return conditionTrue(f.job(t, "default", "migration").Status.Conditions, batchv1.JobComplete)
	})
	st := f.job(t, "default", "migration").Status
	if st.Succeeded != 1 || st.Active != 0 {
		t.Errorf("status %+v", st)
	}
	if got, _ := f.client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); hasFinalizer(got) {
		t.Error("finalizer left on the pod")
	}
}
