package authz

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tranche/tranche/internal/auth/authn"
)

// NodeLeaseNamespace holds the node agents' heartbeat Leases.
const NodeLeaseNamespace = "kube-node-lease"

// PodNodeGetter tells which node a pod is bound to.
type PodNodeGetter interface {
	// PodNodeName returns spec.nodeName of namespace/name, found false when the pod
	// does not exist.
	PodNodeName(namespace, name string) (nodeName string, found bool, err error)
}

// NodeAuthorizer gives node agents (user system:node:NAME in group system:nodes) what
// they need and no more: read access to the objects pods depend on, writes to their
// own Node and Lease, events, and status updates, deletion and eviction of the pods
// bound to them. Anything else, and every other user, gets NoOpinion, which leaves
// the decision to RBAC.
type NodeAuthorizer struct {
	pods PodNodeGetter
}

var _ Authorizer = (*NodeAuthorizer)(nil)

// NewNodeAuthorizer returns a node authorizer that checks pod bindings through pods.
func NewNodeAuthorizer(pods PodNodeGetter) *NodeAuthorizer {
	return &NodeAuthorizer{pods: pods}
}

// nodeReadable are the (group, resource) pairs a node may get, list and watch.
var nodeReadable = []struct{ group, resource string }{
	{"", "nodes"}, {"", "pods"}, {"", "services"}, {"", "endpoints"}, {"", "namespaces"},
	{"", "configmaps"}, {"", "secrets"}, {"", "persistentvolumeclaims"}, {"", "persistentvolumes"},
	{"discovery.k8s.io", "endpointslices"},
}

// NodeName returns NAME for a node agent's user (system:node:NAME in system:nodes).
func NodeName(user *authn.User) (string, bool) {
	if user == nil || !user.InGroup(authn.GroupNodes) {
		return "", false
	}
	name, ok := strings.CutPrefix(user.Name, authn.NodeUserPrefix)
	return name, ok && name != ""
}

// Authorize implements Authorizer.
func (n *NodeAuthorizer) Authorize(_ context.Context, a Attributes) (Decision, string, error) {
	node, ok := NodeName(a.User)
	if !ok || !a.ResourceRequest {
		return NoOpinion, "", nil
	}
	verb := a.Verb
	switch {
	case a.Subresource == "" && isRead(verb) && slices.ContainsFunc(nodeReadable, func(r struct{ group, resource string }) bool {
		return r.group == a.APIGroup && r.resource == a.Resource
	}):
		return Allow, "", nil
	case a.APIGroup == "" && a.Resource == "nodes":
		return n.authorizeNode(node, a)
	case a.APIGroup == "coordination.k8s.io" && a.Resource == "leases" && a.Subresource == "":
		return authorizeLease(node, a)
	case (a.APIGroup == "" || a.APIGroup == "events.k8s.io") && a.Resource == "events" && a.Subresource == "":
		if verb == "create" || verb == "update" || verb == "patch" {
			return Allow, "", nil
		}
	case a.APIGroup == "" && a.Resource == "pods":
		return n.authorizePod(node, a)
	case a.APIGroup == "" && a.Resource == "serviceaccounts" && a.Subresource == "token" && verb == "create":
		return Allow, "", nil
	}
	return NoOpinion, "", nil
}

func isRead(verb string) bool {
	return verb == "get" || verb == "list" || verb == "watch"
}

// authorizeNode lets a node create itself (the name is unknown to authorization on
// create, as in Kubernetes) and update or patch its own Node and nodes/status.
func (n *NodeAuthorizer) authorizeNode(node string, a Attributes) (Decision, string, error) {
	switch {
	case isRead(a.Verb) && a.Subresource == "status":
		return Allow, "", nil
	case a.Verb == "create" && a.Subresource == "" && (a.Name == "" || a.Name == node):
		return Allow, "", nil
	case (a.Verb == "update" || a.Verb == "patch") && (a.Subresource == "" || a.Subresource == "status"):
		if a.Name == node {
			return Allow, "", nil
		}
		return NoOpinion, fmt.Sprintf("node '%s' cannot modify node '%s'", node, a.Name), nil
	}
	return NoOpinion, "", nil
}

// authorizeLease follows Kubernetes' node lease rules, reasons included.
func authorizeLease(node string, a Attributes) (Decision, string, error) {
	switch a.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return NoOpinion, "can only get, create, update, patch, or delete a node lease", nil
	}
	if a.Namespace != NodeLeaseNamespace {
		return NoOpinion, fmt.Sprintf("can only access leases in the %q system namespace", NodeLeaseNamespace), nil
	}
	// On create the name is not known to authorization.
	if a.Verb != "create" && a.Name != node {
		return NoOpinion, "can only access node lease with the same name as the requesting node", nil
	}
	return Allow, "", nil
}

// authorizePod allows status writes, deletion and eviction of pods bound to node.
func (n *NodeAuthorizer) authorizePod(node string, a Attributes) (Decision, string, error) {
	switch {
	case a.Subresource == "status" && (a.Verb == "update" || a.Verb == "patch"):
	case a.Subresource == "" && a.Verb == "delete":
	case a.Subresource == "eviction" && a.Verb == "create":
	default:
		return NoOpinion, "", nil
	}
	if a.Name == "" || n.pods == nil {
		return NoOpinion, "", nil
	}
	bound, found, err := n.pods.PodNodeName(a.Namespace, a.Name)
	if err != nil {
		return NoOpinion, "", fmt.Errorf("looking up node of pod %s/%s: %w", a.Namespace, a.Name, err)
	}
	if !found || bound != node {
		return NoOpinion, fmt.Sprintf("no relationship found between node '%s' and this object", node), nil
	}
	return Allow, "", nil
}
