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
	"k8s.io/apimachinery/pkg/watch"
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

// countingVolumes counts Prepare calls.
type countingVolumes struct {
	mu       sync.Mutex
	prepared int
}

func (c *countingVolumes) Prepare(context.Context, *v1.Pod) (map[string]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prepared++
	return map[string]string{"v": "/vols/v"}, nil
}
func (c *countingVolumes) Cleanup(context.Context, *v1.Pod) error { return nil }

func (c *countingVolumes) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.prepared
}

// TestVolumesPreparedOncePerPodVersion: syncs of an unchanged pod (the echo of the
// agent's own status write, resyncs, runtime notifications) reuse the prepared
// volumes; a change of the pod's labels prepares them again (downward API files).
func TestVolumesPreparedOncePerPodVersion(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "d", UID: "u1", Labels: map[string]string{"a": "1"}},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	client := fake.NewClientset(pod)
	rt := newFakeRuntime()
	vols := &countingVolumes{}
	loop := NewPods(Config{NodeName: "n1", Client: client, Runtime: rt, Volumes: vols, Resync: time.Hour})
	go loop.Run(ctx, 1)
	synced := func() int {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return rt.synced["u1"]
	}
	testutil.Eventually(t, 20*time.Second, "the agent's status write back through the watch", func() bool {
		p, err := loop.lister.Pods("d").Get("p")
		return err == nil && p.Status.Phase == v1.PodRunning
	})
	for range 3 {
		n := synced()
		rt.changes <- "u1"
		testutil.Eventually(t, 20*time.Second, "another sync", func() bool { return synced() > n })
	}
	if got := vols.count(); got != 1 {
		t.Errorf("%d Prepare calls over %d syncs of an unchanged pod, want 1", got, synced())
	}
	p, _ := client.CoreV1().Pods("d").Get(ctx, "p", metav1.GetOptions{})
	p.Labels["a"] = "2"
	if _, err := client.CoreV1().Pods("d").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the volumes prepared again for the new labels", func() bool { return vols.count() == 2 })
}

// blockingKillRuntime is fakeRuntime whose KillPod blocks until release closes, as a
// graceful stop waits for its grace period.
type blockingKillRuntime struct {
	*fakeRuntime
	release chan struct{}
}

func (b blockingKillRuntime) KillPod(ctx context.Context, pod *v1.Pod, grace time.Duration) error {
	<-b.release
	return b.fakeRuntime.KillPod(ctx, pod, grace)
}

// TestSlowStopsDoNotHoldNewPods: pods in a long graceful stop (four, as many as the
// agent once had workers) do not keep a new pod from starting.
func TestSlowStopsDoNotHoldNewPods(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := metav1.Now()
	var objs []runtime.Object
	for i := range 4 {
		objs = append(objs, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "old" + string(rune('a'+i)), Namespace: "d", UID: types.UID("old" + string(rune('a'+i))),
			DeletionTimestamp: &now, DeletionGracePeriodSeconds: ptrInt64(30)},
			Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "busybox"}}}})
	}
	client := fake.NewClientset(objs...)
	// The fake clientset drops events sent before a watch exists: know when it does.
	watching := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("pods", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(v1.SchemeGroupVersion.WithResource("pods"), action.GetNamespace())
		once.Do(func() { close(watching) })
		return true, w, err
	})
	rt := blockingKillRuntime{fakeRuntime: newFakeRuntime(), release: make(chan struct{})}
	defer close(rt.release)
	loop := NewPods(Config{NodeName: "n1", Client: client, Runtime: rt, Volumes: noVolumes{}, Resync: time.Hour})
	go loop.Run(ctx, podWorkers)
	<-watching
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "d", UID: "new"},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := client.CoreV1().Pods("d").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the new pod synced while four pods are stopping", func() bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return rt.synced["new"] > 0
	})
}

// blockingSyncRuntime's SyncPod blocks, as a long image pull does, until its context
// ends.
type blockingSyncRuntime struct {
	*fakeRuntime
	started chan struct{}
	once    sync.Once
}

func (b *blockingSyncRuntime) SyncPod(ctx context.Context, pod *v1.Pod, vols map[string]string) (status.PodView, error) {
	if pod.DeletionTimestamp == nil {
		b.once.Do(func() { close(b.started) })
		<-ctx.Done()
		return status.PodView{}, ctx.Err()
	}
	return b.fakeRuntime.SyncPod(ctx, pod, vols)
}

// TestDeletionCancelsSync: deleting a pod whose sync is stuck (a long image pull)
// cancels that sync, as kubelet's pod workers do, and the pod is killed and its
// deletion confirmed; no status is written for the cancelled sync (the one written
// before it, ContainerCreating, is the only one).
func TestDeletionCancelsSync(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: "d", UID: "slow"},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "example.com/huge:1"}}}}
	client := fake.NewClientset(pod)
	rt := &blockingSyncRuntime{fakeRuntime: newFakeRuntime(), started: make(chan struct{})}
	loop := NewPods(Config{NodeName: "n1", Client: client, Runtime: rt, Volumes: noVolumes{}, Resync: time.Hour})
	go loop.Run(ctx, podWorkers)
	select {
	case <-rt.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the pod's sync never started")
	}
	now := metav1.Now()
	deleting := pod.DeepCopy()
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, ptrInt64(30)
	if _, err := client.CoreV1().Pods("d").Update(ctx, deleting, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the pod killed while its first sync was stuck", func() bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		_, killed := rt.killed["slow"]
		return killed
	})
	statuses := 0
	for _, a := range client.Actions() {
		if a.GetSubresource() != "status" {
			continue
		}
		statuses++
		written := a.(k8stesting.UpdateAction).GetObject().(*v1.Pod)
		if cs := written.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Waiting == nil || cs[0].State.Waiting.Reason != "ContainerCreating" {
			t.Errorf("a status other than the first sync's ContainerCreating was written: %+v", written.Status)
		}
	}
	if statuses != 1 {
		t.Errorf("%d status writes, want the one before the sync", statuses)
	}
}

// TestFirstSyncReportsContainerCreating: while a pod's first sync is stuck (a long image
// pull), the pod already reports what kubelet reports then: Pending, its containers
// waiting with ContainerCreating, or PodInitializing behind init containers.
func TestFirstSyncReportsContainerCreating(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plain := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "d", UID: "plain"},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "example.com/huge:1"}}}}
	withInit := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "init", Namespace: "d", UID: "init"},
		Spec: v1.PodSpec{NodeName: "n1", InitContainers: []v1.Container{{Name: "i", Image: "example.com/huge:1"}},
			Containers: []v1.Container{{Name: "c", Image: "example.com/huge:1"}}}}
	client := fake.NewClientset(plain, withInit)
	rt := &blockingSyncRuntime{fakeRuntime: newFakeRuntime(), started: make(chan struct{})}
	loop := NewPods(Config{NodeName: "n1", Client: client, Runtime: rt, Volumes: noVolumes{}, Resync: time.Hour})
	go loop.Run(ctx, podWorkers)
	for name, want := range map[string]string{"plain": "ContainerCreating", "init": "PodInitializing"} {
		testutil.Eventually(t, 20*time.Second, name+" reports "+want+" during its first sync", func() bool {
			got, err := client.CoreV1().Pods("d").Get(ctx, name, metav1.GetOptions{})
			if err != nil || got.Status.Phase != v1.PodPending {
				return false
			}
			cs := got.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == want
		})
	}
}
