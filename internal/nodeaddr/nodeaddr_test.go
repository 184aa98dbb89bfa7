package nodeaddr

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestKubelet(t *testing.T) {
	node := func(port int32, addrs ...v1.NodeAddress) *v1.Node {
		n := &v1.Node{Status: v1.NodeStatus{Addresses: addrs}}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
		return n
	}
	for name, tc := range map[string]struct {
		node *v1.Node
		want string
		ok   bool
	}{
		"internal first":           {node(0, v1.NodeAddress{Type: v1.NodeHostName, Address: "n1"}, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "10.240.0.2"}), "10.240.0.2:10250", true},
		"external before hostname": {node(0, v1.NodeAddress{Type: v1.NodeHostName, Address: "n1"}, v1.NodeAddress{Type: v1.NodeExternalIP, Address: "192.0.2.1"}), "192.0.2.1:10250", true},
		"published port":           {node(12345, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "fd00::2"}), "[fd00::2]:12345", true},
		"no address":               {node(0), "", false},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := Kubelet(tc.node)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Kubelet() = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
