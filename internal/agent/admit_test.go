package agent

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tranche/tranche/internal/testutil"
)

// TestAdmitRejectsTakenHostPort: a pod bound to the node whose host port a
// running pod holds is rejected as kubelet rejects it (Failed, NodePorts) and
// never started; the holder runs on.
func TestAdmitRejectsTakenHostPort(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := metav1.NewTime(time.Now().Add(-time.Minute))
	withPort := func(name string, uid string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "d", UID: types.UID(uid), CreationTimestamp: started},
			Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "agnhost",
				Ports: []v1.ContainerPort{{Name: "conflict", HostPort: 21017, ContainerPort: 21017}}}}}}
	}
	holder := withPort("test-pod", "u-holder")
	holder.Status = v1.PodStatus{Phase: v1.PodRunning, StartTime: &started}
	newcomer := withPort("ss-0", "u-new")
	newcomer.CreationTimestamp = metav1.NewTime(started.Add(30 * time.Second))
	client := fake.NewClientset(holder, newcomer)
	rt := newFakeRuntime()
	loop := NewPods(Config{NodeName: "n1", Client: client, Runtime: rt, Volumes: noVolumes{}, Resync: time.Hour})
	go loop.Run(ctx, 1)
	testutil.Eventually(t, 20*time.Second, "ss-0 rejected", func() bool {
		p, err := client.CoreV1().Pods("d").Get(ctx, "ss-0", metav1.GetOptions{})
		return err == nil && p.Status.Phase == v1.PodFailed
	})
	p, _ := client.CoreV1().Pods("d").Get(ctx, "ss-0", metav1.GetOptions{})
	if p.Status.Reason != "NodePorts" || p.Status.Message != "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports" {
		t.Errorf("status %+v", p.Status)
	}
	testutil.Eventually(t, 20*time.Second, "the holder synced", func() bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return rt.synced["u-holder"] > 0
	})
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.synced["u-new"] != 0 {
		t.Error("the rejected pod was started")
	}
}

// TestAdmitOneOfTwoNewPods: two new pods wanting one host port, synced by two
// workers at once, are not both admitted.
func TestAdmitOneOfTwoNewPods(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mk := func(name string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "d", UID: types.UID("u-" + name)},
			Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "agnhost",
				Ports: []v1.ContainerPort{{HostPort: 8080, ContainerPort: 80}}}}}}
	}
	client := fake.NewClientset(mk("a"), mk("b"))
	rt := newFakeRuntime()
	loop := NewPods(Config{NodeName: "n1", Client: client, Runtime: rt, Volumes: noVolumes{}, Resync: time.Hour})
	go loop.Run(ctx, 2)
	var failed, synced int
	testutil.Eventually(t, 20*time.Second, "one pod rejected, the other started", func() bool {
		failed, synced = 0, 0
		for _, name := range []string{"a", "b"} {
			if p, err := client.CoreV1().Pods("d").Get(ctx, name, metav1.GetOptions{}); err == nil && p.Status.Phase == v1.PodFailed {
				failed++
			}
		}
		rt.mu.Lock()
		synced = len(rt.synced)
		rt.mu.Unlock()
		return failed == 1 && synced == 1
	})
}
