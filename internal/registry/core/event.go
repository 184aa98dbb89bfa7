package core

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// Length limits Kubernetes puts on new-style events (those with eventTime).
const (
	eventReportingInstanceLimit = 128
	eventActionLimit            = 128
	eventReasonLimit            = 128
	eventNoteLimit              = 1024
)

// EventResource returns the core/v1 Event resource: Kubernetes' legacy event
// validation, its field selectors and kubectl's events table.
func EventResource() registry.Resource {
	return registry.Resource{
		GVK:        schema.GroupVersionKind{Version: "v1", Kind: "Event"},
		Plural:     "events",
		Singular:   "event",
		ShortNames: []string{"ev"},
		Namespaced: true,
		New:        func() runtime.Object { return &v1.Event{} },
		NewList:    func() runtime.Object { return &v1.EventList{} },
		Validate: func(obj runtime.Object) field.ErrorList {
			return ValidateEvent(eventFrom(obj), false)
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return ValidateEventUpdate(eventFrom(obj), eventFrom(old), false)
		},
		Columns: EventColumns(),
		Row: registry.FuncWith(func(ev *v1.Event, now time.Time) []interface{} {
			return EventRow(ev, now)
		}),
		Fields: func(obj runtime.Object) fields.Set {
			return EventFields(eventFrom(obj))
		},
	}
}

func eventFrom(obj runtime.Object) *v1.Event {
	ev, _ := obj.(*v1.Event)
	return ev
}

// ValidateEvent checks an event on create. Every event passes Kubernetes' legacy rules
// (namespace agreement with the involved object; for events with eventTime, reporting
// controller and instance, action, reason and length limits). strict adds the rules of
// events.k8s.io/v1 and newer: eventTime and a Normal or Warning type required, a valid
// series, and the deprecated timestamps, count and source unset.
func ValidateEvent(ev *v1.Event, strict bool) field.ErrorList {
	if ev == nil {
		return nil
	}
	errs := eventValidateLegacy(ev)
	if !strict {
		return errs
	}
	errs = append(errs, eventValidateSeries(ev)...)
	if ev.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if ev.Type != v1.EventTypeNormal && ev.Type != v1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", ev.Type)))
	}
	if !ev.FirstTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("firstTimestamp"), "", "needs to be unset"))
	}
	if !ev.LastTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("lastTimestamp"), "", "needs to be unset"))
	}
	if ev.Count != 0 {
		errs = append(errs, field.Invalid(field.NewPath("count"), "", "needs to be unset"))
	}
	if ev.Source.Component != "" || ev.Source.Host != "" {
		errs = append(errs, field.Invalid(field.NewPath("source"), "", "needs to be unset"))
	}
	return errs
}

// ValidateEventUpdate checks an event update: the legacy rules always, and with strict
// (events.k8s.io/v1) also that only the series and metadata change.
func ValidateEventUpdate(ev, old *v1.Event, strict bool) field.ErrorList {
	if ev == nil {
		return nil
	}
	errs := eventValidateLegacy(ev)
	if !strict || old == nil {
		return errs
	}
	if !apiequality.Semantic.DeepEqual(ev.Series, old.Series) {
		errs = append(errs, eventValidateSeries(ev)...)
	}
	for _, f := range []struct {
		name     string
		new, old interface{}
	}{
		{"involvedObject", ev.InvolvedObject, old.InvolvedObject},
		{"reason", ev.Reason, old.Reason},
		{"message", ev.Message, old.Message},
		{"source", ev.Source, old.Source},
		{"firstTimestamp", ev.FirstTimestamp, old.FirstTimestamp},
		{"lastTimestamp", ev.LastTimestamp, old.LastTimestamp},
		{"count", ev.Count, old.Count},
		// Kubernetes checks reason twice, so a changed reason is reported twice.
		{"reason", ev.Reason, old.Reason},
		{"type", ev.Type, old.Type},
		{"eventTime", ev.EventTime, old.EventTime},
		{"action", ev.Action, old.Action},
		{"related", ev.Related, old.Related},
		{"reportingController", ev.ReportingController, old.ReportingController},
		{"reportingInstance", ev.ReportingInstance, old.ReportingInstance},
	} {
		errs = append(errs, apivalidation.ValidateImmutableField(f.new, f.old, field.NewPath(f.name))...)
	}
	return errs
}

func eventValidateSeries(ev *v1.Event) field.ErrorList {
	if ev.Series == nil {
		return nil
	}
	var errs field.ErrorList
	if ev.Series.Count < 2 {
		errs = append(errs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
	}
	if ev.Series.LastObservedTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("series.lastObservedTime"), ""))
	}
	return errs
}

func eventValidateLegacy(ev *v1.Event) field.ErrorList {
	var errs field.ErrorList
	nsPath := field.NewPath("involvedObject", "namespace")
	if ev.EventTime.IsZero() {
		if ev.InvolvedObject.Namespace == "" {
			// Old clients record cluster-scoped objects' events in "default".
			if ev.Namespace != metav1.NamespaceNone && ev.Namespace != metav1.NamespaceDefault {
				errs = append(errs, field.Invalid(nsPath, ev.InvolvedObject.Namespace, "does not match event.namespace"))
			}
		} else if ev.Namespace != ev.InvolvedObject.Namespace {
			errs = append(errs, field.Invalid(nsPath, ev.InvolvedObject.Namespace, "does not match event.namespace"))
		}
	} else {
		if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
			errs = append(errs, field.Invalid(nsPath, ev.InvolvedObject.Namespace, "does not match event.namespace"))
		}
		if ev.ReportingController == "" {
			errs = append(errs, field.Required(field.NewPath("reportingController"), ""))
		}
		for _, msg := range utilvalidation.IsQualifiedName(ev.ReportingController) {
			errs = append(errs, field.Invalid(field.NewPath("reportingController"), ev.ReportingController, msg))
		}
		errs = append(errs, eventRequiredWithLimit(ev.ReportingInstance, "reportingInstance", eventReportingInstanceLimit)...)
		errs = append(errs, eventRequiredWithLimit(ev.Action, "action", eventActionLimit)...)
		errs = append(errs, eventRequiredWithLimit(ev.Reason, "reason", eventReasonLimit)...)
		if len(ev.Message) > eventNoteLimit {
			errs = append(errs, field.Invalid(field.NewPath("message"), "", fmt.Sprintf("can have at most %v characters", eventNoteLimit)))
		}
	}
	for _, msg := range utilvalidation.IsDNS1123Subdomain(ev.Namespace) {
		errs = append(errs, field.Invalid(field.NewPath("namespace"), ev.Namespace, msg))
	}
	return errs
}

func eventRequiredWithLimit(value, name string, limit int) field.ErrorList {
	var errs field.ErrorList
	if value == "" {
		errs = append(errs, field.Required(field.NewPath(name), ""))
	}
	if len(value) > limit {
		errs = append(errs, field.Invalid(field.NewPath(name), "", fmt.Sprintf("can have at most %v characters", limit)))
	}
	return errs
}

// EventFields returns the core/v1 event fields usable in field selectors, under
// Kubernetes' names (reportingComponent is the JSON name of reportingController; source
// falls back to the reporting controller for new-style events).
func EventFields(ev *v1.Event) fields.Set {
	if ev == nil {
		return fields.Set{}
	}
	source := ev.Source.Component
	if source == "" {
		source = ev.ReportingController
	}
	return fields.Set{
		"involvedObject.kind":            ev.InvolvedObject.Kind,
		"involvedObject.namespace":       ev.InvolvedObject.Namespace,
		"involvedObject.name":            ev.InvolvedObject.Name,
		"involvedObject.uid":             string(ev.InvolvedObject.UID),
		"involvedObject.apiVersion":      ev.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": ev.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       ev.InvolvedObject.FieldPath,
		"reason":                         ev.Reason,
		"reportingComponent":             ev.ReportingController,
		"source":                         source,
		"type":                           ev.Type,
	}
}

// EventColumns returns kubectl's event table: LAST SEEN TYPE REASON OBJECT MESSAGE, and
// with -o wide also SUBOBJECT SOURCE FIRST SEEN COUNT NAME, in the printer's order.
func EventColumns() []metav1.TableColumnDefinition {
	doc := v1.Event{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Last Seen", Type: "string", Description: doc["lastTimestamp"]},
		{Name: "Type", Type: "string", Description: doc["type"]},
		{Name: "Reason", Type: "string", Description: doc["reason"]},
		{Name: "Object", Type: "string", Description: doc["involvedObject"]},
		{Name: "Subobject", Type: "string", Priority: 1, Description: v1.ObjectReference{}.SwaggerDoc()["fieldPath"]},
		{Name: "Source", Type: "string", Priority: 1, Description: doc["source"]},
		{Name: "Message", Type: "string", Description: doc["message"]},
		{Name: "First Seen", Type: "string", Priority: 1, Description: doc["firstTimestamp"]},
		{Name: "Count", Type: "string", Priority: 1, Description: doc["count"]},
		{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	}
}

// EventRow returns the cells of EventColumns for ev, computed like kubectl's printer:
// first seen falls back to eventTime, last seen to first seen (or the series' last
// observation), and a singleton new-style event counts 1.
func EventRow(ev *v1.Event, now time.Time) []interface{} {
	first := registry.HumanAge(ev.FirstTimestamp, now)
	if ev.FirstTimestamp.IsZero() {
		first = registry.HumanAge(metav1.Time{Time: ev.EventTime.Time}, now)
	}
	last := registry.HumanAge(ev.LastTimestamp, now)
	if ev.LastTimestamp.IsZero() {
		last = first
	}
	count := ev.Count
	if ev.Series != nil {
		last = registry.HumanAge(metav1.Time{Time: ev.Series.LastObservedTime.Time}, now)
		count = ev.Series.Count
	} else if count == 0 {
		count = 1
	}
	target := strings.ToLower(ev.InvolvedObject.Kind)
	if ev.InvolvedObject.Name != "" {
		target += "/" + ev.InvolvedObject.Name
	}
	return []interface{}{last, ev.Type, ev.Reason, target, ev.InvolvedObject.FieldPath,
		eventSource(ev), strings.TrimSpace(ev.Message), first, int64(count), ev.Name}
}

// eventSource is the SOURCE cell: "component, host", each falling back to the
// reporting controller and instance.
func eventSource(ev *v1.Event) string {
	component, instance := ev.Source.Component, ev.Source.Host
	if component == "" {
		component = ev.ReportingController
	}
	if instance == "" {
		instance = ev.ReportingInstance
	}
	if instance == "" {
		return component
	}
	return component + ", " + instance
}
