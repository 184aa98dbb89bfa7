package server

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/auth/authn"
	"github.com/tranche/tranche/internal/auth/authz"
	rbacpolicy "github.com/tranche/tranche/internal/auth/bootstrap"
)

// bootstrapRBAC creates the default ClusterRoles and ClusterRoleBindings and keeps
// those marked autoupdate current. Aggregated roles (admin, edit, view) are written
// with the rules of the roles they aggregate, so `kubectl get clusterrole view -o yaml`
// shows what the authorizer evaluates.
func bootstrapRBAC(ctx context.Context, client kubernetes.Interface) error {
	roles := rbacpolicy.ClusterRoles()
	all := make([]*rbacv1.ClusterRole, len(roles))
	for i := range roles {
		all[i] = &roles[i]
	}
	for i := range roles {
		role := roles[i].DeepCopy()
		if role.AggregationRule != nil {
			role.Rules = authz.AggregateRules(role, all)
		}
		if err := ensureClusterRole(ctx, client, role); err != nil {
			return err
		}
	}
	for _, b := range rbacpolicy.ClusterRoleBindings() {
		b := b
		_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &b, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("clusterrolebinding %s: %w", b.Name, err)
		}
	}
	return nil
}

func ensureClusterRole(ctx context.Context, client kubernetes.Interface, role *rbacv1.ClusterRole) error {
	cur, err := client.RbacV1().ClusterRoles().Get(ctx, role.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("clusterrole %s: %w", role.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("clusterrole %s: %w", role.Name, err)
	}
	if cur.Annotations[rbacpolicy.AutoUpdateAnnotation] == "false" {
		return nil
	}
	rules := role.Rules
	if role.AggregationRule != nil && cur.AggregationRule != nil {
		// The aggregation controller owns an aggregated role's rules (they include
		// roles created since); bootstrap's are only their first value.
		rules = cur.Rules
	}
	if apiequality.Semantic.DeepEqual(cur.Rules, rules) && apiequality.Semantic.DeepEqual(cur.AggregationRule, role.AggregationRule) {
		return nil
	}
	cur.Rules, cur.AggregationRule = rules, role.AggregationRule
	if _, err := client.RbacV1().ClusterRoles().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("clusterrole %s: %w", role.Name, err)
	}
	return nil
}

// rbacEscalation is the API server's guard against privilege escalation through the
// RBAC API, Kubernetes' policybased role and binding storages as a validating step:
//
//   - a Role or ClusterRole may be written only by a user who holds every permission it
//     grants (in the Role's namespace; cluster-wide for a ClusterRole) or who may
//     "escalate" roles or clusterroles there; setting or changing an aggregationRule
//     needs full authority (cluster-admin's rules);
//   - a RoleBinding or ClusterRoleBinding may be written only by a user who may "bind"
//     the role it references (in the binding's namespace) or who holds the role's
//     permissions there;
//   - members of system:masters always pass, and updates that change only what the
//     garbage collector writes (owner references, finalizers) are not checked.
//
// Refusals are 403 Forbidden with Kubernetes' wording, naming the missing rules. It
// runs as the last Mutator (it changes nothing), after mutating admission and before
// the resource's strategy validates, where Kubernetes' policybased storages check: an
// escalating role that is also invalid is refused with 403, not 422.
type rbacEscalation struct {
	sec *security
}

var (
	_ apiserver.Validator = (*rbacEscalation)(nil)
	_ apiserver.Mutator   = (*rbacEscalation)(nil)
)

// Mutate implements apiserver.Mutator with Validate's check.
func (v *rbacEscalation) Mutate(ctx context.Context, req *apiserver.AdmissionRequest) error {
	_, err := v.Validate(ctx, req)
	return err
}

// Validate implements apiserver.Validator.
func (v *rbacEscalation) Validate(ctx context.Context, req *apiserver.AdmissionRequest) ([]string, error) {
	if req.Resource.Group != rbacv1.GroupName || req.Subresource != "" {
		return nil, nil
	}
	user := userFrom(ctx)
	if user.InGroup(authn.GroupMasters) {
		return nil, nil
	}
	if req.Operation == apiserver.AdmitUpdate && onlyGCFieldsChanged(req.Object, req.OldObject) {
		return nil, nil
	}
	gr := req.Resource.GroupResource()
	switch obj := req.Object.(type) {
	case *rbacv1.Role:
		if authz.EscalationAuthorized(ctx, v.sec.authorizer, user, gr.Resource, req.Namespace, req.Name) {
			return nil, nil
		}
		return nil, v.confirm(gr, req.Name, user, req.Namespace, obj.Rules)
	case *rbacv1.ClusterRole:
		if authz.EscalationAuthorized(ctx, v.sec.authorizer, user, gr.Resource, "", req.Name) {
			return nil, nil
		}
		if err := v.confirm(gr, req.Name, user, "", obj.Rules); err != nil {
			return nil, err
		}
		old, _ := req.OldObject.(*rbacv1.ClusterRole)
		if hasAggregationRule(obj) || (old != nil && hasAggregationRule(old)) {
			if v.sec.rbac.ConfirmNoEscalation(user, "", authz.FullAuthority()) != nil {
				return nil, apierrors.NewForbidden(gr, req.Name, errors.New("must have cluster-admin privileges to use the aggregationRule"))
			}
		}
		return nil, nil
	case *rbacv1.RoleBinding:
		return nil, v.confirmBinding(ctx, gr, req.Name, user, obj.RoleRef, req.Namespace)
	case *rbacv1.ClusterRoleBinding:
		return nil, v.confirmBinding(ctx, gr, req.Name, user, obj.RoleRef, "")
	}
	return nil, nil
}

// confirm refuses rules user does not hold in namespace with Kubernetes' Forbidden.
func (v *rbacEscalation) confirm(gr schema.GroupResource, name string, user *authn.User, namespace string, rules []rbacv1.PolicyRule) error {
	if err := v.sec.rbac.ConfirmNoEscalation(user, namespace, rules); err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	return nil
}

// confirmBinding lets a binding of ref in namespace through when user may bind the
// role or holds its rules. A role that cannot be read is that error (NotFound for a
// missing role), as in Kubernetes.
func (v *rbacEscalation) confirmBinding(ctx context.Context, gr schema.GroupResource, name string, user *authn.User, ref rbacv1.RoleRef, namespace string) error {
	if authz.BindingAuthorized(ctx, v.sec.authorizer, user, ref, namespace) {
		return nil
	}
	rules, err := v.sec.rbac.RoleRefRules(ref, namespace)
	if err != nil {
		return err
	}
	return v.confirm(gr, name, user, namespace, rules)
}

func hasAggregationRule(r *rbacv1.ClusterRole) bool {
	return r.AggregationRule != nil && len(r.AggregationRule.ClusterRoleSelectors) > 0
}

// onlyGCFieldsChanged reports whether obj differs from old only in owner references,
// finalizers and managed fields, which the garbage collector must be able to change
// on any role or binding.
func onlyGCFieldsChanged(obj, old runtime.Object) bool {
	if obj == nil || old == nil || reflect.ValueOf(old).IsNil() {
		return false
	}
	cp := obj.DeepCopyObject()
	m, err := meta.Accessor(cp)
	if err != nil {
		return false
	}
	o, err := meta.Accessor(old)
	if err != nil {
		return false
	}
	m.SetOwnerReferences(o.GetOwnerReferences())
	m.SetFinalizers(o.GetFinalizers())
	m.SetManagedFields(o.GetManagedFields())
	return apiequality.Semantic.DeepEqual(cp, old)
}
