// Package dns is tranche's cluster DNS: a server that answers the names of the
// Kubernetes DNS-Based Service Discovery specification (schema 1.1.0) for one cluster
// zone from a read-only, indexed view of Services, EndpointSlices, Namespaces and Pods
// (Cache), answers the reverse zones of the service and pod CIDRs (reverse.go: no
// upstream can know those addresses), forwards every other name to upstream
// resolvers through a bounded cache, and answers a pod's search-expanded external
// names on the first query (autopath).
//
// The answer logic (zone.go) is pure: a name and a Cache in, resource records out.
// The handler (handler.go) adds the protocol: validation of the request, rcodes,
// negative answers with the zone's SOA, EDNS and truncation, forwarding and metrics.
// Run (run.go) wires informers, the UDP and TCP listeners and the HTTP endpoint
// (/metrics, /ready, /health) for `tranche dns`.
package dns
