package events

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// makeEvent returns an events.k8s.io/v1 event with every field set, after mutate.
func makeEvent(mutate func(*eventsv1.Event)) *eventsv1.Event {
	ev := &eventsv1.Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
		ObjectMeta:               metav1.ObjectMeta{Name: "web-0.1811", Namespace: "default", Labels: map[string]string{"a": "b"}, CreationTimestamp: metav1.NewTime(testNow.Add(-time.Hour))},
		EventTime:                metav1.NewMicroTime(testNow.Add(-time.Minute)),
		Series:                   &eventsv1.EventSeries{Count: 4, LastObservedTime: metav1.NewMicroTime(testNow.Add(-time.Second))},
		ReportingController:      "example.com/ctl",
		ReportingInstance:        "ctl-1",
		Action:                   "Scheduling",
		Reason:                   "Scheduled",
		Regarding:                corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-0", UID: "u1", APIVersion: "v1", FieldPath: "spec"},
		Related:                  &corev1.ObjectReference{Kind: "Node", Name: "node-1"},
		Note:                     "Assigned default/web-0 to node-1",
		Type:                     corev1.EventTypeNormal,
		DeprecatedSource:         corev1.EventSource{Component: "sched", Host: "h"},
		DeprecatedFirstTimestamp: metav1.NewTime(testNow.Add(-10 * time.Minute)),
		DeprecatedLastTimestamp:  metav1.NewTime(testNow.Add(-2 * time.Minute)),
		DeprecatedCount:          9,
	}
	if mutate != nil {
		mutate(ev)
	}
	return ev
}

func TestToCore(t *testing.T) {
	in := makeEvent(nil)
	want := &corev1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Reason:              "Scheduled",
		Message:             "Assigned default/web-0 to node-1",
		Source:              corev1.EventSource{Component: "sched", Host: "h"},
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               9,
		Type:                "Normal",
		EventTime:           in.EventTime,
		Series:              &corev1.EventSeries{Count: 4, LastObservedTime: in.Series.LastObservedTime},
		Action:              "Scheduling",
		Related:             &corev1.ObjectReference{Kind: "Node", Name: "node-1"},
		ReportingController: "example.com/ctl",
		ReportingInstance:   "ctl-1",
	}
	if diff := cmp.Diff(want, ToCore(in)); diff != "" {
		t.Errorf("core event (-want +got):\n%s", diff)
	}
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*eventsv1.Event)
	}{
		{name: "everything set"},
		{name: "minimal", mutate: func(ev *eventsv1.Event) {
			*ev = eventsv1.Event{TypeMeta: ev.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}}
		}},
		{name: "no series or related", mutate: func(ev *eventsv1.Event) { ev.Series, ev.Related = nil, nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := makeEvent(tc.mutate)
			orig := in.DeepCopy()
			core := ToCore(in)
			if diff := cmp.Diff(orig, FromCore(core)); diff != "" {
				t.Errorf("events -> core -> events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(core, ToCore(FromCore(core))); diff != "" {
				t.Errorf("core -> events -> core (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(orig, in); diff != "" {
				t.Errorf("conversion modified its input (-want +got):\n%s", diff)
			}
			// The result shares no pointers with the input.
			if core.Labels != nil {
				core.Labels["new"] = "x"
			}
			if core.Related != nil {
				core.Related.Name = "changed"
			}
			if diff := cmp.Diff(orig, in); diff != "" {
				t.Errorf("conversion aliases its input (-want +got):\n%s", diff)
			}
		})
	}
	if ToCore(nil) != nil || FromCore(nil) != nil {
		t.Error("nil must convert to nil")
	}
}
