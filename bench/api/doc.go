// Package api holds the API server's performance benchmark (`make bench-api`): create
// throughput against raw etcd puts, GET latency and LIST time with 10,000 stored pods,
// watch fan-out to 100 watchers, and the idle memory of `tranche server`. Every figure is
// printed beside its reference (a peer measured in the same run, or the goal) as a ratio;
// nothing in it is a timed assertion. See README.md for what each figure means.
package api
