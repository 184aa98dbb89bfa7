// Package netprog holds the proxy's network programming benchmark (`make bench-netprog`,
// as root): on a fresh `tranche up --nodes 3`, the time from a pod turning Ready to a
// connection through its Service's ClusterIP reaching it from every node, p50/p99 over
// 200 changes, beside the goal and the proxies' own
// kubeproxy_network_programming_duration_seconds. Nothing in it is a timed assertion.
// See README.md.
package netprog
