// Package proxy benchmarks the service proxy against the kernel: full syncs of 1,000
// and 10,000 services into a fresh network namespace through real nft, next to what
// nft alone takes to load the same ruleset and a kube-proxy-shaped one, and adding one
// service to the largest table; and the three proxy modes side by side (issue 18): each
// mode's sync beside its kernel interface alone, and a new connection's first-packet cost
// as the services grow. See README.md.
package proxy
