package replicaset

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

func makeRC(name string, replicas int32) *v1.ReplicationController {
	return &v1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Generation: 1},
		Spec: v1.ReplicationControllerSpec{
			Replicas: &replicas,
			Selector: map[string]string{"app": name},
			Template: &v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
}

// A ReplicationController gets its pods, owned by it, its status written
// through replicationcontrollers/status and its events, and scaling down
// deletes the surplus.
func TestReplicationManager(t *testing.T) {
	rc := makeRC("web", 2)
	client := kubefake.NewClientset(rc)
	var seq atomic.Int32
	client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		pod := action.(clienttesting.CreateAction).GetObject().(*v1.Pod)
		pod.Name = fmt.Sprintf("%sx%04d", pod.GenerateName, seq.Add(1))
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	rec := record.NewFakeRecorder(100)
	c := NewReplicationManager(Config{Client: client, Informers: factory, Recorder: rec, Clock: clocktesting.NewFakeClock(t0)})
	rcIndexer := factory.Core().V1().ReplicationControllers().Informer().GetIndexer()
	podIndexer := factory.Core().V1().Pods().Informer().GetIndexer()
	if err := rcIndexer.Add(rc); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.sync(ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	pods, err := client.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("%d pods created, want 2", len(pods.Items))
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		ref := metav1.GetControllerOf(pod)
		if ref == nil || ref.Kind != "ReplicationController" || ref.APIVersion != "v1" || ref.Name != "web" || ref.UID != rc.UID {
			t.Errorf("pod %s controller ref %+v, want the ReplicationController", pod.Name, ref)
		}
		if err := podIndexer.Add(pod); err != nil {
			t.Fatal(err)
		}
		c.addPod(pod)
	}
	evs := []string{<-rec.Events, <-rec.Events}
	for _, e := range evs {
		if !strings.HasPrefix(e, "Normal SuccessfulCreate Created pod: web-") {
			t.Errorf("event %q, want SuccessfulCreate", e)
		}
	}

	client.ClearActions()
	if err := c.sync(ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().ReplicationControllers("ns").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Replicas != 2 || got.Status.FullyLabeledReplicas != 2 || got.Status.ObservedGeneration != 1 {
		t.Errorf("status %+v, want 2 replicas, 2 fully labeled, generation 1 observed", got.Status)
	}
	var writes []string
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" {
			writes = append(writes, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
		}
	}
	if diff := cmp.Diff([]string{"update replicationcontrollers/status"}, writes); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}

	// Scale to 1: one pod goes, with SuccessfulDelete.
	got.Spec.Replicas = new(int32)
	*got.Spec.Replicas = 1
	if err := rcIndexer.Update(got); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	if err := c.sync(ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	deletes := slices.DeleteFunc(client.Actions(), func(a clienttesting.Action) bool { return a.GetVerb() != "delete" })
	if len(deletes) != 1 {
		t.Errorf("%d deletes, want 1", len(deletes))
	}
	if e := <-rec.Events; !strings.HasPrefix(e, "Normal SuccessfulDelete Deleted pod: web-") {
		t.Errorf("event %q, want SuccessfulDelete", e)
	}
}

// The conversion keeps every field the controller reads or writes.
func TestRCConversionRoundTrip(t *testing.T) {
	rc := makeRC("web", 3)
	rc.Spec.MinReadySeconds = 5
	rc.Status = v1.ReplicationControllerStatus{Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, ObservedGeneration: 1,
		Conditions: []v1.ReplicationControllerCondition{{Type: v1.ReplicationControllerReplicaFailure, Status: v1.ConditionTrue, Reason: "FailedCreate", Message: "m"}}}
	rs := rcToRS(rc)
	if ownerKind(rs) != rcKind {
		t.Errorf("converted kind %v, want %v", ownerKind(rs), rcKind)
	}
	if diff := cmp.Diff(rc, rsToRC(rs)); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}
