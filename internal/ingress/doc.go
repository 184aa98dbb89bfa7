// Package ingress is tranche's Ingress controller: it reads networking.k8s.io/v1 Ingresses
// of its classes, the Services and EndpointSlices they name and the TLS Secrets they use,
// builds a routing Table (a pure function of those objects, see Build), and serves HTTP and
// HTTPS through a reverse proxy that balances each request across the ready endpoints of
// the backend's EndpointSlices (never through the ClusterIP).
//
// Matching rules, as documented for users:
//   - Host: an exact rule host wins over a "*.suffix" wildcard (which matches exactly one
//     more label), which wins over rules without a host. When the most specific host group
//     has no matching path, the next one is tried, because a rule without a host applies to
//     every host.
//   - Path: Exact compares the whole path; Prefix compares '/'-separated elements, so /foo
//     matches /foo, /foo/ and /foo/bar but not /foobar. ImplementationSpecific is treated as
//     Prefix. An Exact match beats any Prefix match; among Prefix matches the longest wins.
//   - No match: the oldest Ingress's spec.defaultBackend, else a 404 page of ours.
//   - Conflicts (same host, path and pathType; same TLS host; several default backends):
//     the oldest Ingress (creationTimestamp, then namespace/name) wins, and the others get a
//     Warning Event naming the winner.
//   - A backend whose Service or port is missing answers 503, with an Event on the Ingress;
//     a TLS Secret that is missing or invalid leaves the host on the fallback self-signed
//     certificate, with an Event.
//
// Serving: HTTP/1.1 connections, plain and TLS, start on a lean path (lean.go) that
// parses request heads in the connection's buffer and forwards the common exchange to
// kept backend connections itself; the first request it does not handle (HTTP/2 after
// ALPN, upgrades such as WebSocket, Expect: 100-continue, HTTP/1.0, heads over 8 kB)
// hands the connection to net/http's server and Proxy.ServeHTTP (httputil.ReverseProxy).
// Both paths share the backend connection pool, the retry rules, the access log and the
// metrics. A client that leaves while its request is in flight gets its backend
// connection closed, and the request is logged as 499 as nginx does (abort.go; net/http's
// server cancels the request of the general path); on the lean path an answer head over
// 64 kB gets 502 (see respHeadMax). The lean path is fenced by net/http (fence_test.go):
// what its parser accepts, net/http must read the same way (FuzzLeanParse,
// FuzzLeanChunked), and the same bytes, smuggling shapes included, must bring the backend
// the same requests through both paths (TestLeanMatchesNetHTTP); a head net/http would
// refuse is handed to it, which answers 400.
package ingress
