package core

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// makeEvent returns a valid legacy (client-go recorder style) event about pod web-0,
// after mutate.
func makeEvent(mutate func(*v1.Event)) *v1.Event {
	ev := &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web-0.1811", Namespace: "default", CreationTimestamp: svcTestCreated},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-0", UID: "u1", APIVersion: "v1", FieldPath: "spec.containers{app}"},
		Reason:         "Started",
		Message:        "Started container app\n",
		Source:         v1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: metav1.NewTime(svcTestNow.Add(-10 * time.Minute)),
		LastTimestamp:  metav1.NewTime(svcTestNow.Add(-2 * time.Minute)),
		Count:          3,
		Type:           v1.EventTypeNormal,
	}
	if mutate != nil {
		mutate(ev)
	}
	return ev
}

// newStyle turns ev into an events.k8s.io-style event (eventTime, reporting fields).
func newStyle(ev *v1.Event) {
	ev.EventTime = metav1.NewMicroTime(svcTestNow.Add(-time.Minute))
	ev.FirstTimestamp, ev.LastTimestamp, ev.Count = metav1.Time{}, metav1.Time{}, 0
	ev.Source = v1.EventSource{}
	ev.ReportingController, ev.ReportingInstance, ev.Action = "example.com/ctl", "ctl-1", "Starting"
}

func TestValidateEvent(t *testing.T) {
	tests := []struct {
		name   string
		strict bool
		mutate func(*v1.Event)
		want   []string
	}{
		{name: "legacy valid", want: []string{}},
		{name: "legacy namespace mismatch", mutate: func(ev *v1.Event) { ev.InvolvedObject.Namespace = "other" },
			want: []string{`involvedObject.namespace: Invalid value: "other": does not match event.namespace`}},
		{name: "cluster-scoped object in default", mutate: func(ev *v1.Event) { ev.InvolvedObject = v1.ObjectReference{Kind: "Node", Name: "n1"} }, want: []string{}},
		{name: "cluster-scoped object elsewhere", mutate: func(ev *v1.Event) {
			ev.InvolvedObject = v1.ObjectReference{Kind: "Node", Name: "n1"}
			ev.Namespace = "apps"
		}, want: []string{`involvedObject.namespace: Invalid value: "": does not match event.namespace`}},
		{name: "new style valid", mutate: newStyle, want: []string{}},
		{name: "new style needs reporting fields", mutate: func(ev *v1.Event) {
			newStyle(ev)
			ev.ReportingController, ev.ReportingInstance, ev.Action, ev.Reason = "", "", "", ""
			ev.Message = strings.Repeat("m", 1025)
		}, want: []string{
			"reportingController: Required value",
			`reportingController: Invalid value: "": name part must be non-empty`,
			`reportingController: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			"reportingInstance: Required value",
			"action: Required value",
			"reason: Required value",
			`message: Invalid value: "": can have at most 1024 characters`,
		}},
		{name: "strict needs eventTime and type", strict: true, mutate: func(ev *v1.Event) { ev.Type = "Info" }, want: []string{
			// Without eventTime the legacy rules skip the reporting fields.
			"eventTime: Required value",
			`type: Invalid value: "": has invalid value: Info`,
			`firstTimestamp: Invalid value: "": needs to be unset`,
			`lastTimestamp: Invalid value: "": needs to be unset`,
			`count: Invalid value: "": needs to be unset`,
			`source: Invalid value: "": needs to be unset`,
		}},
		{name: "strict series", strict: true, mutate: func(ev *v1.Event) {
			newStyle(ev)
			ev.Series = &v1.EventSeries{Count: 1}
		}, want: []string{`series.count: Invalid value: "": should be at least 2`, "series.lastObservedTime: Required value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := svcErrs(ValidateEvent(makeEvent(tc.mutate), tc.strict))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateEventUpdate(t *testing.T) {
	old := makeEvent(newStyle)
	changed := makeEvent(func(ev *v1.Event) { newStyle(ev); ev.Reason = "Restarted"; ev.Message = "again" })
	if errs := ValidateEventUpdate(changed, old, false); len(errs) != 0 {
		t.Errorf("core/v1 updates may change anything: %v", errs)
	}
	want := []string{`reason: Invalid value: "Restarted": field is immutable`, `message: Invalid value: "again": field is immutable`, `reason: Invalid value: "Restarted": field is immutable`}
	if diff := cmp.Diff(want, svcErrs(ValidateEventUpdate(changed, old, true))); diff != "" {
		t.Errorf("strict errors (-want +got):\n%s", diff)
	}
	series := makeEvent(func(ev *v1.Event) {
		newStyle(ev)
		ev.Series = &v1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(svcTestNow)}
	})
	if errs := ValidateEventUpdate(series, old, true); len(errs) != 0 {
		t.Errorf("a series update is allowed: %v", errs)
	}
}

func TestEventRow(t *testing.T) {
	tests := []struct {
		name string
		ev   *v1.Event
		want []interface{}
	}{{
		name: "legacy",
		ev:   makeEvent(nil),
		want: []interface{}{"2m", "Normal", "Started", "pod/web-0", "spec.containers{app}", "kubelet, node-1", "Started container app", "10m", int64(3), "web-0.1811"},
	}, {
		name: "new style singleton",
		ev:   makeEvent(newStyle),
		want: []interface{}{"60s", "Normal", "Started", "pod/web-0", "spec.containers{app}", "example.com/ctl, ctl-1", "Started container app", "60s", int64(1), "web-0.1811"},
	}, {
		name: "series",
		ev: makeEvent(func(ev *v1.Event) {
			newStyle(ev)
			ev.Series = &v1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(svcTestNow.Add(-5 * time.Second))}
		}),
		want: []interface{}{"5s", "Normal", "Started", "pod/web-0", "spec.containers{app}", "example.com/ctl, ctl-1", "Started container app", "60s", int64(7), "web-0.1811"},
	}, {
		name: "no times, no name",
		ev: makeEvent(func(ev *v1.Event) {
			ev.FirstTimestamp, ev.LastTimestamp = metav1.Time{}, metav1.Time{}
			ev.InvolvedObject = v1.ObjectReference{Kind: "Node"}
			ev.Source = v1.EventSource{Component: "controller"}
		}),
		want: []interface{}{"<unknown>", "Normal", "Started", "node", "", "controller", "Started container app", "<unknown>", int64(3), "web-0.1811"},
	}}
	r := EventResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, r.Row(tc.ev, svcTestNow)); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
	var names []string
	for _, c := range r.Columns {
		if c.Priority == 0 {
			names = append(names, strings.ToUpper(c.Name))
		}
	}
	if diff := cmp.Diff([]string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}, names); diff != "" {
		t.Errorf("default columns (-want +got):\n%s", diff)
	}
}

func TestEventFields(t *testing.T) {
	want := fields.Set{
		"involvedObject.kind": "Pod", "involvedObject.namespace": "default", "involvedObject.name": "web-0",
		"involvedObject.uid": "u1", "involvedObject.apiVersion": "v1", "involvedObject.resourceVersion": "",
		"involvedObject.fieldPath": "spec.containers{app}", "reason": "Started", "reportingComponent": "example.com/ctl",
		"source": "example.com/ctl", "type": "Normal",
	}
	if diff := cmp.Diff(want, EventResource().Fields(makeEvent(newStyle))); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	if got := EventFields(makeEvent(nil))["source"]; got != "kubelet" {
		t.Errorf("legacy source = %q", got)
	}
}
