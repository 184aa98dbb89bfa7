// Package netpol enforces networking.k8s.io/v1 NetworkPolicies on a node: it compiles
// policies, pods and namespaces into a model (which local pods are isolated, which peers
// and ports each rule allows) and renders that model with knftables into the node's
// table `ip tranche-netpol`. Explain decides one connection from the same model.
package netpol
