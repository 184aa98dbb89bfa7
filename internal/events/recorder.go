// Package events gives components an event recorder that writes core/v1 Events through
// the API, so `kubectl get events` and `kubectl describe` show what they did.
package events

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// NewRecorder returns a recorder reporting as component, and starts the broadcaster
// that writes its events; the broadcaster stops when ctx ends. Repeated events are
// aggregated by client-go (count and lastTimestamp), as on a real cluster.
func NewRecorder(ctx context.Context, client kubernetes.Interface, component string) record.EventRecorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	go func() {
		<-ctx.Done()
		b.Shutdown()
	}()
	return b.NewRecorder(scheme.Scheme, v1.EventSource{Component: component})
}
