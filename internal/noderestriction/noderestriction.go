// Package noderestriction is Kubernetes' NodeRestriction admission plugin: it limits
// the writes a node agent (user system:node:NAME in group system:nodes) may make to
// its own Node, its own Lease, the status of the pods bound to it, mirror pods bound
// to it and tokens bound to its pods, with upstream's messages. The Node authorizer
// (internal/auth/authz) lets such writes through to it.
package noderestriction

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubeletapis "k8s.io/kubelet/pkg/apis"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/auth/authn"
	"github.com/tranche/tranche/internal/auth/authz"
)

// Lookup reads the objects the decisions depend on (from informer caches).
type Lookup interface {
	// Pod returns namespace/name, or an error apierrors.IsNotFound recognises.
	Pod(namespace, name string) (*v1.Pod, error)
	// Node returns a Node, or an error apierrors.IsNotFound recognises.
	Node(name string) (*v1.Node, error)
}

// Plugin is the NodeRestriction admission step (an apiserver.Validator).
type Plugin struct {
	user   func(context.Context) *authn.User
	lookup Lookup
}

var _ apiserver.Validator = (*Plugin)(nil)

// New returns the plugin; user gives the authenticated user of a request's context.
func New(user func(context.Context) *authn.User, lookup Lookup) *Plugin {
	return &Plugin{user: user, lookup: lookup}
}

var (
	podResource   = schema.GroupResource{Resource: "pods"}
	nodeResource  = schema.GroupResource{Resource: "nodes"}
	pvcResource   = schema.GroupResource{Resource: "persistentvolumeclaims"}
	saResource    = schema.GroupResource{Resource: "serviceaccounts"}
	leaseResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
)

// operation names an admitted operation as Kubernetes' admission attributes do.
func operation(op apiserver.AdmitOp) string {
	if op == apiserver.AdmitCreate {
		return "CREATE"
	}
	return "UPDATE"
}

// forbidden is admission.NewForbidden: the resource and name of the request, and why.
func forbidden(req *apiserver.AdmissionRequest, format string, args ...any) error {
	return apierrors.NewForbidden(req.Resource.GroupResource(), req.Name, fmt.Errorf(format, args...))
}

// Validate implements apiserver.Validator for writes by nodes; other users pass.
func (p *Plugin) Validate(ctx context.Context, req *apiserver.AdmissionRequest) ([]string, error) {
	node, ok := authz.NodeName(p.user(ctx))
	if !ok {
		return nil, nil
	}
	switch req.Resource.GroupResource() {
	case podResource:
		switch req.Subresource {
		case "":
			return nil, p.admitPod(node, req)
		case "status":
			return nil, admitPodStatus(node, req)
		default:
			return nil, forbidden(req, "unexpected pod subresource %q, only 'status' and 'eviction' are allowed", req.Subresource)
		}
	case nodeResource:
		return nil, admitNode(node, req)
	case pvcResource:
		if req.Subresource != "status" {
			return nil, forbidden(req, "may only update PVC status")
		}
		return nil, admitPVCStatus(node, req)
	case leaseResource:
		return nil, admitLease(node, req)
	}
	return nil, nil
}

// admitPod lets a node create only mirror pods bound to itself, owned by its Node
// and referencing no other API object; it may not update pods.
func (p *Plugin) admitPod(node string, req *apiserver.AdmissionRequest) error {
	if req.Operation != apiserver.AdmitCreate {
		return forbidden(req, "unexpected operation %q, node %q can only create and delete mirror pods", operation(req.Operation), node)
	}
	pod, ok := req.Object.(*v1.Pod)
	if !ok {
		return forbidden(req, "unexpected type %T", req.Object)
	}
	if _, mirror := pod.Annotations[v1.MirrorPodAnnotationKey]; !mirror {
		return forbidden(req, "pod does not have %q annotation, node %q can only create mirror pods", v1.MirrorPodAnnotationKey, node)
	}
	if pod.Spec.NodeName != node {
		return forbidden(req, "node %q can only create pods with spec.nodeName set to itself", node)
	}
	switch len(pod.OwnerReferences) {
	case 0:
		return forbidden(req, "node %q can only create pods with an owner reference set to itself", node)
	case 1:
	default:
		return forbidden(req, "node %q can only create pods with a single owner reference set to itself", node)
	}
	owner := pod.OwnerReferences[0]
	if owner.APIVersion != "v1" || owner.Kind != "Node" || owner.Name != node {
		return forbidden(req, "node %q can only create pods with an owner reference set to itself", node)
	}
	if owner.Controller == nil || !*owner.Controller {
		return forbidden(req, "node %q can only create pods with a controller owner reference set to itself", node)
	}
	if owner.BlockOwnerDeletion != nil && *owner.BlockOwnerDeletion {
		return forbidden(req, "node %q must not set blockOwnerDeletion on an owner reference", node)
	}
	n, err := p.lookup.Node(node)
	if apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		return forbidden(req, "error looking up node %s to verify uid: %v", node, err)
	}
	if owner.UID != n.UID {
		return forbidden(req, "node %s UID mismatch: expected %s got %s", node, owner.UID, n.UID)
	}
	if pod.Spec.ServiceAccountName != "" {
		return forbidden(req, "node %q can not create pods that reference a service account", node)
	}
	visitor := func(found *bool) podutil.Visitor { return func(string) bool { *found = true; return false } }
	var secrets, configMaps bool
	podutil.VisitPodSecretNames(pod, visitor(&secrets))
	if secrets {
		return forbidden(req, "node %q can not create pods that reference secrets", node)
	}
	podutil.VisitPodConfigmapNames(pod, visitor(&configMaps))
	if configMaps {
		return forbidden(req, "node %q can not create pods that reference configmaps", node)
	}
	for _, vol := range pod.Spec.Volumes {
		if vol.Projected != nil && slices.ContainsFunc(vol.Projected.Sources, func(s v1.VolumeProjection) bool { return s.ClusterTrustBundle != nil }) {
			return forbidden(req, "node %q can not create pods that reference clustertrustbundles", node)
		}
	}
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim != nil {
			return forbidden(req, "node %q can not create pods that reference persistentvolumeclaims", node)
		}
	}
	return nil
}

// admitPodStatus lets a node write the status of pods bound to it, without labels or
// resource claim statuses changing.
func admitPodStatus(node string, req *apiserver.AdmissionRequest) error {
	if req.Operation != apiserver.AdmitUpdate {
		return forbidden(req, "unexpected operation %q", operation(req.Operation))
	}
	old, ok := req.OldObject.(*v1.Pod)
	if !ok {
		return forbidden(req, "unexpected type %T", req.OldObject)
	}
	if old.Spec.NodeName != node {
		return forbidden(req, "node %q can only update pod status for pods with spec.nodeName set to itself", node)
	}
	pod, ok := req.Object.(*v1.Pod)
	if !ok {
		return forbidden(req, "unexpected type %T", req.Object)
	}
	if !labels.Equals(old.Labels, pod.Labels) {
		return forbidden(req, "node %q cannot update labels through pod status", node)
	}
	if !claimStatusesEqual(old.Status.ResourceClaimStatuses, pod.Status.ResourceClaimStatuses) {
		return forbidden(req, "node %q cannot update resource claim statues", node)
	}
	return nil
}

func claimStatusesEqual(a, b []v1.PodResourceClaimStatus) bool {
	return slices.EqualFunc(a, b, func(x, y v1.PodResourceClaimStatus) bool {
		if x.Name != y.Name || (x.ResourceClaimName == nil) != (y.ResourceClaimName == nil) {
			return false
		}
		return x.ResourceClaimName == nil || *x.ResourceClaimName == *y.ResourceClaimName
	})
}

// admitPVCStatus lets a node change only a claim's capacity, conditions and
// allocation status.
func admitPVCStatus(node string, req *apiserver.AdmissionRequest) error {
	if req.Operation != apiserver.AdmitUpdate {
		return forbidden(req, "unexpected operation %q", operation(req.Operation))
	}
	oldPVC, ok := req.OldObject.(*v1.PersistentVolumeClaim)
	if !ok {
		return forbidden(req, "unexpected type %T", req.OldObject)
	}
	newPVC, ok := req.Object.(*v1.PersistentVolumeClaim)
	if !ok {
		return forbidden(req, "unexpected type %T", req.Object)
	}
	strip := func(c *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
		c = c.DeepCopy()
		c.ResourceVersion, c.ManagedFields = "", nil
		c.Status.Capacity, c.Status.Conditions = nil, nil
		c.Status.AllocatedResourceStatuses, c.Status.AllocatedResources = nil, nil
		return c
	}
	oldPVC, newPVC = strip(oldPVC), strip(newPVC)
	if !apiequality.Semantic.DeepEqual(oldPVC, newPVC) {
		return forbidden(req, "node %q is not allowed to update fields other than status.capacity and status.conditions: %v", node, cmp.Diff(oldPVC, newPVC))
	}
	return nil
}

// admitNode lets a node create and update only its own Node, without a configSource,
// without changing its taints, and without setting or changing labels Kubernetes
// keeps from kubelets.
func admitNode(node string, req *apiserver.AdmissionRequest) error {
	if req.Name != node {
		return forbidden(req, "node %q is not allowed to modify node %q", node, req.Name)
	}
	obj, ok := req.Object.(*v1.Node)
	if !ok {
		return forbidden(req, "unexpected type %T", req.Object)
	}
	if req.Operation == apiserver.AdmitCreate {
		if obj.Spec.ConfigSource != nil {
			return forbidden(req, "node %q is not allowed to create pods with a non-nil configSource", node)
		}
		if bad := forbiddenLabels(modifiedLabels(obj.Labels, nil)); len(bad) > 0 {
			return forbidden(req, "node %q is not allowed to set the following labels: %s", node, strings.Join(bad, ", "))
		}
		return nil
	}
	old, ok := req.OldObject.(*v1.Node)
	if !ok {
		return forbidden(req, "unexpected type %T", req.OldObject)
	}
	if obj.Spec.ConfigSource != nil && !apiequality.Semantic.DeepEqual(obj.Spec.ConfigSource, old.Spec.ConfigSource) {
		return forbidden(req, "node %q is not allowed to update configSource to a new non-nil configSource", node)
	}
	if !apiequality.Semantic.DeepEqual(obj.Spec.Taints, old.Spec.Taints) {
		return forbidden(req, "node %q is not allowed to modify taints", node)
	}
	if bad := forbiddenLabels(modifiedLabels(obj.Labels, old.Labels)); len(bad) > 0 {
		return forbidden(req, "is not allowed to modify labels: %s", strings.Join(bad, ", "))
	}
	return nil
}

// modifiedLabels returns the keys added, removed or changed between a and b.
func modifiedLabels(a, b map[string]string) []string {
	var keys []string
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			keys = append(keys, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// forbiddenLabels returns, sorted, the keys a kubelet may not set: those under
// node-restriction.kubernetes.io/, and kubernetes.io or k8s.io ones other than the
// kubelet's own labels and namespaces.
func forbiddenLabels(keys []string) []string {
	var bad []string
	for _, k := range keys {
		ns, _, _ := strings.Cut(k, "/")
		if !strings.Contains(k, "/") {
			ns = ""
		}
		restricted := ns == v1.LabelNamespaceNodeRestriction || strings.HasSuffix(ns, "."+v1.LabelNamespaceNodeRestriction)
		kubernetes := ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") || ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")
		if restricted || (kubernetes && !kubeletapis.IsKubeletLabel(k)) {
			bad = append(bad, k)
		}
	}
	slices.Sort(bad)
	return bad
}

// admitLease lets a node write only its own Lease in kube-node-lease.
func admitLease(node string, req *apiserver.AdmissionRequest) error {
	if req.Namespace != authz.NodeLeaseNamespace {
		return forbidden(req, "can only access leases in the %q system namespace", authz.NodeLeaseNamespace)
	}
	if req.Name != node {
		return forbidden(req, "can only access node lease with the same name as the requesting node")
	}
	return nil
}

// AdmitTokenRequest checks a TokenRequest for serviceaccounts/NAME/token in
// namespace made by user: a node must bind the token to a pod scheduled on it, named
// with its UID. Other users pass.
func (p *Plugin) AdmitTokenRequest(user *authn.User, namespace, name string, tr *authenticationv1.TokenRequest) error {
	node, ok := authz.NodeName(user)
	if !ok {
		return nil
	}
	deny := func(msg string) error { return apierrors.NewForbidden(saResource, name, errors.New(msg)) }
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" || ref.Name == "" {
		return deny("node requested token not bound to a pod")
	}
	if ref.UID == "" {
		return deny("node requested token with a pod binding without a uid")
	}
	pod, err := p.lookup.Pod(namespace, ref.Name)
	if apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		return apierrors.NewForbidden(saResource, name, err)
	}
	if ref.UID != pod.UID {
		return deny(fmt.Sprintf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	if pod.Spec.NodeName != node {
		return deny("node requested token bound to a pod scheduled on a different node")
	}
	return nil
}
