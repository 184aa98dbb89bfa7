// Package tombstone opens the objects informer event handlers receive: every component
// that watches through client-go informers (controllers, scheduler, agent, proxy, the API
// server's own caches) unwraps a delete it learned of only by relisting the same way.
package tombstone

import "k8s.io/client-go/tools/cache"

// As is obj as a T, with a cache.DeletedFinalStateUnknown tombstone (a delete the
// informer saw only by relisting) opened; the zero T when obj is neither a T nor a
// tombstone holding one.
func As[T any](obj any) T {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	v, _ := obj.(T)
	return v
}
