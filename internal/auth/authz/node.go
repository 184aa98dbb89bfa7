package authz

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/selection"

	"github.com/tranche/tranche/internal/auth/authn"
)

// NodeLeaseNamespace holds the node agents' heartbeat Leases.
const NodeLeaseNamespace = "kube-node-lease"

// NodeAuthorizer is Kubernetes' Node authorizer for node agents (user system:node:NAME
// in group system:nodes): a node reads a Secret, ConfigMap, PersistentVolumeClaim,
// PersistentVolume, ServiceAccount or ResourceClaim, and creates a ServiceAccount
// token, only when a pod bound to it uses that object (NodeGraph); it reads its own
// Node and the pods bound to it (lists and watches only with field selectors naming it,
// as Kubernetes' AuthorizeNodeWithSelectors), writes its own Lease, events, and
// deletes and evicts the pods bound to it. Creating and updating Nodes, pod status and
// (mirror) pods is allowed here and narrowed to the node's own objects by the
// NodeRestriction admission (internal/noderestriction), as upstream.
// Other reads (Services, Endpoints, Namespaces, EndpointSlices, RuntimeClasses)
// follow a static rule list, as upstream's node rules. Anything else, and every other user, gets
// NoOpinion, which leaves the decision to RBAC.
type NodeAuthorizer struct {
	graph *NodeGraph
}

var _ Authorizer = (*NodeAuthorizer)(nil)

// NewNodeAuthorizer returns a node authorizer that decides relationships from graph.
func NewNodeAuthorizer(graph *NodeGraph) *NodeAuthorizer {
	return &NodeAuthorizer{graph: graph}
}

// nodeReadable are the (group, resource) pairs any node may get, list and watch.
// Nodes and pods are not among them: a node reads only its own Node and the pods
// bound to it (authorizeNode, authorizePod).
var nodeReadable = []struct{ group, resource string }{
	{"", "services"}, {"", "endpoints"}, {"", "namespaces"},
	{"discovery.k8s.io", "endpointslices"}, {"node.k8s.io", "runtimeclasses"},
	{"networking.k8s.io", "networkpolicies"},       // the node enforces them (internal/netpol)
	{"storage.k8s.io", "csidrivers"},               // as upstream's system:node role
	{"certificates.k8s.io", "clustertrustbundles"}, // projected into pods, as upstream's system:node role
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
	switch a.APIGroup + "/" + a.Resource {
	case "/" + resSecrets, "/" + resConfigMaps:
		return n.authorizeReadNamespaced(node, a)
	case "/" + resPVCs:
		if a.Subresource == "status" {
			return n.authorizeStatusUpdate(node, a)
		}
		return n.authorizeGet(node, a)
	case "/" + resPVs, "resource.k8s.io/" + resResourceClaims:
		return n.authorizeGet(node, a)
	case "/" + resServiceAccount:
		if a.Verb == "get" && a.Subresource == "" {
			return n.authorizeReadNamespaced(node, a)
		}
		return n.authorizeCreateToken(node, a)
	case "/nodes":
		return authorizeNode(node, a)
	case "coordination.k8s.io/leases":
		return authorizeLease(node, a)
	case "/pods":
		return n.authorizePod(node, a)
	case "certificates.k8s.io/podcertificaterequests":
		// The agent requests the certificates of its pods' podCertificate volumes
		// (NodeRestriction keeps spec.nodeName its own) and reads them back.
		if a.Subresource == "" && (a.Verb == "create" || a.Verb == "get") {
			return Allow, "", nil
		}
		return NoOpinion, fmt.Sprintf("nodes may not %s podcertificaterequests", a.Verb), nil
	case "certificates.k8s.io/certificatesigningrequests":
		// As upstream's node rules: a node requests its certificates (rotation, and
		// tranche's pod-network identity); approval is the approvers' business.
		if a.Subresource == "" && (a.Verb == "create" || isRead(a.Verb)) {
			return Allow, "", nil
		}
		return NoOpinion, "", nil
	case "/events", "events.k8s.io/events":
		if a.Subresource == "" && (a.Verb == "create" || a.Verb == "update" || a.Verb == "patch") {
			return Allow, "", nil
		}
		return NoOpinion, "", nil
	}
	if a.Subresource == "" && isRead(a.Verb) && slices.ContainsFunc(nodeReadable, func(r struct{ group, resource string }) bool {
		return r.group == a.APIGroup && r.resource == a.Resource
	}) {
		return Allow, "", nil
	}
	return NoOpinion, "", nil
}

func isRead(verb string) bool {
	return verb == "get" || verb == "list" || verb == "watch"
}

// related is the final check of upstream's authorizer: the named object must be
// reachable from node in the graph.
func (n *NodeAuthorizer) related(node string, a Attributes) (Decision, string, error) {
	if a.Name == "" {
		return NoOpinion, "No Object name found", nil
	}
	if n.graph == nil || !n.graph.Related(node, a.Resource, a.Namespace, a.Name) {
		return NoOpinion, noRelationship(node), nil
	}
	return Allow, "", nil
}

func noRelationship(node string) string {
	return fmt.Sprintf("no relationship found between node '%s' and this object", node)
}

// authorizeReadNamespaced allows get, and list or watch of one object by name (the
// name a metadata.name field selector gives), of an object related to node.
func (n *NodeAuthorizer) authorizeReadNamespaced(node string, a Attributes) (Decision, string, error) {
	if !isRead(a.Verb) {
		return NoOpinion, "can only read resources of this type", nil
	}
	if a.Subresource != "" {
		return NoOpinion, "cannot read subresource", nil
	}
	if a.Namespace == "" {
		return NoOpinion, "can only read namespaced object of this type", nil
	}
	return n.related(node, a)
}

// authorizeGet allows get of an object related to node.
func (n *NodeAuthorizer) authorizeGet(node string, a Attributes) (Decision, string, error) {
	if a.Verb != "get" {
		return NoOpinion, "can only get individual resources of this type", nil
	}
	if a.Subresource != "" {
		return NoOpinion, "cannot get subresource", nil
	}
	return n.related(node, a)
}

// authorizeStatusUpdate allows update and patch of the status of an object related
// to node.
func (n *NodeAuthorizer) authorizeStatusUpdate(node string, a Attributes) (Decision, string, error) {
	if a.Verb != "update" && a.Verb != "patch" {
		return NoOpinion, "can only get/update/patch this type", nil
	}
	return n.related(node, a)
}

// authorizeCreateToken allows serviceaccounts/token for an account a pod on node
// runs as; NodeRestriction then requires the token to be bound to such a pod.
func (n *NodeAuthorizer) authorizeCreateToken(node string, a Attributes) (Decision, string, error) {
	if a.Verb != "create" || a.Name == "" {
		return NoOpinion, "can only create tokens for individual service accounts", nil
	}
	if a.Subresource != "token" {
		return NoOpinion, "can only create token subresource of serviceaccount", nil
	}
	return n.related(node, a)
}

// authorizeNode lets a node create, update or patch a Node and its status
// (NodeRestriction limits the writes to the node's own object) and get, list or watch
// its own Node only, as Kubernetes' AuthorizeNodeWithSelectors does: by name, or by a
// metadata.name field selector, which gives a list or watch its name. The name is
// compared directly, not through the graph, so that an agent may read its Node before
// creating it.
func authorizeNode(node string, a Attributes) (Decision, string, error) {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "create", "update", "patch":
			return Allow, "", nil
		case "get", "list", "watch":
			switch a.Name {
			case node:
				return Allow, "", nil
			case "":
				return NoOpinion, fmt.Sprintf("node '%s' cannot read all nodes, only its own Node object", node), nil
			default:
				return NoOpinion, fmt.Sprintf("node '%s' cannot read '%s', only its own Node object", node, a.Name), nil
			}
		}
	case "status":
		switch a.Verb {
		case "update", "patch":
			return Allow, "", nil
		}
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
	// On create the name is not known to authorization; NodeRestriction checks it.
	if a.Verb != "create" && a.Name != node {
		return NoOpinion, "can only access node lease with the same name as the requesting node", nil
	}
	return Allow, "", nil
}

// authorizePod follows Kubernetes' rules for a node's pod requests: get of a pod bound
// to node (graph); list and watch only with the field selector spec.nodeName=<node>
// (what kubelet's informer asks), or of one pod bound to it by name; creating
// (mirror) pods and writing pod status, which NodeRestriction narrows to pods bound to
// node; deleting and evicting the pods the graph shows bound to node (tranche admits
// no deletes, so it is checked here).
func (n *NodeAuthorizer) authorizePod(node string, a Attributes) (Decision, string, error) {
	switch {
	case a.Subresource == "" && a.Verb == "get":
		return n.podBound(node, a)
	case a.Subresource == "" && (a.Verb == "list" || a.Verb == "watch"):
		for _, req := range a.FieldSelector {
			if req.Field == "spec.nodeName" && req.Operator == selection.Equals && req.Value == node {
				return Allow, "", nil
			}
			// The node's NetworkPolicy enforcement (internal/netpol) matches peers on
			// every node by address and labels, hence reads the pods of the pod network.
			if req.Field == "spec.hostNetwork" && req.Operator == selection.Equals && req.Value == "false" {
				return Allow, "", nil
			}
		}
		if a.Name != "" {
			return n.podBound(node, a)
		}
		return NoOpinion, "can only list/watch pods with spec.nodeName field selector", nil
	case a.Subresource == "" && a.Verb == "create":
		return Allow, "", nil
	case a.Subresource == "status" && (a.Verb == "update" || a.Verb == "patch"):
		return Allow, "", nil
	case a.Subresource == "" && a.Verb == "delete", a.Subresource == "eviction" && a.Verb == "create":
		return n.podBound(node, a)
	}
	return NoOpinion, "", nil
}

// podBound allows a request naming a pod the graph shows bound to node.
func (n *NodeAuthorizer) podBound(node string, a Attributes) (Decision, string, error) {
	if a.Name == "" {
		return NoOpinion, "No Object name found", nil
	}
	if n.graph == nil {
		return NoOpinion, noRelationship(node), nil
	}
	if bound, _, found := n.graph.PodNode(a.Namespace, a.Name); !found || bound != node {
		return NoOpinion, noRelationship(node), nil
	}
	return Allow, "", nil
}
