// Package events serves events.k8s.io/v1 Events as a view over the stored core/v1
// Events, converting between the two shapes the way Kubernetes does, so both APIs see
// the same objects.
package events
