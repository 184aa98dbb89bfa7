package apiserver

import (
	"maps"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/registry/autoscaling"
	"github.com/tranche/tranche/internal/registry/core"
	"github.com/tranche/tranche/internal/registry/events"
)

// TestManagedFieldsAcrossViews: an object written through autoscaling/v1 (a view of the
// stored autoscaling/v2 HorizontalPodAutoscaler) and then through v2 records both
// managers, each in its own version, and the v2 write takes the field it changed from
// the v1 manager. Without conversions between the two versions the field manager could
// not recompute the v1 entry, logged "unknown conversion" and kept the managedFields as
// they were: the v2 writer was not recorded.
func TestManagedFieldsAcrossViews(t *testing.T) {
	f := newFixtureOf(t, append(testResources(), autoscaling.HorizontalPodAutoscalerResource(), autoscaling.HorizontalPodAutoscalerV1Resource()))
	c, ctx := f.client, f.ctx
	h := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 5,
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}
	if _, err := c.AutoscalingV1().HorizontalPodAutoscalers("default").Create(ctx, h, metav1.CreateOptions{FieldManager: "writer-v1"}); err != nil {
		t.Fatal(err)
	}
	cur, err := c.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.MaxReplicas = 7
	updated, err := c.AutoscalingV2().HorizontalPodAutoscalers("default").Update(ctx, cur, metav1.UpdateOptions{FieldManager: "writer-v2"})
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]metav1.ManagedFieldsEntry{}
	for _, e := range updated.ManagedFields {
		entries[e.Manager] = e
	}
	v2e, ok := entries["writer-v2"]
	if !ok {
		t.Fatalf("the v2 update was not recorded: managedFields %+v", updated.ManagedFields)
	}
	if v2e.APIVersion != autoscalingv2.SchemeGroupVersion.String() || string(v2e.FieldsV1.Raw) != `{"f:spec":{"f:maxReplicas":{}}}` {
		t.Errorf("writer-v2's entry: %s %s, want autoscaling/v2 owning spec.maxReplicas", v2e.APIVersion, v2e.FieldsV1.Raw)
	}
	v1e, ok := entries["writer-v1"]
	if !ok {
		t.Fatalf("the v1 creator's entry is gone: managedFields %+v", updated.ManagedFields)
	}
	if v1e.APIVersion != autoscalingv1.SchemeGroupVersion.String() {
		t.Errorf("writer-v1's entry is in %s, want autoscaling/v1", v1e.APIVersion)
	}
	if raw := string(v1e.FieldsV1.Raw); raw == "" || strings.Contains(raw, "maxReplicas") {
		t.Errorf("writer-v1 still owns spec.maxReplicas after writer-v2 changed it: %s", raw)
	}
}

// TestManagedFieldsAcrossGroups: the same across groups, events.k8s.io/v1 Events being a
// view of core/v1 ones: an event created through events.k8s.io/v1 and updated through
// core/v1 records both managers.
func TestManagedFieldsAcrossGroups(t *testing.T) {
	f := newFixtureOf(t, append(testResources(), core.EventResource(), events.EventResource()))
	c, ctx := f.client, f.ctx
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}, EventTime: metav1.NowMicro(), Type: v1.EventTypeNormal,
		Reason: "Started", Action: "Starting", Note: "first", ReportingController: "example.com/c", ReportingInstance: "c-1",
		Regarding: v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"}}
	if _, err := c.EventsV1().Events("default").Create(ctx, ev, metav1.CreateOptions{FieldManager: "writer-events"}); err != nil {
		t.Fatal(err)
	}
	cur, err := c.CoreV1().Events("default").Get(ctx, "e", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Message = "second"
	updated, err := c.CoreV1().Events("default").Update(ctx, cur, metav1.UpdateOptions{FieldManager: "writer-core"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range updated.ManagedFields {
		got[e.Manager] = e.APIVersion
	}
	if want := map[string]string{"writer-events": "events.k8s.io/v1", "writer-core": "v1"}; !maps.Equal(got, want) {
		t.Errorf("managers and their versions %v, want %v", got, want)
	}
}
