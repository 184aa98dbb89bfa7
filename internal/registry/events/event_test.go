package events

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func errStrings(errs field.ErrorList) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// validEvent is what a client of events.k8s.io/v1 sends: no deprecated fields.
func validEvent(mutate func(*eventsv1.Event)) *eventsv1.Event {
	return makeEvent(func(ev *eventsv1.Event) {
		ev.DeprecatedSource = corev1.EventSource{}
		ev.DeprecatedFirstTimestamp.Reset()
		ev.DeprecatedLastTimestamp.Reset()
		ev.DeprecatedCount = 0
		if mutate != nil {
			mutate(ev)
		}
	})
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*eventsv1.Event)
		want   []string
	}{
		{name: "valid", want: []string{}},
		{name: "deprecated fields set", mutate: func(ev *eventsv1.Event) { ev.DeprecatedCount = 2 },
			want: []string{`count: Invalid value: "": needs to be unset`}},
		{name: "eventTime required", mutate: func(ev *eventsv1.Event) { ev.EventTime.Reset() },
			want: []string{"eventTime: Required value"}},
		{name: "type", mutate: func(ev *eventsv1.Event) { ev.Type = "" },
			want: []string{`type: Invalid value: "": has invalid value: `}},
		{name: "reporting fields and action required", mutate: func(ev *eventsv1.Event) {
			ev.ReportingInstance, ev.Action = "", strings.Repeat("a", 129)
		}, want: []string{"reportingInstance: Required value", `action: Invalid value: "": can have at most 128 characters`}},
		{name: "note at most 1 KiB", mutate: func(ev *eventsv1.Event) { ev.Note = strings.Repeat("n", 1025) },
			want: []string{`message: Invalid value: "": can have at most 1024 characters`}},
		{name: "regarding namespace must match", mutate: func(ev *eventsv1.Event) { ev.Regarding.Namespace = ""; ev.Namespace = "apps" },
			want: []string{`involvedObject.namespace: Invalid value: "": does not match event.namespace`}},
	}
	r := EventResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(r.Validate(validEvent(tc.mutate)))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	changed := validEvent(func(ev *eventsv1.Event) { ev.Note = "other" })
	if diff := cmp.Diff([]string{`message: Invalid value: "other": field is immutable`}, errStrings(r.ValidateUpdate(changed, validEvent(nil)))); diff != "" {
		t.Errorf("update errors (-want +got):\n%s", diff)
	}
}

func TestStorageView(t *testing.T) {
	r := EventResource()
	in := makeEvent(nil)
	stored := r.Storage.ToStorage(in)
	core, ok := stored.(*corev1.Event)
	if !ok {
		t.Fatalf("stored %T, want *v1.Event", stored)
	}
	if diff := cmp.Diff(in, r.Storage.FromStorage(core)); diff != "" {
		t.Errorf("round trip through storage (-want +got):\n%s", diff)
	}
	if r.Storage.GVR.Resource != "events" || r.Storage.GVR.Group != "" || r.Storage.GVR.Version != "v1" {
		t.Errorf("storage GVR = %v", r.Storage.GVR)
	}
	if r.GVR().Group != "events.k8s.io" {
		t.Errorf("GVR = %v", r.GVR())
	}
}

func TestTableAndFields(t *testing.T) {
	r := EventResource()
	want := []interface{}{"1s", "Normal", "Scheduled", "pod/web-0", "spec", "sched, h", "Assigned default/web-0 to node-1", "10m", int64(4), "web-0.1811"}
	if diff := cmp.Diff(want, r.Row(makeEvent(nil), testNow)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	if len(r.Columns) != len(want) {
		t.Errorf("%d columns for %d cells", len(r.Columns), len(want))
	}
	wantFields := fields.Set{
		"regarding.kind": "Pod", "regarding.namespace": "default", "regarding.name": "web-0", "regarding.uid": "u1",
		"regarding.apiVersion": "v1", "regarding.resourceVersion": "", "regarding.fieldPath": "spec",
		"reason": "Scheduled", "reportingController": "example.com/ctl", "type": "Normal",
	}
	if diff := cmp.Diff(wantFields, r.Fields(makeEvent(nil))); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

func TestHooksTolerateNilAndForeignObjects(t *testing.T) {
	r := EventResource()
	var nilEvent *eventsv1.Event
	for _, obj := range []runtime.Object{nilEvent, &corev1.Pod{}} {
		r.Validate(obj)
		r.ValidateUpdate(obj, obj)
		r.Row(obj, testNow)
		r.Fields(obj)
		r.Storage.ToStorage(obj)
		r.Storage.FromStorage(obj)
	}
}
