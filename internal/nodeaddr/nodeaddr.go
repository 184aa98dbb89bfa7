// Package nodeaddr says where a node's kubelet (tranche's agent) answers, for the API
// server's streaming and proxying and for its metrics scraper alike.
package nodeaddr

import (
	"net"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// DefaultKubeletPort is the kubelet's port when the node does not publish one.
const DefaultKubeletPort = 10250

// Kubelet is host:port of the node's kubelet: its InternalIP, else ExternalIP, else
// hostname (the order kube-apiserver's and metrics-server's defaults use) and its
// published kubelet port (DefaultKubeletPort when none). ok is false when the node
// publishes no address of those types.
func Kubelet(n *v1.Node) (hostPort string, ok bool) {
	for _, want := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP, v1.NodeHostName} {
		for _, a := range n.Status.Addresses {
			if a.Type == want && a.Address != "" {
				port := int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)
				if port == 0 {
					port = DefaultKubeletPort
				}
				return net.JoinHostPort(a.Address, strconv.Itoa(port)), true
			}
		}
	}
	return "", false
}
