package events

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/registry/core"
)

var (
	metaCore   = metav1.TypeMeta{APIVersion: "v1", Kind: "Event"}
	metaEvents = metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"}
)

// EventResource returns events.k8s.io/v1 Event, stored as core/v1 events. Validation is
// Kubernetes' strict events.k8s.io rules, run on the core shape as Kubernetes does, so
// error paths use core field names (message for note); the table is the core events
// table.
func EventResource() registry.Resource {
	return registry.Resource{
		GVK:        schema.GroupVersionKind{Group: "events.k8s.io", Version: "v1", Kind: "Event"},
		Plural:     "events",
		Singular:   "event",
		ShortNames: []string{"ev"},
		Namespaced: true,
		New:        func() runtime.Object { return &eventsv1.Event{} },
		NewList:    func() runtime.Object { return &eventsv1.EventList{} },
		Validate: func(obj runtime.Object) field.ErrorList {
			return core.ValidateEvent(ToCore(eventFrom(obj)), true)
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return core.ValidateEventUpdate(ToCore(eventFrom(obj)), ToCore(eventFrom(old)), true)
		},
		Columns: core.EventColumns(),
		Row: func(obj runtime.Object, now time.Time) []interface{} {
			ev := ToCore(eventFrom(obj))
			if ev == nil {
				return nil
			}
			return core.EventRow(ev, now)
		},
		Fields: func(obj runtime.Object) fields.Set {
			return eventFields(eventFrom(obj))
		},
		Storage: &registry.StorageView{
			GVR: schema.GroupVersionResource{Version: "v1", Resource: "events"},
			ToStorage: func(obj runtime.Object) runtime.Object {
				if ev := ToCore(eventFrom(obj)); ev != nil {
					return ev
				}
				return obj
			},
			FromStorage: func(obj runtime.Object) runtime.Object {
				ev, _ := obj.(*corev1.Event)
				if out := FromCore(ev); out != nil {
					return out
				}
				return obj
			},
		},
	}
}

func eventFrom(obj runtime.Object) *eventsv1.Event {
	ev, _ := obj.(*eventsv1.Event)
	return ev
}

// eventFields are the field-selector names events.k8s.io/v1 accepts (Kubernetes maps
// them onto the core names; here they are computed directly).
func eventFields(ev *eventsv1.Event) fields.Set {
	if ev == nil {
		return fields.Set{}
	}
	return fields.Set{
		"regarding.kind":            ev.Regarding.Kind,
		"regarding.namespace":       ev.Regarding.Namespace,
		"regarding.name":            ev.Regarding.Name,
		"regarding.uid":             string(ev.Regarding.UID),
		"regarding.apiVersion":      ev.Regarding.APIVersion,
		"regarding.resourceVersion": ev.Regarding.ResourceVersion,
		"regarding.fieldPath":       ev.Regarding.FieldPath,
		"reason":                    ev.Reason,
		"reportingController":       ev.ReportingController,
		"type":                      ev.Type,
	}
}
