package events

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
)

// ToCore converts an events.k8s.io/v1 Event into the stored core/v1 shape: regarding
// becomes involvedObject, note message, reportingController the core field of the same
// name (JSON reportingComponent), and the deprecated* fields their core originals.
// A nil event converts to nil.
func ToCore(in *eventsv1.Event) *corev1.Event {
	if in == nil {
		return nil
	}
	out := &corev1.Event{
		TypeMeta:            metaCore,
		ObjectMeta:          *in.ObjectMeta.DeepCopy(),
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Action:              in.Action,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	if in.Related != nil {
		r := *in.Related
		out.Related = &r
	}
	return out
}

// FromCore converts a stored core/v1 Event into events.k8s.io/v1, the inverse of
// ToCore. A nil event converts to nil.
func FromCore(in *corev1.Event) *eventsv1.Event {
	if in == nil {
		return nil
	}
	out := &eventsv1.Event{
		TypeMeta:                 metaEvents,
		ObjectMeta:               *in.ObjectMeta.DeepCopy(),
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	if in.Related != nil {
		r := *in.Related
		out.Related = &r
	}
	return out
}
