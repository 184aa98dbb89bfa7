package deployment

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// fixture is a controller over a fake clientset with unstarted informers
// whose caches the test fills from the fake's current objects.
type fixture struct {
	t        *testing.T
	c        *Controller
	client   *kubefake.Clientset
	factory  informers.SharedInformerFactory
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	client := kubefake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	f := &fixture{t: t, client: client, factory: factory, recorder: record.NewFakeRecorder(100), clock: clocktesting.NewFakeClock(t0)}
	f.c = New(Config{Client: client, Informers: factory, Recorder: f.recorder, Clock: f.clock})
	f.refresh()
	return f
}

// refresh copies the fake's Deployments and ReplicaSets into the caches.
func (f *fixture) refresh() {
	ctx := context.Background()
	ds, err := f.client.AppsV1().Deployments("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var dObjs, rsObjs []any
	for i := range ds.Items {
		dObjs = append(dObjs, &ds.Items[i])
	}
	rss, err := f.client.AppsV1().ReplicaSets("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range rss.Items {
		rsObjs = append(rsObjs, &rss.Items[i])
	}
	if err := f.factory.Apps().V1().Deployments().Informer().GetIndexer().Replace(dObjs, ""); err != nil {
		f.t.Fatal(err)
	}
	if err := f.factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Replace(rsObjs, ""); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) sync() {
	f.t.Helper()
	f.client.ClearActions()
	if err := f.c.sync(context.Background(), "ns/web"); err != nil {
		f.t.Fatal(err)
	}
	f.refresh()
}

func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.client.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		out = append(out, a.GetVerb()+" "+res)
	}
	return out
}

func (f *fixture) deployment() *appsv1.Deployment {
	d, err := f.client.AppsV1().Deployments("ns").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

func TestControllerCreatesReplicaSet(t *testing.T) {
	f := newFixture(t, makeDeployment(3))
	f.sync()
	want := []string{"create replicasets", "patch deployments", "update deployments/status"}
	if diff := cmp.Diff(want, f.writes()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	d := f.deployment()
	name := "web-" + templateHash(&d.Spec.Template, nil)
	rs, err := f.client.AppsV1().ReplicaSets("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *rs.Spec.Replicas != 3 || rs.Annotations[revisionAnnotation] != "1" || d.Annotations[revisionAnnotation] != "1" {
		t.Errorf("replicas %d, revisions rs %q deployment %q", *rs.Spec.Replicas, rs.Annotations[revisionAnnotation], d.Annotations[revisionAnnotation])
	}
	if got := <-f.recorder.Events; got != "Normal ScalingReplicaSet Scaled up replica set "+name+" from 0 to 3" {
		t.Errorf("event %q", got)
	}
	if got := cond(d, appsv1.DeploymentProgressing); got != `True NewReplicaSetCreated: Created new replica set "`+name+`"` {
		t.Errorf("progressing %q", got)
	}
	// A second sync on the caught-up cache creates nothing more.
	f.sync()
	for _, w := range f.writes() {
		if w == "create replicasets" {
			t.Errorf("second create: %q", f.writes())
		}
	}
}

func TestControllerProgressDeadlineWithFakeClock(t *testing.T) {
	f := newFixture(t, makeDeployment(2, func(d *appsv1.Deployment) { d.Spec.ProgressDeadlineSeconds = new(int32(30)) }))
	f.sync()
	f.sync()
	f.clock.Step(31 * time.Second)
	f.sync()
	d := f.deployment()
	if got := condition(&d.Status, appsv1.DeploymentProgressing); got == nil || got.Reason != reasonTimedOut || got.Status != "False" {
		t.Errorf("progressing %+v, want ProgressDeadlineExceeded", got)
	}
}

func TestControllerBacksOffOnFailedCreate(t *testing.T) {
	f := newFixture(t, makeDeployment(1))
	f.client.PrependReactor("create", "replicasets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("quota exceeded")
	})
	if err := f.c.sync(context.Background(), "ns/web"); err == nil {
		t.Fatal("sync succeeded although the create failed")
	}
	got := <-f.recorder.Events
	if want := `Warning ReplicaSetCreateError Failed to create new replica set "web-`; len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("event %q", got)
	}
	c := condition(&f.deployment().Status, appsv1.DeploymentProgressing)
	if c == nil || c.Reason != reasonFailedRSCreate || c.Status != "False" {
		t.Errorf("progressing %+v", c)
	}
}
