// Package netpol holds the NetworkPolicy benchmarks (issue 19). The cluster ones here
// (`make bench-netpol`, as root) start a real `tranche up`: programming latency (a policy
// created or deleted, a pod relabelled → the change holds on every node, seen from
// outside by connections that flip) and the data path (wrk requests/s between two pods
// with 0, 100 and 1,000 policies in the cluster, 10 of them selecting the server). The
// full-sync benchmark beside them (fullsync*_test.go) runs without a cluster. Nothing in
// it is a timed assertion. See README.md.
package netpol
