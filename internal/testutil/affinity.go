package testutil

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AffinityCase is a pod's node selection (nodeSelector and required node
// affinity terms) against one node, with the verdict Kubernetes' scheduler
// and DaemonSet controller both reach through k8s.io/component-helpers.
type AffinityCase struct {
	Name         string
	NodeSelector map[string]string
	Affinity     *v1.Affinity
	Node         *v1.Node
	Match        bool
}

// AffinityCases are the cases the scheduler's and the DaemonSet
// controller's node matching must agree on. Before both used
// component-helpers, matchFields with an operator other than In/NotIn
// matched in the DaemonSet controller and not in the scheduler, and both
// accepted a matchFields In list of several names that Kubernetes rejects.
func AffinityCases() []AffinityCase {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a", "cores": "8"}}}
	required := func(terms ...v1.NodeSelectorTerm) *v1.Affinity {
		return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
	fields := func(op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorTerm {
		return v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: op, Values: values}}}
	}
	labels := func(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorTerm {
		return v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	return []AffinityCase{
		{Name: "nothing required", Node: node, Match: true},
		{Name: "nodeSelector matches", NodeSelector: map[string]string{"zone": "a"}, Node: node, Match: true},
		{Name: "nodeSelector misses", NodeSelector: map[string]string{"zone": "b"}, Node: node},
		{Name: "matchFields name In", Affinity: required(fields(v1.NodeSelectorOpIn, "n1")), Node: node, Match: true},
		{Name: "matchFields name NotIn", Affinity: required(fields(v1.NodeSelectorOpNotIn, "n1")), Node: node},
		// The copies disagreed here: Exists is no field selector operator.
		{Name: "matchFields name Exists matches nothing", Affinity: required(fields(v1.NodeSelectorOpExists)), Node: node},
		// And both accepted a list: a field selector takes one value.
		{Name: "matchFields name In two names matches nothing", Affinity: required(fields(v1.NodeSelectorOpIn, "n0", "n1")), Node: node},
		{Name: "a broken term does not hide a good one", Affinity: required(fields(v1.NodeSelectorOpExists), labels("zone", v1.NodeSelectorOpIn, "a")), Node: node, Match: true},
		{Name: "terms are ORed", Affinity: required(labels("zone", v1.NodeSelectorOpIn, "b"), labels("cores", v1.NodeSelectorOpGt, "4")), Node: node, Match: true},
		{Name: "Lt compares numbers", Affinity: required(labels("cores", v1.NodeSelectorOpLt, "4")), Node: node},
		{Name: "DoesNotExist", Affinity: required(labels("gpu", v1.NodeSelectorOpDoesNotExist)), Node: node, Match: true},
		{Name: "an empty term matches nothing", Affinity: required(v1.NodeSelectorTerm{}), Node: node},
		{Name: "nodeSelector and affinity are ANDed", NodeSelector: map[string]string{"zone": "b"}, Affinity: required(fields(v1.NodeSelectorOpIn, "n1")), Node: node},
	}
}
