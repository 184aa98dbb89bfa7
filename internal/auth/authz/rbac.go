package authz

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/tranche/tranche/internal/auth/authn"
)

// RuleSource reads RBAC objects, typically from informer caches. Get methods should
// return a Kubernetes NotFound error (apierrors.NewNotFound) for a missing role, so
// the denial reason reads as in Kubernetes (`clusterrole.rbac.authorization.k8s.io
// "x" not found`). A ClusterRole with an aggregationRule is read as stored: the
// aggregation controller keeps its rules, as kube-controller-manager's does.
type RuleSource interface {
	ListClusterRoleBindings() ([]*rbacv1.ClusterRoleBinding, error)
	GetClusterRole(name string) (*rbacv1.ClusterRole, error)
	ListRoleBindings(namespace string) ([]*rbacv1.RoleBinding, error)
	GetRole(namespace, name string) (*rbacv1.Role, error)
}

// RBAC authorizes with Kubernetes' RBAC semantics over a RuleSource, and allows
// members of system:masters everything. Like upstream's rule resolver it lists the
// bindings, keeps those naming the user and reads their roles' stored rules: no
// aggregation and no allocation per rule on the request path.
type RBAC struct {
	source RuleSource
}

var _ Authorizer = (*RBAC)(nil)

// NewRBAC returns an RBAC authorizer reading source.
func NewRBAC(source RuleSource) *RBAC {
	return &RBAC{source: source}
}

// Authorize implements Authorizer. It allows when any rule bound to the user allows
// (reason "RBAC: allowed by ..."); otherwise it has no opinion, with reason
// "RBAC: <errors>" when bindings could not be resolved.
func (r *RBAC) Authorize(_ context.Context, a Attributes) (Decision, string, error) {
	if a.User.InGroup(authn.GroupMasters) {
		return Allow, "", nil
	}
	var allowedBy fmt.Stringer
	errs := r.visitRules(a.User, a.Namespace, func(source fmt.Stringer, rule *rbacv1.PolicyRule) bool {
		if RuleAllows(a, rule) {
			allowedBy = source
			return false
		}
		return true
	})
	if allowedBy != nil {
		return Allow, "RBAC: allowed by " + allowedBy.String(), nil
	}
	if len(errs) > 0 {
		return NoOpinion, "RBAC: " + utilerrors.NewAggregate(errs).Error(), nil
	}
	return NoOpinion, "", nil
}

// RulesFor returns the rules user has in namespace (cluster-wide bindings included),
// split into resource and non-resource rules as SelfSubjectRulesReview reports them
// (`kubectl auth can-i --list`). An error means the list is incomplete; the rules
// that could be resolved are returned with it.
func (r *RBAC) RulesFor(user *authn.User, namespace string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, error) {
	var resource []authorizationv1.ResourceRule
	var nonResource []authorizationv1.NonResourceRule
	add := func(rule *rbacv1.PolicyRule) {
		if len(rule.Resources) > 0 {
			resource = append(resource, authorizationv1.ResourceRule{
				Verbs:         slices.Clone(rule.Verbs),
				APIGroups:     slices.Clone(rule.APIGroups),
				Resources:     slices.Clone(rule.Resources),
				ResourceNames: slices.Clone(rule.ResourceNames),
			})
		}
		if len(rule.NonResourceURLs) > 0 {
			nonResource = append(nonResource, authorizationv1.NonResourceRule{
				Verbs:           slices.Clone(rule.Verbs),
				NonResourceURLs: slices.Clone(rule.NonResourceURLs),
			})
		}
	}
	if user.InGroup(authn.GroupMasters) {
		add(&rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}})
		add(&rbacv1.PolicyRule{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}})
	}
	errs := r.visitRules(user, namespace, func(_ fmt.Stringer, rule *rbacv1.PolicyRule) bool {
		add(rule)
		return true
	})
	return resource, nonResource, utilerrors.NewAggregate(errs)
}

// visitRules calls visit for every rule bound to user: cluster role bindings first,
// then the role bindings of namespace. visit returns false to stop. Resolution errors
// are collected, not fatal: one broken binding must not hide the others. The source
// describes the binding when asked, so that visiting costs no formatting.
func (r *RBAC) visitRules(user *authn.User, namespace string, visit func(source fmt.Stringer, rule *rbacv1.PolicyRule) bool) []error {
	if user == nil {
		return nil
	}
	var errs []error
	crbs, err := r.source.ListClusterRoleBindings()
	if err != nil {
		errs = append(errs, err)
	}
	for _, b := range crbs {
		subject := matchingSubject(user, b.Subjects, "")
		if subject == nil {
			continue
		}
		rules, err := r.roleRefRules(b.RoleRef, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		source := bindingSource{kind: "ClusterRoleBinding", name: b.Name, ref: &b.RoleRef, subject: subject}
		for i := range rules {
			if !visit(source, &rules[i]) {
				return errs
			}
		}
	}
	if namespace == "" {
		return errs
	}
	rbs, err := r.source.ListRoleBindings(namespace)
	if err != nil {
		errs = append(errs, err)
	}
	for _, b := range rbs {
		subject := matchingSubject(user, b.Subjects, namespace)
		if subject == nil {
			continue
		}
		rules, err := r.roleRefRules(b.RoleRef, namespace)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		source := bindingSource{kind: "RoleBinding", name: b.Name, namespace: b.Namespace, ref: &b.RoleRef, subject: subject}
		for i := range rules {
			if !visit(source, &rules[i]) {
				return errs
			}
		}
	}
	return errs
}

// bindingSource names the binding a rule came from in an Allow's reason.
type bindingSource struct {
	kind, name, namespace string
	ref                   *rbacv1.RoleRef
	subject               *rbacv1.Subject
}

func (s bindingSource) String() string {
	name := s.name
	if s.namespace != "" {
		// Kubernetes prints "name/namespace" here; kept for identical audit text.
		name += "/" + s.namespace
	}
	return fmt.Sprintf("%s %q of %s %q to %s", s.kind, name, s.ref.Kind, s.ref.Name, describeSubject(s.subject, s.namespace))
}

// roleRefRules resolves a binding's roleRef: a Role in namespace, or a ClusterRole,
// each with the rules it has stored.
func (r *RBAC) roleRefRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "Role":
		role, err := r.source.GetRole(namespace, ref.Name)
		if err != nil {
			return nil, err
		}
		return role.Rules, nil
	case "ClusterRole":
		role, err := r.source.GetClusterRole(ref.Name)
		if err != nil {
			return nil, err
		}
		return role.Rules, nil
	default:
		return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
	}
}

// AggregateRules returns the effective rules of role among all cluster roles: its own
// rules when it has no aggregationRule, otherwise the rules of every other cluster role
// whose labels match one of its clusterRoleSelectors, themselves aggregated, without
// duplicates, selector by selector and in order of role name — what Kubernetes'
// aggregation controller (internal/controller/clusterroleaggregation) converges to.
// Bootstrap writes the default aggregated roles with it; the authorizer never calls it.
func AggregateRules(role *rbacv1.ClusterRole, all []*rbacv1.ClusterRole) []rbacv1.PolicyRule {
	sorted := slices.Clone(all)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	return aggregate(role, sorted, map[string]bool{})
}

func aggregate(role *rbacv1.ClusterRole, all []*rbacv1.ClusterRole, visiting map[string]bool) []rbacv1.PolicyRule {
	if role.AggregationRule == nil {
		return role.Rules
	}
	visiting[role.Name] = true
	defer delete(visiting, role.Name)
	var selectors []labels.Selector
	for i := range role.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			// API validation rejects bad selectors; one that slipped in selects nothing.
			continue
		}
		selectors = append(selectors, sel)
	}
	var rules []rbacv1.PolicyRule
	for _, sel := range selectors {
		for _, other := range all {
			if other == nil || visiting[other.Name] || !sel.Matches(labels.Set(other.Labels)) {
				continue
			}
			for _, rule := range aggregate(other, all, visiting) {
				if !slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return apiequality.Semantic.DeepEqual(r, rule) }) {
					rules = append(rules, rule)
				}
			}
		}
	}
	return rules
}

// matchingSubject returns the first subject that names user. A ServiceAccount subject
// without a namespace means the binding's namespace; in a cluster role binding
// (namespace "") it matches nobody.
func matchingSubject(user *authn.User, subjects []rbacv1.Subject, namespace string) *rbacv1.Subject {
	for i := range subjects {
		s := &subjects[i]
		switch s.Kind {
		case rbacv1.UserKind:
			if user.Name == s.Name {
				return s
			}
		case rbacv1.GroupKind:
			if user.InGroup(s.Name) {
				return s
			}
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = namespace
			}
			if ns != "" && user.Name == authn.ServiceAccountUsername(ns, s.Name) {
				return s
			}
		}
	}
	return nil
}

func describeSubject(s *rbacv1.Subject, bindingNamespace string) string {
	if s.Kind == rbacv1.ServiceAccountKind {
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+ns)
	}
	return fmt.Sprintf("%s %q", s.Kind, s.Name)
}

// RuleAllows reports whether rule allows a, with Kubernetes' matching: "*" matches
// any verb, API group or resource; a resource may be "resource/subresource" or
// "*/subresource"; resourceNames, when set, must contain a.Name (so they never match
// unnamed requests such as list or create); non-resource URLs match exactly or by a
// prefix ending in "*".
func RuleAllows(a Attributes, rule *rbacv1.PolicyRule) bool {
	if !matchesOrStar(rule.Verbs, a.Verb) {
		return false
	}
	if !a.ResourceRequest {
		return nonResourceURLMatches(rule.NonResourceURLs, a.Path)
	}
	combined := a.Resource
	if a.Subresource != "" {
		combined += "/" + a.Subresource
	}
	return matchesOrStar(rule.APIGroups, a.APIGroup) &&
		resourceMatches(rule.Resources, combined, a.Subresource) &&
		(len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, a.Name))
}

func matchesOrStar(values []string, want string) bool {
	for _, v := range values {
		if v == "*" || v == want {
			return true
		}
	}
	return false
}

func resourceMatches(resources []string, combined, subresource string) bool {
	for _, r := range resources {
		if r == "*" || r == combined {
			return true
		}
		if subresource != "" && r == "*/"+subresource {
			return true
		}
	}
	return false
}

func nonResourceURLMatches(urls []string, path string) bool {
	for _, u := range urls {
		if u == "*" || u == path {
			return true
		}
		if strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimRight(u, "*")) {
			return true
		}
	}
	return false
}
