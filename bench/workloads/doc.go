// Package workloads holds the workload controllers' benchmark (`make bench-workloads`,
// root): a Deployment scaled from 0 to 300 replicas on a 3-node `tranche up`, timed to
// all pods Ready and counted in API writes per pod, beside the same 300 pods created
// directly by a client and the minimum number of writes a pod needs; and a DaemonSet's
// convergence after `tranche node add`, beside a bare pod started on the same new node.
// Every figure is printed with its reference as a ratio; nothing in it is a timed
// assertion. See README.md.
package workloads
