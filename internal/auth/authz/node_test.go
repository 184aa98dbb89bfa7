package authz

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tranche/tranche/internal/auth/authn"
)

// makePod returns pod ns/name bound to node, changed by mutate.
func makePod(ns, name, node string, mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// selected returns a with the field selector sel, as the API server parses it.
func selected(a Attributes, sel string) Attributes {
	a.FieldSelector = fields.ParseSelectorOrDie(sel).Requirements()
	return a
}

func TestNodeAuthorizer(t *testing.T) {
	nodeA := &authn.User{Name: "system:node:a", Groups: []string{"system:nodes", "system:authenticated"}}
	notInGroup := &authn.User{Name: "system:node:a", Groups: []string{"system:authenticated"}}
	jane := &authn.User{Name: "jane", Groups: []string{"system:nodes"}}
	g := NewNodeGraph()
	g.SetPod(makePod("t1", "on-a", "a", func(p *v1.Pod) {
		p.Spec.ServiceAccountName = "robot"
		p.Spec.Volumes = []v1.Volume{
			{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "mounted"}}},
			{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
		}
	}))
	g.SetPod(makePod("t1", "on-b", "b", func(p *v1.Pod) {
		p.Spec.ServiceAccountName = "other"
		p.Spec.Volumes = []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "b-only"}}}}
	}))
	g.SetPV(&v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-data"},
		Spec: v1.PersistentVolumeSpec{ClaimRef: &v1.ObjectReference{Namespace: "t1", Name: "data"}}})
	noRel := "no relationship found between node 'a' and this object"
	cases := []struct {
		name   string
		attrs  Attributes
		want   Decision
		reason string
	}{
		{name: "create a CSR", attrs: resAttrs(nodeA, "create", "certificates.k8s.io", "certificatesigningrequests", "", "", ""), want: Allow},
		{name: "watch CSRs", attrs: resAttrs(nodeA, "watch", "certificates.k8s.io", "certificatesigningrequests", "", "", ""), want: Allow},
		{name: "approve a CSR", attrs: resAttrs(nodeA, "update", "certificates.k8s.io", "certificatesigningrequests", "approval", "", "x"), want: NoOpinion},
		{name: "delete a CSR", attrs: resAttrs(nodeA, "delete", "certificates.k8s.io", "certificatesigningrequests", "", "", "x"), want: NoOpinion},
		{name: "list all pods", attrs: resAttrs(nodeA, "list", "", "pods", "", "", ""), want: NoOpinion, reason: "can only list/watch pods with spec.nodeName field selector"},
		{name: "list own pods", attrs: selected(resAttrs(nodeA, "list", "", "pods", "", "", ""), "spec.nodeName=a"), want: Allow},
		{name: "list the pod network's pods", attrs: selected(resAttrs(nodeA, "list", "", "pods", "", "", ""), "spec.hostNetwork=false"), want: Allow},
		{name: "list host network pods", attrs: selected(resAttrs(nodeA, "list", "", "pods", "", "", ""), "spec.hostNetwork=true"), want: NoOpinion, reason: "can only list/watch pods with spec.nodeName field selector"},
		{name: "watch own pods with ==", attrs: selected(resAttrs(nodeA, "watch", "", "pods", "", "", ""), "status.phase!=Failed,spec.nodeName==a"), want: Allow},
		{name: "list another node's pods", attrs: selected(resAttrs(nodeA, "list", "", "pods", "", "", ""), "spec.nodeName=b"), want: NoOpinion, reason: "can only list/watch pods with spec.nodeName field selector"},
		{name: "list pods not on a node", attrs: selected(resAttrs(nodeA, "list", "", "pods", "", "", ""), "spec.nodeName!=a"), want: NoOpinion, reason: "can only list/watch pods with spec.nodeName field selector"},
		{name: "watch own pod by name", attrs: resAttrs(nodeA, "watch", "", "pods", "", "t1", "on-a"), want: Allow},
		{name: "watch another node's pod by name", attrs: resAttrs(nodeA, "watch", "", "pods", "", "t1", "on-b"), want: NoOpinion, reason: noRel},
		{name: "get own pod", attrs: resAttrs(nodeA, "get", "", "pods", "", "t1", "on-a"), want: Allow},
		{name: "get another node's pod", attrs: resAttrs(nodeA, "get", "", "pods", "", "t1", "on-b"), want: NoOpinion, reason: noRel},
		{name: "get own node", attrs: resAttrs(nodeA, "get", "", "nodes", "", "", "a"), want: Allow},
		{name: "watch own node by name", attrs: resAttrs(nodeA, "watch", "", "nodes", "", "", "a"), want: Allow},
		{name: "list all nodes", attrs: resAttrs(nodeA, "list", "", "nodes", "", "", ""), want: NoOpinion, reason: "node 'a' cannot read all nodes, only its own Node object"},
		{name: "get another node", attrs: resAttrs(nodeA, "get", "", "nodes", "", "", "b"), want: NoOpinion, reason: "node 'a' cannot read 'b', only its own Node object"},
		{name: "get own node status", attrs: resAttrs(nodeA, "get", "", "nodes", "status", "", "a"), want: NoOpinion},
		{name: "watch endpointslices", attrs: resAttrs(nodeA, "watch", "discovery.k8s.io", "endpointslices", "", "", ""), want: Allow},
		{name: "get a runtimeclass", attrs: resAttrs(nodeA, "get", "node.k8s.io", "runtimeclasses", "", "", "runc"), want: Allow},
		{name: "create a runtimeclass", attrs: resAttrs(nodeA, "create", "node.k8s.io", "runtimeclasses", "", "", ""), want: NoOpinion},
		{name: "get a csidriver", attrs: resAttrs(nodeA, "get", "storage.k8s.io", "csidrivers", "", "", "hostpath.csi.k8s.io"), want: Allow},
		{name: "delete a csidriver", attrs: resAttrs(nodeA, "delete", "storage.k8s.io", "csidrivers", "", "", "hostpath.csi.k8s.io"), want: NoOpinion},
		{name: "get mounted secret", attrs: resAttrs(nodeA, "get", "", "secrets", "", "t1", "mounted"), want: Allow},
		{name: "watch mounted secret by name", attrs: resAttrs(nodeA, "watch", "", "secrets", "", "t1", "mounted"), want: Allow},
		{name: "get secret of another node's pod", attrs: resAttrs(nodeA, "get", "", "secrets", "", "t1", "b-only"), want: NoOpinion, reason: noRel},
		{name: "get unrelated configmap", attrs: resAttrs(nodeA, "get", "", "configmaps", "", "t1", "cm"), want: NoOpinion, reason: noRel},
		{name: "list secrets everywhere", attrs: resAttrs(nodeA, "list", "", "secrets", "", "", ""), want: NoOpinion, reason: "can only read namespaced object of this type"},
		{name: "list secrets of a namespace", attrs: resAttrs(nodeA, "list", "", "secrets", "", "t1", ""), want: NoOpinion, reason: "No Object name found"},
		{name: "update mounted secret", attrs: resAttrs(nodeA, "update", "", "secrets", "", "t1", "mounted"), want: NoOpinion, reason: "can only read resources of this type"},
		{name: "create secret", attrs: resAttrs(nodeA, "create", "", "secrets", "", "t1", ""), want: NoOpinion, reason: "can only read resources of this type"},
		{name: "get claim", attrs: resAttrs(nodeA, "get", "", "persistentvolumeclaims", "", "t1", "data"), want: Allow},
		{name: "list claims", attrs: resAttrs(nodeA, "list", "", "persistentvolumeclaims", "", "t1", "data"), want: NoOpinion, reason: "can only get individual resources of this type"},
		{name: "patch claim status", attrs: resAttrs(nodeA, "patch", "", "persistentvolumeclaims", "status", "t1", "data"), want: Allow},
		{name: "get pv through claim", attrs: resAttrs(nodeA, "get", "", "persistentvolumes", "", "", "pv-data"), want: Allow},
		{name: "get other pv", attrs: resAttrs(nodeA, "get", "", "persistentvolumes", "", "", "pv-other"), want: NoOpinion, reason: noRel},
		{name: "get own pod's service account", attrs: resAttrs(nodeA, "get", "", "serviceaccounts", "", "t1", "robot"), want: Allow},
		{name: "token for own pod's service account", attrs: resAttrs(nodeA, "create", "", "serviceaccounts", "token", "t1", "robot"), want: Allow},
		{name: "token for unrelated service account", attrs: resAttrs(nodeA, "create", "", "serviceaccounts", "token", "t1", "other"), want: NoOpinion, reason: noRel},
		{name: "list service accounts", attrs: resAttrs(nodeA, "list", "", "serviceaccounts", "", "t1", ""), want: NoOpinion, reason: "can only create tokens for individual service accounts"},
		{name: "read other resources", attrs: resAttrs(nodeA, "list", "apps", "deployments", "", "", ""), want: NoOpinion},
		{name: "read pod logs", attrs: resAttrs(nodeA, "get", "", "pods", "log", "t1", "on-a"), want: NoOpinion},
		{name: "create own node", attrs: resAttrs(nodeA, "create", "", "nodes", "", "", ""), want: Allow},
		{name: "update own node", attrs: resAttrs(nodeA, "update", "", "nodes", "", "", "a"), want: Allow},
		{name: "patch own node status", attrs: resAttrs(nodeA, "patch", "", "nodes", "status", "", "a"), want: Allow},
		{name: "delete own node", attrs: resAttrs(nodeA, "delete", "", "nodes", "", "", "a"), want: NoOpinion},
		{name: "update own lease", attrs: resAttrs(nodeA, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "a"), want: Allow},
		{name: "create lease", attrs: resAttrs(nodeA, "create", "coordination.k8s.io", "leases", "", "kube-node-lease", ""), want: Allow},
		{name: "update another node's lease", attrs: resAttrs(nodeA, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "b"), want: NoOpinion,
			reason: "can only access node lease with the same name as the requesting node"},
		{name: "lease in another namespace", attrs: resAttrs(nodeA, "get", "coordination.k8s.io", "leases", "", "kube-system", "a"), want: NoOpinion,
			reason: `can only access leases in the "kube-node-lease" system namespace`},
		{name: "list leases", attrs: resAttrs(nodeA, "list", "coordination.k8s.io", "leases", "", "kube-node-lease", ""), want: NoOpinion,
			reason: "can only get, create, update, patch, or delete a node lease"},
		{name: "create core event", attrs: resAttrs(nodeA, "create", "", "events", "", "t1", ""), want: Allow},
		{name: "patch events.k8s.io event", attrs: resAttrs(nodeA, "patch", "events.k8s.io", "events", "", "t1", "e"), want: Allow},
		{name: "delete event", attrs: resAttrs(nodeA, "delete", "", "events", "", "t1", "e"), want: NoOpinion},
		{name: "update status of a pod", attrs: resAttrs(nodeA, "update", "", "pods", "status", "t1", "on-a"), want: Allow},
		{name: "create a (mirror) pod", attrs: resAttrs(nodeA, "create", "", "pods", "", "t1", ""), want: Allow},
		{name: "delete own pod", attrs: resAttrs(nodeA, "delete", "", "pods", "", "t1", "on-a"), want: Allow},
		{name: "delete another node's pod", attrs: resAttrs(nodeA, "delete", "", "pods", "", "t1", "on-b"), want: NoOpinion, reason: noRel},
		{name: "delete missing pod", attrs: resAttrs(nodeA, "delete", "", "pods", "", "t1", "gone"), want: NoOpinion, reason: noRel},
		{name: "evict own pod", attrs: resAttrs(nodeA, "create", "", "pods", "eviction", "t1", "on-a"), want: Allow},
		{name: "update pod spec", attrs: resAttrs(nodeA, "update", "", "pods", "", "t1", "on-a"), want: NoOpinion},
		{name: "patch ephemeral containers of own pod", attrs: resAttrs(nodeA, "patch", "", "pods", "ephemeralcontainers", "t1", "on-a"), want: NoOpinion},
		{name: "non-resource request", attrs: Attributes{User: nodeA, Verb: "get", Path: "/healthz"}, want: NoOpinion},
		{name: "node name without group", attrs: resAttrs(notInGroup, "get", "", "secrets", "", "t1", "mounted"), want: NoOpinion},
		{name: "group without node name", attrs: resAttrs(jane, "list", "", "pods", "", "", ""), want: NoOpinion},
	}
	z := NewNodeAuthorizer(g)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, err := z.Authorize(context.Background(), tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || reason != tc.reason {
				t.Errorf("decision %v %q, want %v %q", got, reason, tc.want, tc.reason)
			}
		})
	}
}
