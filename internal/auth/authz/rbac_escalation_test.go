package authz

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/auth/authn"
	"github.com/tranche/tranche/internal/auth/bootstrap"
)

func urlRule(verbs []string, urls ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: urls}
}

func names(n ...string) func(*rbacv1.PolicyRule) {
	return func(r *rbacv1.PolicyRule) { r.ResourceNames = n }
}

func TestConfirmNoEscalation(t *testing.T) {
	jane := &authn.User{Name: "jane", Groups: []string{"dev", "system:authenticated"}}
	master := &authn.User{Name: "root", Groups: []string{"system:masters"}}
	src := &fakeRBAC{
		clusterRoles: []*rbacv1.ClusterRole{
			makeClusterRole("pods", nil, rule([]string{"get", "list"}, []string{""}, []string{"pods"}, nil)),
			makeClusterRole("logs", nil, rule([]string{"get"}, []string{""}, []string{"pods/log"}, nil)),
			makeClusterRole("any-status", nil, rule([]string{"update"}, []string{"*"}, []string{"*/status"}, nil)),
			makeClusterRole("one-cm", nil, rule([]string{"get", "update"}, []string{""}, []string{"configmaps"}, names("settings"))),
			makeClusterRole("metrics", nil, urlRule([]string{"get"}, "/metrics", "/logs/*")),
			makeClusterRole("apps-all", nil, rule([]string{"*"}, []string{"apps"}, []string{"*"}, nil)),
			makeClusterRole("any-group-jobs", nil, rule([]string{"create"}, []string{"*"}, []string{"jobs"}, nil)),
			makeClusterRole("agg", func(r *rbacv1.ClusterRole) {
				r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"agg": "true"}}}}
				// As the aggregation controller stores it.
				r.Rules = []rbacv1.PolicyRule{rule([]string{"delete"}, []string{"batch"}, []string{"cronjobs"}, nil)}
			}),
			makeClusterRole("agg-part", func(r *rbacv1.ClusterRole) { r.Labels = map[string]string{"agg": "true"} },
				rule([]string{"delete"}, []string{"batch"}, []string{"cronjobs"}, nil)),
		},
		clusterRoleBindings: []*rbacv1.ClusterRoleBinding{
			makeCRB("jane-metrics", "metrics", user("jane")),
			makeCRB("dev-logs", "logs", group("dev")),
			makeCRB("jane-agg", "agg", user("jane")),
		},
		roles: []*rbacv1.Role{
			makeRole("t1", "secrets", rule([]string{"get"}, []string{""}, []string{"secrets"}, nil)),
		},
		roleBindings: []*rbacv1.RoleBinding{
			makeRB("t1", "jane-pods", "ClusterRole", "pods", user("jane")),
			makeRB("t1", "jane-status", "ClusterRole", "any-status", user("jane")),
			makeRB("t1", "jane-cm", "ClusterRole", "one-cm", user("jane")),
			makeRB("t1", "jane-apps", "ClusterRole", "apps-all", user("jane")),
			makeRB("t1", "jane-jobs", "ClusterRole", "any-group-jobs", user("jane")),
			makeRB("t1", "jane-secrets", "Role", "secrets", user("jane")),
			makeRB("t1", "jane-broken", "Role", "missing", user("jane")),
		},
	}
	z := NewRBAC(src)
	// A binding to a missing role is reported after the missing rules, as upstream does.
	const missingRole = `role.rbac.authorization.k8s.io "missing" not found`
	const prefix = `user "jane" (groups=["dev" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:` + "\n"
	cases := []struct {
		name      string
		user      *authn.User
		namespace string
		rules     []rbacv1.PolicyRule
		// missing is the expected list of missing rules; empty means allowed.
		missing string
		// resolution is expected after the missing rules when bindings failed.
		resolution string
	}{
		{name: "held exactly", user: jane, namespace: "t1", rules: []rbacv1.PolicyRule{rule([]string{"get", "list"}, []string{""}, []string{"pods"}, nil)}},
		{name: "subset of verbs", user: jane, namespace: "t1", rules: []rbacv1.PolicyRule{rule([]string{"list"}, []string{""}, []string{"pods"}, nil)}},
		{name: "extra verb", user: jane, namespace: "t1", rules: []rbacv1.PolicyRule{rule([]string{"get", "delete"}, []string{""}, []string{"pods"}, nil)},
			missing: `{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}`, resolution: missingRole},
		{name: "other namespace holds nothing namespaced", user: jane, namespace: "t2", rules: []rbacv1.PolicyRule{rule([]string{"get"}, []string{""}, []string{"pods"}, nil)},
			missing: `{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`},
		{name: "cluster binding counts in every namespace", user: jane, namespace: "t2", rules: []rbacv1.PolicyRule{rule([]string{"get"}, []string{""}, []string{"pods/log"}, nil)}},
		{name: "wildcard verb and resource asked", user: jane, namespace: "t1", rules: []rbacv1.PolicyRule{rule([]string{"*"}, []string{"*"}, []string{"*"}, nil)},
			missing: `{APIGroups:["*"], Resources:["*"], Verbs:["*"]}`, resolution: missingRole},
		{name: "wildcard resource held in group", user: jane, namespace: "t1", rules: []rbacv1.PolicyRule{rule([]string{"create", "patch"}, []string{"apps"}, []string{"deployments", "statefulsets/scale"}, nil)}},
		{name: "wildcard resource held only in its group", user: jane, namespace: "t1", rules: []rbacv1.PolicyRule{rule([]string{"create"}, []string{"batch"}, []string{"deployments"}, nil)},
			missing: `{APIGroups:["batch"], Resources:["deployments"], Verbs:["create"]}`, resolution: missingRole},
		{name: "apiGroups star held covers any group", user: jane, namespace: "t1", rules: []rbacv1.PolicyRule{rule([]string{"create"}, []string{"batch", "example.com"}, []string{"jobs"}, nil)}},
		{name: "apiGroups star asked is not covered by named groups", user: jane, namespace: "t1", rules: []rbacv1.PolicyRule{rule([]string{"get"}, []string{"*"}, []string{"pods"}, nil)},
			missing: `{APIGroups:["*"], Resources:["pods"], Verbs:["get"]}`, resolution: missingRole},
		{name: "subresource star held", user: jane, namespace: "t1", rules: []rbacv1.PolicyRule{rule([]string{"update"}, []string{"apps"}, []string{"deployments/status"}, nil)}},
		{name: "subresource does not cover its resource", user: jane, namespace: "t2", rules: []rbacv1.PolicyRule{rule([]string{"get"}, []string{""}, []string{"pods"}, nil)},
			missing: `{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`},
		{name: "resource does not cover its subresource", user: jane, namespace: "t1", rules: []rbacv1.PolicyRule{rule([]string{"get"}, []string{""}, []string{"pods/exec"}, nil)},
			missing: `{APIGroups:[""], Resources:["pods/exec"], Verbs:["get"]}`, resolution: missingRole},
		{name: "named resource held", user: jane, namespace: "t1", rules: []rbacv1.PolicyRule{rule([]string{"update"}, []string{""}, []string{"configmaps"}, names("settings"))}},
		{name: "other name", user: jane, namespace: "t1", rules: []rbacv1.PolicyRule{rule([]string{"update"}, []string{""}, []string{"configmaps"}, names("settings", "other"))},
			missing: `{APIGroups:[""], Resources:["configmaps"], ResourceNames:["other"], Verbs:["update"]}`, resolution: missingRole},
		{name: "names held do not cover all names", user: jane, namespace: "t1", rules: []rbacv1.PolicyRule{rule([]string{"get"}, []string{""}, []string{"configmaps"}, nil)},
			missing: `{APIGroups:[""], Resources:["configmaps"], Verbs:["get"]}`, resolution: missingRole},
		{name: "role in namespace", user: jane, namespace: "t1", rules: []rbacv1.PolicyRule{rule([]string{"get"}, []string{""}, []string{"secrets"}, nil)}},
		{name: "non-resource URL held", user: jane, rules: []rbacv1.PolicyRule{urlRule([]string{"get"}, "/metrics", "/logs/kubelet")}},
		{name: "non-resource URL prefix not held", user: jane, rules: []rbacv1.PolicyRule{urlRule([]string{"get"}, "/logs*", "/healthz")},
			missing: `{NonResourceURLs:["/healthz"], Verbs:["get"]}` + "\n" + `{NonResourceURLs:["/logs*"], Verbs:["get"]}`},
		{name: "aggregated role's parts are held", user: jane, rules: []rbacv1.PolicyRule{rule([]string{"delete"}, []string{"batch"}, []string{"cronjobs"}, nil)}},
		{name: "masters hold everything", user: master, namespace: "t1", rules: FullAuthority()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := z.ConfirmNoEscalation(tc.user, tc.namespace, tc.rules)
			if tc.missing == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("allowed, want refused")
			}
			want := prefix + tc.missing
			if tc.resolution != "" {
				want += "; resolution errors: [" + tc.resolution + "]"
			}
			if err.Error() != want {
				t.Errorf("error\n got: %s\nwant: %s", err, want)
			}
		})
	}
}

func TestConfirmNoEscalationWithoutUser(t *testing.T) {
	err := NewRBAC(&fakeRBAC{}).ConfirmNoEscalation(nil, "", nil)
	if err == nil || !strings.Contains(err.Error(), "no user") {
		t.Fatalf("got %v, want a refusal for a missing user", err)
	}
}

func TestEscalateAndBindVerbs(t *testing.T) {
	jane := &authn.User{Name: "jane"}
	src := &fakeRBAC{
		clusterRoles: []*rbacv1.ClusterRole{
			makeClusterRole("bind-admin", nil, rule([]string{"bind"}, []string{"rbac.authorization.k8s.io"}, []string{"clusterroles"}, names("cluster-admin"))),
			makeClusterRole("escalate-roles", nil, rule([]string{"escalate"}, []string{"rbac.authorization.k8s.io"}, []string{"roles"}, nil)),
		},
		roleBindings: []*rbacv1.RoleBinding{
			makeRB("t1", "jane-bind", "ClusterRole", "bind-admin", user("jane")),
			makeRB("t1", "jane-escalate", "ClusterRole", "escalate-roles", user("jane")),
		},
	}
	z := NewRBAC(src)
	ctx := context.Background()
	ref := func(kind, name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	}
	bindCases := []struct {
		name      string
		ref       rbacv1.RoleRef
		namespace string
		want      bool
	}{
		{"named cluster role in namespace", ref("ClusterRole", "cluster-admin"), "t1", true},
		{"other cluster role", ref("ClusterRole", "admin"), "t1", false},
		{"other namespace", ref("ClusterRole", "cluster-admin"), "t2", false},
		{"cluster-wide", ref("ClusterRole", "cluster-admin"), "", false},
		{"role of that name", ref("Role", "cluster-admin"), "t1", false},
		{"unknown kind", ref("Group", "cluster-admin"), "t1", false},
	}
	for _, tc := range bindCases {
		t.Run("bind/"+tc.name, func(t *testing.T) {
			if got := BindingAuthorized(ctx, z, jane, tc.ref, tc.namespace); got != tc.want {
				t.Errorf("BindingAuthorized = %v, want %v", got, tc.want)
			}
		})
	}
	escalateCases := []struct {
		name, resource, namespace string
		want                      bool
	}{
		{"roles in namespace", "roles", "t1", true},
		{"roles elsewhere", "roles", "t2", false},
		{"clusterroles", "clusterroles", "", false},
	}
	for _, tc := range escalateCases {
		t.Run("escalate/"+tc.name, func(t *testing.T) {
			if got := EscalationAuthorized(ctx, z, jane, tc.resource, tc.namespace, "r"); got != tc.want {
				t.Errorf("EscalationAuthorized = %v, want %v", got, tc.want)
			}
		})
	}
	if EscalationAuthorized(ctx, z, nil, "roles", "t1", "r") || BindingAuthorized(ctx, nil, jane, ref("ClusterRole", "x"), "t1") {
		t.Error("a missing user or authorizer must not be authorized")
	}
}

// BenchmarkEscalationCheck prices the check a namespace admin's "create rolebinding
// --clusterrole=edit" pays, over the default roles, beside the authorization of one
// request by the same user (the price every request already pays).
func BenchmarkEscalationCheck(b *testing.B) {
	roles := bootstrap.ClusterRoles()
	src := &fakeRBAC{roleBindings: []*rbacv1.RoleBinding{makeRB("t1", "adm", "ClusterRole", "admin", user("adm"))}}
	for i := range roles {
		src.clusterRoles = append(src.clusterRoles, &roles[i])
	}
	for _, crb := range bootstrap.ClusterRoleBindings() {
		src.clusterRoleBindings = append(src.clusterRoleBindings, &crb)
	}
	z := NewRBAC(src)
	adm := &authn.User{Name: "adm", Groups: []string{"system:authenticated"}}
	edit, err := z.RoleRefRules(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}, "t1")
	if err != nil || len(edit) == 0 {
		b.Fatalf("edit rules: %v (%d)", err, len(edit))
	}
	b.Run("authorize-one-request", func(b *testing.B) {
		a := resAttrs(adm, "create", rbacv1.GroupName, "rolebindings", "", "t1", "")
		for b.Loop() {
			if d, _, _ := z.Authorize(context.Background(), a); d != Allow {
				b.Fatal("not allowed")
			}
		}
	})
	b.Run("confirm-edit-binding", func(b *testing.B) {
		for b.Loop() {
			if err := z.ConfirmNoEscalation(adm, "t1", edit); err != nil {
				b.Fatal(err)
			}
		}
	})
}
