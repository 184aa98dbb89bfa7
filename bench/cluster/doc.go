// Package cluster holds the local cluster's benchmark (`make bench-cluster`, as root):
// the time `tranche up --nodes 3 --detach` takes to a ready cluster, pod start-up
// latency (created → Ready, no probes) for 100 pods on 3 nodes, and the idle memory of
// a 1-node cluster (the up process and its agents). Every figure is printed beside its
// goal as a ratio; nothing in it is a timed assertion. See README.md.
package cluster
