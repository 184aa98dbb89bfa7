package authz

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/auth/authn"
)

// fakeRBAC is an in-memory RuleSource answering NotFound like a real cache would.
type fakeRBAC struct {
	clusterRoles        []*rbacv1.ClusterRole
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
	roles               []*rbacv1.Role
	roleBindings        []*rbacv1.RoleBinding
}

var _ RuleSource = (*fakeRBAC)(nil)

func (f *fakeRBAC) ListClusterRoleBindings() ([]*rbacv1.ClusterRoleBinding, error) {
	return f.clusterRoleBindings, nil
}
func (f *fakeRBAC) ListClusterRoles() ([]*rbacv1.ClusterRole, error) { return f.clusterRoles, nil }
func (f *fakeRBAC) GetClusterRole(name string) (*rbacv1.ClusterRole, error) {
	for _, r := range f.clusterRoles {
		if r.Name == name {
			return r, nil
		}
	}
	return nil, apierrors.NewNotFound(rbacv1.Resource("clusterrole"), name)
}
func (f *fakeRBAC) ListRoleBindings(ns string) ([]*rbacv1.RoleBinding, error) {
	var out []*rbacv1.RoleBinding
	for _, b := range f.roleBindings {
		if b.Namespace == ns {
			out = append(out, b)
		}
	}
	return out, nil
}
func (f *fakeRBAC) GetRole(ns, name string) (*rbacv1.Role, error) {
	for _, r := range f.roles {
		if r.Namespace == ns && r.Name == name {
			return r, nil
		}
	}
	return nil, apierrors.NewNotFound(rbacv1.Resource("role"), name)
}

func rule(verbs, groups, resources []string, mut func(*rbacv1.PolicyRule)) rbacv1.PolicyRule {
	r := rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources}
	if mut != nil {
		mut(&r)
	}
	return r
}

func makeClusterRole(name string, mut func(*rbacv1.ClusterRole), rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	r := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	if mut != nil {
		mut(r)
	}
	return r
}

func makeRole(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func user(name string) rbacv1.Subject  { return rbacv1.Subject{Kind: "User", Name: name} }
func group(name string) rbacv1.Subject { return rbacv1.Subject{Kind: "Group", Name: name} }
func sa(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: "ServiceAccount", Namespace: ns, Name: name}
}

func makeCRB(name, role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: role}, Subjects: subjects}
}

func makeRB(ns, name, kind, role string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, RoleRef: rbacv1.RoleRef{Kind: kind, Name: role}, Subjects: subjects}
}

func resAttrs(u *authn.User, verb, group, resource, sub, ns, name string) Attributes {
	return Attributes{User: u, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name, ResourceRequest: true}
}

func TestRBAC(t *testing.T) {
	jane := &authn.User{Name: "jane", Groups: []string{"dev", "system:authenticated"}}
	robot := &authn.User{Name: "system:serviceaccount:t1:robot", Groups: authn.ServiceAccountGroups("t1")}
	master := &authn.User{Name: "root", Groups: []string{"system:masters"}}
	nobody := &authn.User{Name: "nobody"}

	src := &fakeRBAC{
		clusterRoles: []*rbacv1.ClusterRole{
			makeClusterRole("pod-reader", nil, rule([]string{"get", "list", "watch"}, []string{""}, []string{"pods"}, nil)),
			makeClusterRole("log-reader", nil, rule([]string{"get"}, []string{""}, []string{"pods/log"}, nil)),
			makeClusterRole("any-status", nil, rule([]string{"update"}, []string{"*"}, []string{"*/status"}, nil)),
			makeClusterRole("one-cm", nil, rule([]string{"get", "update", "list"}, []string{""}, []string{"configmaps"}, func(r *rbacv1.PolicyRule) {
				r.ResourceNames = []string{"settings"}
			})),
			makeClusterRole("metrics", nil, rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics", "/logs/*"}}),
			makeClusterRole("deployer", nil, rule([]string{"*"}, []string{"apps"}, []string{"deployments", "deployments/scale"}, nil)),
			makeClusterRole("agg", func(r *rbacv1.ClusterRole) {
				r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"agg": "true"}}}}
				// Stored as the aggregation controller writes it: its parts' rules in
				// place of whatever the role was created with.
				r.Rules = []rbacv1.PolicyRule{rule([]string{"create"}, []string{"batch"}, []string{"jobs"}, nil)}
			}),
			makeClusterRole("agg-stale", func(r *rbacv1.ClusterRole) {
				// Not yet written by the aggregation controller: its part grants nothing
				// until it is, as in Kubernetes.
				r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"agg": "true"}}}}
			}),
			makeClusterRole("agg-part", func(r *rbacv1.ClusterRole) { r.Labels = map[string]string{"agg": "true"} },
				rule([]string{"create"}, []string{"batch"}, []string{"jobs"}, nil)),
		},
		clusterRoleBindings: []*rbacv1.ClusterRoleBinding{
			makeCRB("dev-logs", "log-reader", group("dev")),
			makeCRB("jane-metrics", "metrics", user("jane")),
			makeCRB("robot-status", "any-status", sa("t1", "robot")),
			makeCRB("sa-without-ns", "pod-reader", rbacv1.Subject{Kind: "ServiceAccount", Name: "robot"}),
			makeCRB("jane-agg", "agg", user("jane")),
			makeCRB("broken", "missing-role", user("jane")),
			makeCRB("robot-agg-stale", "agg-stale", sa("t1", "robot")),
		},
		roles: []*rbacv1.Role{
			makeRole("t1", "secret-reader", rule([]string{"get"}, []string{""}, []string{"secrets"}, nil)),
		},
		roleBindings: []*rbacv1.RoleBinding{
			makeRB("t1", "jane-pods", "ClusterRole", "pod-reader", user("jane")),
			makeRB("t1", "robot-secrets", "Role", "secret-reader", rbacv1.Subject{Kind: "ServiceAccount", Name: "robot"}),
			makeRB("t1", "jane-cm", "ClusterRole", "one-cm", user("jane")),
			makeRB("t2", "jane-deploy", "ClusterRole", "deployer", user("jane")),
		},
	}
	cases := []struct {
		name  string
		attrs Attributes
		want  Decision
	}{
		{name: "cluster role through role binding in its namespace", attrs: resAttrs(jane, "list", "", "pods", "", "t1", ""), want: Allow},
		{name: "role binding does not reach another namespace", attrs: resAttrs(jane, "list", "", "pods", "", "t3", ""), want: NoOpinion},
		{name: "role binding does not grant cluster scope", attrs: resAttrs(jane, "list", "", "pods", "", "", ""), want: NoOpinion},
		{name: "verb not in rule", attrs: resAttrs(jane, "delete", "", "pods", "x", "t1", "x"), want: NoOpinion},
		{name: "resource does not grant subresource", attrs: resAttrs(jane, "get", "", "pods", "exec", "t1", "x"), want: NoOpinion},
		{name: "resource/subresource via group subject", attrs: resAttrs(jane, "get", "", "pods", "log", "t9", "x"), want: Allow},
		{name: "subresource rule does not grant the resource", attrs: resAttrs(jane, "get", "", "pods", "", "t9", "x"), want: NoOpinion},
		{name: "*/subresource with * group", attrs: resAttrs(robot, "update", "apps", "deployments", "status", "t5", "d"), want: Allow},
		{name: "*/subresource does not match the resource", attrs: resAttrs(robot, "update", "apps", "deployments", "", "t5", "d"), want: NoOpinion},
		{name: "API group must match", attrs: resAttrs(jane, "list", "extensions", "deployments", "", "t2", ""), want: NoOpinion},
		{name: "* verb", attrs: resAttrs(jane, "deletecollection", "apps", "deployments", "", "t2", ""), want: Allow},
		{name: "explicit subresource in list", attrs: resAttrs(jane, "patch", "apps", "deployments", "scale", "t2", "web"), want: Allow},
		{name: "resourceNames match the name", attrs: resAttrs(jane, "get", "", "configmaps", "", "t1", "settings"), want: Allow},
		{name: "resourceNames reject other names", attrs: resAttrs(jane, "get", "", "configmaps", "", "t1", "other"), want: NoOpinion},
		{name: "resourceNames do not allow list", attrs: resAttrs(jane, "list", "", "configmaps", "", "t1", ""), want: NoOpinion},
		{name: "non-resource URL exact", attrs: Attributes{User: jane, Verb: "get", Path: "/metrics"}, want: Allow},
		{name: "non-resource URL prefix", attrs: Attributes{User: jane, Verb: "get", Path: "/logs/kube.log"}, want: Allow},
		{name: "non-resource URL other path", attrs: Attributes{User: jane, Verb: "get", Path: "/metricsx"}, want: NoOpinion},
		{name: "non-resource URL other verb", attrs: Attributes{User: jane, Verb: "post", Path: "/metrics"}, want: NoOpinion},
		{name: "aggregated rules apply", attrs: resAttrs(jane, "create", "batch", "jobs", "", "t4", ""), want: Allow},
		{name: "aggregated role's own rules are ignored", attrs: resAttrs(jane, "delete", "batch", "jobs", "", "t4", "j"), want: NoOpinion},
		{name: "aggregated role is read as stored, not aggregated per request", attrs: resAttrs(robot, "create", "batch", "jobs", "", "t4", ""), want: NoOpinion},
		{name: "service account subject in role binding defaults to its namespace", attrs: resAttrs(robot, "get", "", "secrets", "", "t1", "s"), want: Allow},
		{name: "service account subject without namespace in cluster binding matches nobody", attrs: resAttrs(robot, "list", "", "pods", "", "t1", ""), want: NoOpinion},
		{name: "masters may do anything", attrs: resAttrs(master, "delete", "", "nodes", "", "", "n1"), want: Allow},
		{name: "masters may get any path", attrs: Attributes{User: master, Verb: "get", Path: "/debug/pprof"}, want: Allow},
		{name: "unbound user", attrs: resAttrs(nobody, "get", "", "pods", "", "t1", "x"), want: NoOpinion},
		{name: "nil user", attrs: resAttrs(nil, "get", "", "pods", "", "t1", "x"), want: NoOpinion},
	}
	rbac := NewRBAC(src)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := rbac.Authorize(context.Background(), tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("decision %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRBACReasons(t *testing.T) {
	jane := &authn.User{Name: "jane"}
	src := &fakeRBAC{
		clusterRoles:        []*rbacv1.ClusterRole{makeClusterRole("view", nil, rule([]string{"get"}, []string{""}, []string{"pods"}, nil))},
		clusterRoleBindings: []*rbacv1.ClusterRoleBinding{makeCRB("missing", "gone", user("jane"))},
		roleBindings:        []*rbacv1.RoleBinding{makeRB("t1", "jv", "ClusterRole", "view", sa("", "robot"), user("jane"))},
	}
	cases := []struct {
		name   string
		attrs  Attributes
		want   Decision
		reason string
	}{
		{name: "allow names the binding", attrs: resAttrs(jane, "get", "", "pods", "", "t1", "p"), want: Allow,
			reason: `RBAC: allowed by RoleBinding "jv/t1" of ClusterRole "view" to User "jane"`},
		{name: "denial reports unresolvable bindings", attrs: resAttrs(jane, "list", "", "pods", "", "t1", ""), want: NoOpinion,
			reason: `RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, err := NewRBAC(src).Authorize(context.Background(), tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || reason != tc.reason {
				t.Errorf("got (%v, %q), want (%v, %q)", got, reason, tc.want, tc.reason)
			}
		})
	}
}

func TestAggregateRules(t *testing.T) {
	sel := func(key string) *rbacv1.AggregationRule {
		return &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{key: "true"}}}}
	}
	read := rule([]string{"get"}, []string{""}, []string{"pods"}, nil)
	write := rule([]string{"create"}, []string{""}, []string{"pods"}, nil)
	admin := makeClusterRole("admin", func(r *rbacv1.ClusterRole) { r.AggregationRule = sel("to-admin") })
	edit := makeClusterRole("edit", func(r *rbacv1.ClusterRole) {
		r.AggregationRule = sel("to-edit")
		r.Labels = map[string]string{"to-admin": "true"}
	})
	view := makeClusterRole("view", func(r *rbacv1.ClusterRole) {
		r.AggregationRule = sel("to-view")
		r.Labels = map[string]string{"to-edit": "true"}
	})
	toEdit := makeClusterRole("to-edit", func(r *rbacv1.ClusterRole) { r.Labels = map[string]string{"to-edit": "true"} }, write, read)
	toView := makeClusterRole("to-view", func(r *rbacv1.ClusterRole) { r.Labels = map[string]string{"to-view": "true"} }, read)
	loop := makeClusterRole("loop", func(r *rbacv1.ClusterRole) {
		r.AggregationRule = sel("loop")
		r.Labels = map[string]string{"loop": "true"}
	})
	all := []*rbacv1.ClusterRole{toView, admin, view, edit, toEdit, loop}
	cases := []struct {
		name string
		role *rbacv1.ClusterRole
		want []rbacv1.PolicyRule
	}{
		{name: "plain role keeps its rules", role: toEdit, want: []rbacv1.PolicyRule{write, read}},
		{name: "one level", role: view, want: []rbacv1.PolicyRule{read}},
		{name: "nested, sorted by role name, without duplicates", role: admin, want: []rbacv1.PolicyRule{write, read}},
		{name: "a role selecting itself terminates", role: loop, want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, AggregateRules(tc.role, all)); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRulesFor(t *testing.T) {
	src := &fakeRBAC{
		clusterRoles: []*rbacv1.ClusterRole{
			makeClusterRole("basic", nil, rule([]string{"create"}, []string{"authorization.k8s.io"}, []string{"selfsubjectrulesreviews"}, nil),
				rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/api", "/api/*"}}),
			makeClusterRole("pod-reader", nil, rule([]string{"get"}, []string{""}, []string{"pods"}, func(r *rbacv1.PolicyRule) { r.ResourceNames = []string{"a"} })),
		},
		clusterRoleBindings: []*rbacv1.ClusterRoleBinding{makeCRB("basic", "basic", group("system:authenticated")), makeCRB("bad", "missing", group("system:authenticated"))},
		roleBindings:        []*rbacv1.RoleBinding{makeRB("t1", "pr", "ClusterRole", "pod-reader", sa("", "robot"))},
	}
	robot := &authn.User{Name: "system:serviceaccount:t1:robot", Groups: []string{"system:authenticated"}}
	res, nonRes, err := NewRBAC(src).RulesFor(robot, "t1")
	if err == nil {
		t.Error("missing cluster role was not reported")
	}
	wantRes := []authorizationv1.ResourceRule{
		{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectrulesreviews"}},
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"a"}},
	}
	if diff := cmp.Diff(wantRes, res); diff != "" {
		t.Errorf("resource rules (-want +got):\n%s", diff)
	}
	wantNonRes := []authorizationv1.NonResourceRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/api", "/api/*"}}}
	if diff := cmp.Diff(wantNonRes, nonRes); diff != "" {
		t.Errorf("non-resource rules (-want +got):\n%s", diff)
	}

	masterRes, masterNonRes, err := NewRBAC(&fakeRBAC{}).RulesFor(&authn.User{Name: "root", Groups: []string{"system:masters"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(masterRes) != 1 || masterRes[0].Resources[0] != "*" || len(masterNonRes) != 1 || masterNonRes[0].NonResourceURLs[0] != "*" {
		t.Errorf("masters rules %v %v, want everything", masterRes, masterNonRes)
	}
}

type decide struct {
	d      Decision
	reason string
	err    error
}

func (d decide) Authorize(context.Context, Attributes) (Decision, string, error) {
	return d.d, d.reason, d.err
}

func TestUnion(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name       string
		union      Union
		want       Decision
		wantReason string
		wantErr    bool
	}{
		{name: "first allow wins", union: Union{decide{d: NoOpinion, reason: "a"}, decide{d: Allow}, decide{d: Deny}}, want: Allow},
		{name: "deny stops", union: Union{decide{d: Deny, reason: "no"}, decide{d: Allow}}, want: Deny, wantReason: "no"},
		{name: "no opinion joins reasons and errors", union: Union{decide{reason: "a"}, decide{err: boom}, decide{reason: "b"}}, want: NoOpinion, wantReason: "a\nb", wantErr: true},
		{name: "empty", want: NoOpinion},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, err := tc.union.Authorize(context.Background(), Attributes{})
			if got != tc.want || reason != tc.wantReason || (err != nil) != tc.wantErr {
				t.Errorf("got (%v, %q, %v), want (%v, %q, error %v)", got, reason, err, tc.want, tc.wantReason, tc.wantErr)
			}
		})
	}
}

func TestForbiddenMessage(t *testing.T) {
	robot := &authn.User{Name: "system:serviceaccount:t1:robot"}
	cases := []struct {
		name   string
		attrs  Attributes
		reason string
		want   string
	}{
		{name: "namespaced list", attrs: resAttrs(robot, "list", "", "pods", "", "t1", ""),
			want: `pods is forbidden: User "system:serviceaccount:t1:robot" cannot list resource "pods" in API group "" in the namespace "t1"`},
		{name: "named object", attrs: resAttrs(robot, "get", "", "pods", "", "t1", "x"),
			want: `pods "x" is forbidden: User "system:serviceaccount:t1:robot" cannot get resource "pods" in API group "" in the namespace "t1"`},
		{name: "subresource", attrs: resAttrs(robot, "get", "", "pods", "log", "t1", "x"),
			want: `pods "x" is forbidden: User "system:serviceaccount:t1:robot" cannot get resource "pods/log" in API group "" in the namespace "t1"`},
		{name: "cluster scope with group", attrs: resAttrs(robot, "list", "rbac.authorization.k8s.io", "clusterroles", "", "", ""),
			want: `clusterroles.rbac.authorization.k8s.io is forbidden: User "system:serviceaccount:t1:robot" cannot list resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope`},
		{name: "non-resource URL", attrs: Attributes{User: &authn.User{Name: "x"}, Verb: "get", Path: "/metrics"},
			want: `forbidden: User "x" cannot get path "/metrics"`},
		{name: "anonymous", attrs: Attributes{User: authn.Anonymous(), Verb: "get", Path: "/"},
			want: `forbidden: User "system:anonymous" cannot get path "/"`},
		{name: "reason appended", attrs: resAttrs(&authn.User{Name: "system:node:a"}, "get", "coordination.k8s.io", "leases", "", "kube-node-lease", "b"),
			reason: "can only access node lease with the same name as the requesting node",
			want:   `leases.coordination.k8s.io "b" is forbidden: User "system:node:a" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node lease with the same name as the requesting node`},
		{name: "HTML is escaped", attrs: Attributes{User: &authn.User{Name: "<b>"}, Verb: "get", Path: "/a&b"},
			want: `forbidden: User "&lt;b&gt;" cannot get path "/a&amp;b"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ForbiddenMessage(tc.attrs, tc.reason); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
