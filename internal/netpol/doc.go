// Package netpol enforces networking.k8s.io/v1 NetworkPolicies on a node: it compiles
// policies, pods and namespaces into a model (which local pods are isolated, which peers
// and ports each rule allows), kept up to date one change at a time, and renders that
// model into the node's table `ip tranche-netpol`: full syncs as one nested nft script,
// partial syncs as knftables transactions of what changed. Explain decides one
// connection from the same model.
package netpol
