package authz

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	userinfo "k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	rbacvalidation "k8s.io/kubernetes/pkg/registry/rbac/validation"

	"github.com/tranche/tranche/internal/auth/authn"
)

// Escalation prevention, as Kubernetes' policybased RBAC storages do it: a user may
// only write a role granting, or a binding to a role holding, permissions they already
// have where the object applies, unless they may "escalate" roles or "bind" the role.
// The coverage check and the refusal text are upstream's own
// (k8s.io/kubernetes/pkg/registry/rbac/validation.ConfirmNoEscalation), run over the
// rules this authorizer resolves, so what a user "holds" is exactly what RBAC allows.

// ConfirmNoEscalation returns nil when the rules user holds in namespace (cluster-wide
// bindings included; namespace "" means cluster-wide only) cover every rule in rules.
// Otherwise it returns Kubernetes' error: `user "u" (groups=["g"]) is attempting to
// grant RBAC permissions not currently held:` followed by the missing rules, compacted,
// one per line, and any errors met resolving the user's bindings. The caller wraps it
// in a Forbidden status naming the object.
func (r *RBAC) ConfirmNoEscalation(u *authn.User, namespace string, rules []rbacv1.PolicyRule) error {
	if u == nil {
		return fmt.Errorf("no user on context")
	}
	ctx := genericapirequest.WithUser(context.Background(), &userinfo.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra})
	ctx = genericapirequest.WithNamespace(ctx, namespace)
	return rbacvalidation.ConfirmNoEscalation(ctx, ruleResolver{r}, rules)
}

// RoleRefRules returns the rules a binding in namespace ("" for a ClusterRoleBinding)
// with roleRef would grant: a Role's or a ClusterRole's stored rules (those of an
// aggregated ClusterRole are kept by the aggregation controller). A missing role is a NotFound error from the RuleSource.
func (r *RBAC) RoleRefRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	return r.roleRefRules(ref, namespace)
}

// EscalationAuthorized reports whether az allows u the "escalate" verb on the RBAC
// resource ("roles" or "clusterroles") named name in namespace, which lets u write
// that role with any rules.
func EscalationAuthorized(ctx context.Context, az Authorizer, u *authn.User, resource, namespace, name string) bool {
	return allowed(ctx, az, Attributes{User: u, Verb: "escalate", APIGroup: rbacv1.GroupName, APIVersion: "*",
		Resource: resource, Namespace: namespace, Name: name, ResourceRequest: true})
}

// BindingAuthorized reports whether az allows u the "bind" verb on the role ref
// names, checked in the binding's namespace ("" for a ClusterRoleBinding), which
// lets u bind that role without holding its permissions.
func BindingAuthorized(ctx context.Context, az Authorizer, u *authn.User, ref rbacv1.RoleRef, namespace string) bool {
	a := Attributes{User: u, Verb: "bind", APIGroup: ref.APIGroup, APIVersion: "*", Namespace: namespace, Name: ref.Name, ResourceRequest: true}
	switch ref.Kind {
	case "ClusterRole":
		a.Resource = "clusterroles"
	case "Role":
		a.Resource = "roles"
	default:
		return false
	}
	return allowed(ctx, az, a)
}

// allowed is an authorizer's Allow; an error with any other decision is a refusal,
// as in Kubernetes, where it is only logged.
func allowed(ctx context.Context, az Authorizer, a Attributes) bool {
	if az == nil || a.User == nil {
		return false
	}
	d, _, _ := az.Authorize(ctx, a)
	return d == Allow
}

// ruleResolver gives upstream's escalation check the rules RBAC resolves.
type ruleResolver struct{ r *RBAC }

var _ rbacvalidation.AuthorizationRuleResolver = ruleResolver{}

func (x ruleResolver) GetRoleReferenceRules(_ context.Context, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	return x.r.roleRefRules(ref, namespace)
}

func (x ruleResolver) RulesFor(ctx context.Context, u userinfo.Info, namespace string) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	var errs []error
	x.VisitRulesFor(ctx, u, namespace, func(_ fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil {
			rules = append(rules, *rule)
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	return rules, utilerrors.NewAggregate(errs)
}

func (x ruleResolver) VisitRulesFor(_ context.Context, u userinfo.Info, namespace string, visitor func(source fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool) {
	au := &authn.User{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra()}
	if au.InGroup(authn.GroupMasters) {
		for i := range fullAuthority {
			if !visitor(nil, &fullAuthority[i], nil) {
				return
			}
		}
	}
	stopped := false
	errs := x.r.visitRules(au, namespace, func(source fmt.Stringer, rule *rbacv1.PolicyRule) bool {
		if !visitor(source, rule, nil) {
			stopped = true
			return false
		}
		return true
	})
	for _, err := range errs {
		if stopped || !visitor(nil, nil, err) {
			return
		}
	}
}

// fullAuthority is what system:masters holds: everything, as the authorizer allows.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// FullAuthority returns the rules of cluster-admin: every verb on every resource and
// non-resource URL. Kubernetes requires a user to hold them to set or change a
// ClusterRole's aggregationRule, which can gather anything.
func FullAuthority() []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(fullAuthority))
	for i := range fullAuthority {
		out[i] = *fullAuthority[i].DeepCopy()
	}
	return out
}
