// Package datapath holds the proxy's data-path benchmark (`make bench-datapath`, as
// root): requests/s with wrk from one pod to another, through the Service's ClusterIP
// (the proxy's DNAT) and straight to the pod IP, in the same run on a fresh
// `tranche up --nodes 2 --proxy-mode M` for the nftables and iptables modes in turn,
// printed as ratios side by side beside the goal (>= 0.95). See README.md.
package datapath
