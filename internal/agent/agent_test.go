package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tranche/tranche/internal/agent/status"
	"github.com/tranche/tranche/internal/testutil"
)

// fakeRuntime records calls and reports every container running and ready.
type fakeRuntime struct {
	mu      sync.Mutex
	synced  map[types.UID]int
	killed  map[types.UID]time.Duration
	changes chan types.UID
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{synced: map[types.UID]int{}, killed: map[types.UID]time.Duration{}, changes: make(chan types.UID, 8)}
}

func (f *fakeRuntime) SyncPod(_ context.Context, pod *v1.Pod, _ map[string]string) (status.PodView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced[pod.UID]++
	view := status.PodView{SandboxReady: true, PodIPs: []string{"10.244.0.5"}, HostIPs: []string{"10.240.0.10"}, Containers: map[string]status.ContainerView{}}
	for _, c := range pod.Spec.Containers {
		view.Containers[c.Name] = status.ContainerView{ID: "x", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}}, Started: true, Ready: true}
	}
	return view, nil
}

func (f *fakeRuntime) KillPod(_ context.Context, pod *v1.Pod, grace time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.killed[pod.UID] = grace
	return nil
}

func (f *fakeRuntime) Changes() <-chan types.UID { return f.changes }

type noVolumes struct{}

func (noVolumes) Prepare(context.Context, *v1.Pod) (map[string]string, error) { return nil, nil }
func (noVolumes) Cleanup(context.Context, *v1.Pod) error                      { return nil }

func TestPodLoop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "d", UID: "u1"},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	client := fake.NewClientset(pod)
	// The fake replaces the whole object on a status update; the API server changes
	// status only. Emulate it, or a status write racing the test's deletion update
	// would erase the deletionTimestamp.
	podsGVR := v1.SchemeGroupVersion.WithResource("pods")
	client.PrependReactor("update", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		in := action.(k8stesting.UpdateAction).GetObject().(*v1.Pod)
		cur, err := client.Tracker().Get(podsGVR, in.Namespace, in.Name)
		if err != nil {
			return true, nil, err
		}
		next := cur.(*v1.Pod).DeepCopy()
		next.Status = in.Status
		return true, next, client.Tracker().Update(podsGVR, next, in.Namespace)
	})
	rt := newFakeRuntime()
	loop := NewPods(Config{NodeName: "n1", Client: client, Runtime: rt, Volumes: noVolumes{}, Resync: time.Hour})
	go loop.Run(ctx, 1)
	testutil.Eventually(t, 20*time.Second, "Running and Ready status", func() bool {
		p, err := client.CoreV1().Pods("d").Get(ctx, "p", metav1.GetOptions{})
		if err != nil || p.Status.Phase != v1.PodRunning || p.Status.PodIP != "10.244.0.5" {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady {
				return c.Status == v1.ConditionTrue
			}
		}
		return false
	})
	// The fake clientset drops events sent before an informer's watch is established:
	// wait until the agent's own status write came back through the watch.
	testutil.Eventually(t, 20*time.Second, "the informer's watch to be live", func() bool {
		p, err := loop.lister.Pods("d").Get("p")
		return err == nil && p.Status.Phase == v1.PodRunning
	})
	// A graceful deletion: the runtime stops the pod with its grace period and the
	// agent confirms with a zero-grace delete.
	p, _ := client.CoreV1().Pods("d").Get(ctx, "p", metav1.GetOptions{})
	now := metav1.Now()
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, ptrInt64(7)
	if _, err := client.CoreV1().Pods("d").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the pod killed with its grace period and confirmed", func() bool {
		rt.mu.Lock()
		grace, killed := rt.killed["u1"]
		rt.mu.Unlock()
		_, err := client.CoreV1().Pods("d").Get(ctx, "p", metav1.GetOptions{})
		return killed && grace == 7*time.Second && err != nil
	})
}

func ptrInt64(n int64) *int64 { return &n }
