// Package endpointslice is the EndpointSlice controller: for every Service
// with a selector it keeps EndpointSlices (managed-by
// endpointslice-controller.k8s.io) listing the matching pods with their
// ready, serving and terminating conditions, packed at most
// MaxEndpointsPerSlice per slice the way Kubernetes packs them.
//
// The work per Service is split in two: reconcile is a pure function from
// snapshots (service, pods, nodes, existing slices) to a plan of creates,
// updates and deletes, and apply performs that plan through client-go,
// records metrics and, on failure, a Warning event on the Service.
package endpointslice
