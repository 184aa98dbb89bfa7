package core

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// makeNode returns a registered, Ready node, changed by mutate.
func makeNode(mutate func(*v1.Node)) *v1.Node {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", CreationTimestamp: metav1.NewTime(testNow.Add(-49 * time.Hour))},
		Spec:       v1.NodeSpec{PodCIDR: "10.244.1.0/24"},
		Status: v1.NodeStatus{
			Capacity:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourcePods: resource.MustParse("110")},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.240.0.2"}, {Type: v1.NodeHostName, Address: "node-1"}},
			NodeInfo: v1.NodeSystemInfo{KubeletVersion: "v1.32.0-tranche", OSImage: "Debian GNU/Linux 13 (trixie)",
				KernelVersion: "6.12.0", ContainerRuntimeVersion: "tranche://0.1"},
		},
	}
	if mutate != nil {
		mutate(node)
	}
	return node
}

func TestNodeCreate(t *testing.T) {
	res := NodeResource()
	node := makeNode(nil)
	if res.PrepareForCreate != nil {
		res.PrepareForCreate(node)
	}
	res.Default(node)
	if d := cmp.Diff([]string{"10.244.1.0/24"}, node.Spec.PodCIDRs); d != "" {
		t.Errorf("podCIDRs (-want +got):\n%s", d)
	}
	if d := cmp.Diff(node.Status.Capacity, node.Status.Allocatable); d != "" {
		t.Errorf("allocatable defaults to capacity (-want +got):\n%s", d)
	}
	if len(node.Status.Conditions) != 1 {
		t.Errorf("create dropped the registered status: %+v", node.Status)
	}
	if got := errString(res.Validate(node)); got != "" {
		t.Errorf("Validate: %s", got)
	}
}

func TestNodeValidate(t *testing.T) {
	tests := []struct {
		name   string
		old    func(*v1.Node)
		mutate func(*v1.Node)
		want   string
	}{{
		name:   "taint effect required",
		mutate: func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "gpu"}} },
		want:   "spec.taints[0].effect: Required value",
	}, {
		name:   "taint effect unknown",
		mutate: func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "dedicated", Effect: "Never"}} },
		want:   `spec.taints[0].effect: Unsupported value: "Never": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`,
	}, {
		name: "duplicate taint",
		mutate: func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "a", Effect: v1.TaintEffectNoSchedule}, {Key: "a", Value: "x", Effect: v1.TaintEffectNoSchedule}}
		},
		want: `spec.taints[1]: Duplicate value: {"key":"a","value":"x","effect":"NoSchedule"}: taints must be unique by key and effect pair`,
	}, {
		name:   "podCIDR change",
		mutate: func(n *v1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.2.0/24", nil },
		want:   `spec.podCIDRs: Forbidden: node updates may not change podCIDR except from "" to valid`,
	}, {
		name:   "podCIDR set once",
		old:    func(n *v1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = "", nil },
		mutate: func(n *v1.Node) {},
	}, {
		name:   "providerID change",
		old:    func(n *v1.Node) { n.Spec.ProviderID = "tranche://node-1" },
		mutate: func(n *v1.Node) { n.Spec.ProviderID = "tranche://other" },
		want:   `spec.providerID: Forbidden: node updates may not change providerID except from "" to valid`,
	}, {
		name:   "cordon allowed",
		mutate: func(n *v1.Node) { n.Spec.Unschedulable = true },
	}, {
		name:   "invalid CIDR",
		old:    func(n *v1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = "", nil },
		mutate: func(n *v1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.1.0/33", nil },
		want:   `spec.podCIDRs[0]: Invalid value: "10.244.1.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`,
	}}
	res := NodeResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := makeNode(tc.old)
			res.Default(old)
			node := old.DeepCopy()
			tc.mutate(node)
			res.Default(node)
			if got := errString(res.ValidateUpdate(node, old)); got != tc.want {
				t.Errorf("ValidateUpdate:\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

func TestNodeRow(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.Node)
		want   []interface{}
	}{{
		name:   "ready worker",
		mutate: func(*v1.Node) {},
		want:   []interface{}{"node-1", "Ready", "<none>", "2d1h", "v1.32.0-tranche", "10.240.0.2", "<none>", "Debian GNU/Linux 13 (trixie)", "6.12.0", "tranche://0.1"},
	}, {
		name: "not ready, cordoned, control plane",
		mutate: func(n *v1.Node) {
			n.Status.Conditions[0].Status = v1.ConditionUnknown
			n.Spec.Unschedulable = true
			n.Labels = map[string]string{"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/etcd": "", "kubernetes.io/role": "master"}
		},
		want: []interface{}{"node-1", "NotReady,SchedulingDisabled", "control-plane,etcd,master", "2d1h", "v1.32.0-tranche", "10.240.0.2", "<none>", "Debian GNU/Linux 13 (trixie)", "6.12.0", "tranche://0.1"},
	}, {
		name: "never reported",
		mutate: func(n *v1.Node) {
			n.Status = v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeExternalIP, Address: "203.0.113.9"}}}
		},
		want: []interface{}{"node-1", "Unknown", "<none>", "2d1h", "", "<none>", "203.0.113.9", "<unknown>", "<unknown>", "<unknown>"},
	}}
	res := NodeResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := makeNode(tc.mutate)
			if d := cmp.Diff(tc.want, res.Row(node, testNow)); d != "" {
				t.Errorf("Row (-want +got):\n%s", d)
			}
		})
	}
	if got := res.Fields(makeNode(func(n *v1.Node) { n.Spec.Unschedulable = true }))["spec.unschedulable"]; got != "true" {
		t.Errorf("spec.unschedulable field = %q", got)
	}
}
