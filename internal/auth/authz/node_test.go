package authz

import (
	"context"
	"testing"

	"github.com/tranche/tranche/internal/auth/authn"
)

// podNodes maps "namespace/name" to the pod's node.
type podNodes map[string]string

func (p podNodes) PodNodeName(ns, name string) (string, bool, error) {
	node, ok := p[ns+"/"+name]
	return node, ok, nil
}

var _ PodNodeGetter = podNodes{}

func TestNodeAuthorizer(t *testing.T) {
	nodeA := &authn.User{Name: "system:node:a", Groups: []string{"system:nodes", "system:authenticated"}}
	notInGroup := &authn.User{Name: "system:node:a", Groups: []string{"system:authenticated"}}
	jane := &authn.User{Name: "jane", Groups: []string{"system:nodes"}}
	pods := podNodes{"t1/on-a": "a", "t1/on-b": "b"}
	cases := []struct {
		name  string
		attrs Attributes
		want  Decision
	}{
		{name: "list pods", attrs: resAttrs(nodeA, "list", "", "pods", "", "", ""), want: Allow},
		{name: "watch endpointslices", attrs: resAttrs(nodeA, "watch", "discovery.k8s.io", "endpointslices", "", "", ""), want: Allow},
		{name: "get secret", attrs: resAttrs(nodeA, "get", "", "secrets", "", "t1", "s"), want: Allow},
		{name: "get pv", attrs: resAttrs(nodeA, "get", "", "persistentvolumes", "", "", "pv"), want: Allow},
		{name: "read other resources", attrs: resAttrs(nodeA, "list", "apps", "deployments", "", "", ""), want: NoOpinion},
		{name: "read pod logs", attrs: resAttrs(nodeA, "get", "", "pods", "log", "t1", "on-a"), want: NoOpinion},
		{name: "create own node", attrs: resAttrs(nodeA, "create", "", "nodes", "", "", ""), want: Allow},
		{name: "update own node", attrs: resAttrs(nodeA, "update", "", "nodes", "", "", "a"), want: Allow},
		{name: "patch own node status", attrs: resAttrs(nodeA, "patch", "", "nodes", "status", "", "a"), want: Allow},
		{name: "patch another node status", attrs: resAttrs(nodeA, "patch", "", "nodes", "status", "", "b"), want: NoOpinion},
		{name: "delete own node", attrs: resAttrs(nodeA, "delete", "", "nodes", "", "", "a"), want: NoOpinion},
		{name: "update own lease", attrs: resAttrs(nodeA, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "a"), want: Allow},
		{name: "create lease", attrs: resAttrs(nodeA, "create", "coordination.k8s.io", "leases", "", "kube-node-lease", ""), want: Allow},
		{name: "update another node's lease", attrs: resAttrs(nodeA, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "b"), want: NoOpinion},
		{name: "lease in another namespace", attrs: resAttrs(nodeA, "get", "coordination.k8s.io", "leases", "", "kube-system", "a"), want: NoOpinion},
		{name: "list leases", attrs: resAttrs(nodeA, "list", "coordination.k8s.io", "leases", "", "kube-node-lease", ""), want: NoOpinion},
		{name: "create core event", attrs: resAttrs(nodeA, "create", "", "events", "", "t1", ""), want: Allow},
		{name: "patch events.k8s.io event", attrs: resAttrs(nodeA, "patch", "events.k8s.io", "events", "", "t1", "e"), want: Allow},
		{name: "delete event", attrs: resAttrs(nodeA, "delete", "", "events", "", "t1", "e"), want: NoOpinion},
		{name: "update status of own pod", attrs: resAttrs(nodeA, "update", "", "pods", "status", "t1", "on-a"), want: Allow},
		{name: "patch status of another node's pod", attrs: resAttrs(nodeA, "patch", "", "pods", "status", "t1", "on-b"), want: NoOpinion},
		{name: "delete own pod", attrs: resAttrs(nodeA, "delete", "", "pods", "", "t1", "on-a"), want: Allow},
		{name: "delete missing pod", attrs: resAttrs(nodeA, "delete", "", "pods", "", "t1", "gone"), want: NoOpinion},
		{name: "evict own pod", attrs: resAttrs(nodeA, "create", "", "pods", "eviction", "t1", "on-a"), want: Allow},
		{name: "update pod spec", attrs: resAttrs(nodeA, "update", "", "pods", "", "t1", "on-a"), want: NoOpinion},
		{name: "add ephemeral containers to own pod", attrs: resAttrs(nodeA, "patch", "", "pods", "ephemeralcontainers", "t1", "on-a"), want: NoOpinion},
		{name: "update ephemeral containers of own pod", attrs: resAttrs(nodeA, "update", "", "pods", "ephemeralcontainers", "t1", "on-a"), want: NoOpinion},
		{name: "create service account token", attrs: resAttrs(nodeA, "create", "", "serviceaccounts", "token", "t1", "default"), want: Allow},
		{name: "create secret", attrs: resAttrs(nodeA, "create", "", "secrets", "", "t1", ""), want: NoOpinion},
		{name: "non-resource request", attrs: Attributes{User: nodeA, Verb: "get", Path: "/healthz"}, want: NoOpinion},
		{name: "node name without group", attrs: resAttrs(notInGroup, "list", "", "pods", "", "", ""), want: NoOpinion},
		{name: "group without node name", attrs: resAttrs(jane, "list", "", "pods", "", "", ""), want: NoOpinion},
	}
	z := NewNodeAuthorizer(pods)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := z.Authorize(context.Background(), tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("decision %v, want %v", got, tc.want)
			}
		})
	}
}
