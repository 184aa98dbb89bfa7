package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestFilters(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	cases := []struct {
		name   string
		filter func(*v1.Pod, *nodeInfo) []string
		pod    *v1.Pod
		node   *v1.Node
		bound  []*v1.Pod
		want   []string
	}{
		{
			name: "schedulable node", filter: filterUnschedulable,
			pod: makePod("ns", "p", nil), node: makeNode("n", nil),
		},
		{
			name: "cordoned node", filter: filterUnschedulable,
			pod:  makePod("ns", "p", nil),
			node: makeNode("n", func(n *v1.Node) { n.Spec.Unschedulable = true }),
			want: []string{reasonUnschedulable},
		},
		{
			name: "cordoned node, pod tolerates unschedulable", filter: filterUnschedulable,
			pod: makePod("ns", "p", func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Key: taintUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
			}),
			node: makeNode("n", func(n *v1.Node) { n.Spec.Unschedulable = true }),
		},
		{
			name: "not ready node counts as tainted not-ready", filter: filterTaints,
			pod: makePod("ns", "p", nil), node: makeNode("n", notReady),
			want: []string{"node(s) had untolerated taint {node.kubernetes.io/not-ready: }"},
		},
		{
			name: "node without conditions counts as not ready", filter: filterTaints,
			pod: makePod("ns", "p", nil), node: makeNode("n", func(n *v1.Node) { n.Status.Conditions = nil }),
			want: []string{"node(s) had untolerated taint {node.kubernetes.io/not-ready: }"},
		},
		{
			name: "unknown node counts as unreachable", filter: filterTaints,
			pod: makePod("ns", "p", nil),
			node: makeNode("n", func(n *v1.Node) {
				n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionUnknown}}
			}),
			want: []string{"node(s) had untolerated taint {node.kubernetes.io/unreachable: }"},
		},
		{
			name: "not ready node, pod tolerates not-ready", filter: filterTaints,
			pod: makePod("ns", "p", func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Key: taintNotReady, Operator: v1.TolerationOpExists}}
			}),
			node: makeNode("n", notReady),
		},
		{
			name: "first untolerated NoSchedule taint is named", filter: filterTaints,
			pod: makePod("ns", "p", func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Key: "a", Value: "1", Effect: v1.TaintEffectNoSchedule}}
			}),
			node: makeNode("n", func(n *v1.Node) {
				n.Spec.Taints = []v1.Taint{
					{Key: "soft", Value: "x", Effect: v1.TaintEffectPreferNoSchedule},
					{Key: "a", Value: "1", Effect: v1.TaintEffectNoSchedule},
					{Key: "b", Value: "2", Effect: v1.TaintEffectNoExecute},
					{Key: "c", Value: "3", Effect: v1.TaintEffectNoSchedule},
				}
			}),
			want: []string{"node(s) had untolerated taint {b: 2}"},
		},
		{
			name: "toleration with the wrong value does not tolerate", filter: filterTaints,
			pod: makePod("ns", "p", func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Key: "a", Operator: v1.TolerationOpEqual, Value: "2"}}
			}),
			node: makeNode("n", func(n *v1.Node) {
				n.Spec.Taints = []v1.Taint{{Key: "a", Value: "1", Effect: v1.TaintEffectNoSchedule}}
			}),
			want: []string{"node(s) had untolerated taint {a: 1}"},
		},
		{
			name: "nodeSelector matches", filter: filterNodeAffinity,
			pod:  makePod("ns", "p", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
			node: makeNode("n", func(n *v1.Node) { n.Labels["disk"] = "ssd" }),
		},
		{
			name: "nodeSelector misses", filter: filterNodeAffinity,
			pod:  makePod("ns", "p", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
			node: makeNode("n", func(n *v1.Node) { n.Labels["disk"] = "hdd" }),
			want: []string{reasonNodeAffinity},
		},
		{
			name: "required affinity: second term matches", filter: filterNodeAffinity,
			pod: makePod("ns", "p", requiredAffinity(
				v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a"}}}},
				v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{
					{Key: "gen", Operator: v1.NodeSelectorOpGt, Values: []string{"3"}},
					{Key: "spot", Operator: v1.NodeSelectorOpDoesNotExist},
				}},
			)),
			node: makeNode("n", func(n *v1.Node) { n.Labels["zone"] = "b"; n.Labels["gen"] = "5" }),
		},
		{
			name: "required affinity: no term matches", filter: filterNodeAffinity,
			pod: makePod("ns", "p", requiredAffinity(
				v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpNotIn, Values: []string{"b"}}}},
				v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "gen", Operator: v1.NodeSelectorOpLt, Values: []string{"x"}}}},
			)),
			node: makeNode("n", func(n *v1.Node) { n.Labels["zone"] = "b"; n.Labels["gen"] = "5" }),
			want: []string{reasonNodeAffinity},
		},
		{
			name: "required affinity: matchFields on the node name", filter: filterNodeAffinity,
			pod: makePod("ns", "p", requiredAffinity(
				v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n"}}}},
			)),
			node: makeNode("n", nil),
		},
		{
			name: "required affinity: an empty term matches nothing", filter: filterNodeAffinity,
			pod:  makePod("ns", "p", requiredAffinity(v1.NodeSelectorTerm{})),
			node: makeNode("n", nil),
			want: []string{reasonNodeAffinity},
		},
		{
			name: "host port free", filter: filterHostPorts,
			pod:   makePod("ns", "p", hostPortOn("", v1.ProtocolTCP, 8080)),
			node:  makeNode("n", nil),
			bound: []*v1.Pod{makePod("ns", "q", onNode("n", hostPortOn("", v1.ProtocolUDP, 8080)))},
		},
		{
			name: "host port taken on all addresses", filter: filterHostPorts,
			pod:   makePod("ns", "p", hostPortOn("10.0.0.1", "", 8080)),
			node:  makeNode("n", nil),
			bound: []*v1.Pod{makePod("ns", "q", onNode("n", hostPortOn("", v1.ProtocolTCP, 8080)))},
			want:  []string{reasonHostPorts},
		},
		{
			name: "host port taken by a sidecar", filter: filterHostPorts,
			pod:  makePod("ns", "p", hostPortOn("", v1.ProtocolTCP, 53)),
			node: makeNode("n", nil),
			bound: []*v1.Pod{makePod("ns", "q", onNode("n", func(p *v1.Pod) {
				p.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: &always, Ports: []v1.ContainerPort{{HostPort: 53, ContainerPort: 53}}}}
			}))},
			want: []string{reasonHostPorts},
		},
		{
			name: "host port on another address", filter: filterHostPorts,
			pod:   makePod("ns", "p", hostPortOn("10.0.0.1", v1.ProtocolTCP, 8080)),
			node:  makeNode("n", nil),
			bound: []*v1.Pod{makePod("ns", "q", onNode("n", hostPortOn("10.0.0.2", v1.ProtocolTCP, 8080)))},
		},
		{
			name: "resources fit exactly", filter: filterResources,
			pod:   makePod("ns", "p", requests("cpu", "1500m", "memory", "3Gi")),
			node:  makeNode("n", nil),
			bound: []*v1.Pod{makePod("ns", "q", onNode("n", requests("cpu", "500m", "memory", "1Gi")))},
		},
		{
			name: "cpu and memory short", filter: filterResources,
			pod:   makePod("ns", "p", requests("cpu", "1501m", "memory", "3Gi", "ephemeral-storage", "1Gi")),
			node:  makeNode("n", func(n *v1.Node) { n.Status.Allocatable[v1.ResourceEphemeralStorage] = resource.MustParse("10Gi") }),
			bound: []*v1.Pod{makePod("ns", "q", onNode("n", requests("cpu", "500m", "memory", "2Gi")))},
			want:  []string{"Insufficient cpu", "Insufficient memory"},
		},
		{
			name: "terminal pods free their requests", filter: filterResources,
			pod:  makePod("ns", "p", requests("cpu", "2")),
			node: makeNode("n", nil),
			bound: []*v1.Pod{makePod("ns", "q", onNode("n", requests("cpu", "1"), func(p *v1.Pod) {
				p.Status.Phase = v1.PodSucceeded
			}))},
		},
		{
			name: "init container peak counts", filter: filterResources,
			pod: makePod("ns", "p", chain(requests("cpu", "1"), func(p *v1.Pod) {
				p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}}}}
			})),
			node: makeNode("n", nil),
			want: []string{"Insufficient cpu"},
		},
		{
			name: "extended resource missing", filter: filterResources,
			pod:  makePod("ns", "p", requests("example.com/gpu", "1")),
			node: makeNode("n", nil),
			want: []string{"Insufficient example.com/gpu"},
		},
		{
			name: "pod limit reached", filter: filterResources,
			pod:   makePod("ns", "p", nil),
			node:  makeNode("n", func(n *v1.Node) { n.Status.Allocatable[v1.ResourcePods] = resource.MustParse("1") }),
			bound: []*v1.Pod{makePod("ns", "q", onNode("n"))},
			want:  []string{reasonTooManyPods},
		},
		{
			name: "empty pod and node do not panic", filter: filterResources,
			pod: &v1.Pod{}, node: &v1.Node{},
			want: []string{reasonTooManyPods},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSnapshot([]*v1.Node{tc.node}, tc.bound)
			got := tc.filter(tc.pod, s.nodes[0])
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFiltersSurviveEmptyObjects runs every filter on zero-valued objects:
// the informers may hand the scheduler anything.
func TestFiltersSurviveEmptyObjects(t *testing.T) {
	s := newSnapshot([]*v1.Node{{}}, nil)
	for _, f := range filters {
		f.filter(&v1.Pod{Spec: v1.PodSpec{Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{},
		}}}}, s.nodes[0])
	}
}

func requiredAffinity(terms ...v1.NodeSelectorTerm) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
}

func hostPortOn(ip string, proto v1.Protocol, port int32) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{HostIP: ip, Protocol: proto, HostPort: port, ContainerPort: port}}
	}
}
