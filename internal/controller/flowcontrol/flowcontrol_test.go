package flowcontrol

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestEnsureBootstrap(t *testing.T) {
	ctx := context.Background()
	changedCatchAll := bootstrap.MandatoryFlowSchemaCatchAll.DeepCopy()
	changedCatchAll.Spec.MatchingPrecedence = 9000
	keptSystem := bootstrap.SuggestedFlowSchemaSystemNodes.DeepCopy()
	keptSystem.Spec.MatchingPrecedence = 600
	keptSystem.Annotations = map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "false"}
	stale := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "retired", Annotations: map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"}}}
	users := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}
	client := fake.NewClientset(changedCatchAll, keptSystem, stale, users)
	if err := EnsureBootstrap(ctx, client); err != nil {
		t.Fatal(err)
	}
	fsList, _ := client.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{})
	got := map[string]flowcontrolv1.FlowSchema{}
	for _, fs := range fsList.Items {
		got[fs.Name] = fs
	}
	for _, b := range append(bootstrap.MandatoryFlowSchemas, bootstrap.SuggestedFlowSchemas...) {
		if _, ok := got[b.Name]; !ok {
			t.Errorf("bootstrap FlowSchema %s missing", b.Name)
		}
	}
	if p := got["catch-all"].Spec.MatchingPrecedence; p != bootstrap.MandatoryFlowSchemaCatchAll.Spec.MatchingPrecedence {
		t.Errorf("mandatory catch-all not restored: precedence %d", p)
	}
	if p := got["system-nodes"].Spec.MatchingPrecedence; p != 600 {
		t.Errorf("suggested system-nodes with autoupdate false was overwritten: precedence %d", p)
	}
	if _, ok := got["retired"]; ok {
		t.Error("auto-updated FlowSchema no longer in the bootstrap set was kept")
	}
	if _, ok := got["mine"]; !ok {
		t.Error("a user's FlowSchema was deleted")
	}
	plList, _ := client.FlowcontrolV1().PriorityLevelConfigurations().List(ctx, metav1.ListOptions{})
	if want := len(bootstrap.MandatoryPriorityLevelConfigurations) + len(bootstrap.SuggestedPriorityLevelConfigurations); len(plList.Items) != want {
		t.Errorf("%d priority levels, want %d", len(plList.Items), want)
	}
	before := len(client.Actions())
	if err := EnsureBootstrap(ctx, client); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions()[before:] {
		if v := a.GetVerb(); v != "get" && v != "list" {
			t.Errorf("second pass wrote: %s %s", v, a.GetResource().Resource)
		}
	}
}

func TestDanglingCondition(t *testing.T) {
	fs := func(name, pl string) *flowcontrolv1.FlowSchema {
		return &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: pl}}}
	}
	objs := []runtime.Object{fs("found", "workload-low"), fs("missing", "nowhere"),
		&flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "workload-low"}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	c := New(Config{Client: client, Informers: f, Clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("caches did not sync")
	}
	for name, want := range map[string]flowcontrolv1.FlowSchemaCondition{
		"found": {Type: "Dangling", Status: "False", Reason: "Found",
			Message: `This FlowSchema references the PriorityLevelConfiguration object named "workload-low" and it exists`},
		"missing": {Type: "Dangling", Status: "True", Reason: "NotFound",
			Message: `This FlowSchema references the PriorityLevelConfiguration object named "nowhere" but there is no such object`},
	} {
		if err := c.sync(ctx, name); err != nil {
			t.Fatal(err)
		}
		got, _ := client.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
		if len(got.Status.Conditions) != 1 {
			t.Fatalf("%s: conditions %v", name, got.Status.Conditions)
		}
		cond := got.Status.Conditions[0]
		cond.LastTransitionTime = metav1.Time{}
		if diff := cmp.Diff(want, cond); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}
