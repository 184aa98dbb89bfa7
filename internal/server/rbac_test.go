package server

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/auth/authn"
	"github.com/tranche/tranche/internal/auth/authz"
)

// rbacSecurity returns a guard whose RBAC caches hold objs.
func rbacSecurity(t *testing.T, objs ...runtime.Object) *security {
	t.Helper()
	idx := map[string]cache.Indexer{}
	for _, kind := range []string{"roles", "rolebindings", "clusterroles", "clusterrolebindings"} {
		idx[kind] = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	for _, o := range objs {
		var kind string
		switch o.(type) {
		case *rbacv1.Role:
			kind = "roles"
		case *rbacv1.RoleBinding:
			kind = "rolebindings"
		case *rbacv1.ClusterRole:
			kind = "clusterroles"
		case *rbacv1.ClusterRoleBinding:
			kind = "clusterrolebindings"
		}
		if err := idx[kind].Add(o); err != nil {
			t.Fatal(err)
		}
	}
	s := &security{}
	s.rbac = authz.NewRBAC(ruleSource{s})
	s.authorizer = s.rbac
	s.caches.Store(&listers{
		roles:               rbaclisters.NewRoleLister(idx["roles"]),
		roleBindings:        rbaclisters.NewRoleBindingLister(idx["rolebindings"]),
		clusterRoles:        rbaclisters.NewClusterRoleLister(idx["clusterroles"]),
		clusterRoleBindings: rbaclisters.NewClusterRoleBindingLister(idx["clusterrolebindings"]),
	})
	return s
}

func policy(verbs, groups, resources []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
}

func words(s string) []string { return strings.Fields(s) }

// TestRBACEscalation covers the validator's decisions on each RBAC kind; the rule
// coverage itself is tested in internal/auth/authz.
func TestRBACEscalation(t *testing.T) {
	ref := func(kind, name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	}
	subject := []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "jane"}}
	sec := rbacSecurity(t,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pods"}, Rules: []rbacv1.PolicyRule{policy(words("get list"), []string{""}, words("pods"))}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "secrets"}, Rules: []rbacv1.PolicyRule{policy(words("get"), []string{""}, words("secrets"))}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "escalate-roles"}, Rules: []rbacv1.PolicyRule{policy(words("escalate"), []string{rbacv1.GroupName}, words("roles"))}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bind-secrets"}, Rules: []rbacv1.PolicyRule{policy(words("bind"), []string{rbacv1.GroupName}, words("clusterroles"), "secrets")}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "all"}, Rules: authz.FullAuthority()},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "jane-pods"}, RoleRef: ref("ClusterRole", "pods"), Subjects: subject},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "t2", Name: "jane-escalate"}, RoleRef: ref("ClusterRole", "escalate-roles"), Subjects: subject},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "t3", Name: "jane-bind"}, RoleRef: ref("ClusterRole", "bind-secrets"), Subjects: subject},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "root-all"}, RoleRef: ref("ClusterRole", "all"), Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "root"}}},
	)
	v := &rbacEscalation{sec: sec}
	jane := &authn.User{Name: "jane", Groups: []string{"system:authenticated"}}
	master := &authn.User{Name: "admin", Groups: []string{"system:masters", "system:authenticated"}}
	root := &authn.User{Name: "root"}

	role := func(ns string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
		return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"}, Rules: rules}
	}
	podsRule := policy(words("get"), []string{""}, words("pods"))
	secretsRule := policy(words("get"), []string{""}, words("secrets"))
	aggregated := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "r"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"a": "b"}}}}}
	owned := role("t1", secretsRule)
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "u"}}

	tests := []struct {
		name     string
		user     *authn.User
		resource string
		op       apiserver.AdmitOp
		obj, old runtime.Object
		// want is "" for allowed, else a part of the refusal; code its HTTP status.
		want string
		code int32
	}{
		{name: "role within held rules", user: jane, resource: "roles", obj: role("t1", podsRule)},
		{name: "role beyond held rules", user: jane, resource: "roles", obj: role("t1", secretsRule), code: 403,
			want: `roles.rbac.authorization.k8s.io "r" is forbidden: user "jane" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:` + "\n" + `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`},
		{name: "role in a namespace where nothing is held", user: jane, resource: "roles", obj: role("t9", podsRule), code: 403, want: `{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`},
		{name: "escalate verb on roles", user: jane, resource: "roles", obj: role("t2", policy(words("*"), words("*"), words("*")))},
		{name: "system:masters", user: master, resource: "roles", obj: role("t9", policy(words("*"), words("*"), words("*")))},
		{name: "update beyond held rules", user: jane, resource: "roles", op: apiserver.AdmitUpdate, obj: role("t1", secretsRule), old: role("t1", podsRule), code: 403, want: "not currently held"},
		{name: "update of owner references only", user: jane, resource: "roles", op: apiserver.AdmitUpdate, obj: owned, old: role("t1", secretsRule)},
		{name: "cluster role needs cluster-wide rules", user: jane, resource: "clusterroles", obj: &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "r"},
			Rules: []rbacv1.PolicyRule{podsRule}}, code: 403, want: `clusterroles.rbac.authorization.k8s.io "r" is forbidden: user "jane"`},
		{name: "aggregation rule with full authority", user: root, resource: "clusterroles", obj: aggregated},
		{name: "aggregation rule without full authority", user: &authn.User{Name: "jane"}, resource: "clusterroles", obj: aggregated, code: 403,
			want: `clusterroles.rbac.authorization.k8s.io "r" is forbidden: must have cluster-admin privileges to use the aggregationRule`},
		{name: "binding a held role", user: jane, resource: "rolebindings", obj: &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "b"}, RoleRef: ref("ClusterRole", "pods")}},
		{name: "binding a role not held", user: jane, resource: "rolebindings", obj: &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "b"}, RoleRef: ref("ClusterRole", "secrets")},
			code: 403, want: `rolebindings.rbac.authorization.k8s.io "b" is forbidden: user "jane"`},
		{name: "bind verb on the role", user: jane, resource: "rolebindings", obj: &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "t3", Name: "b"}, RoleRef: ref("ClusterRole", "secrets")}},
		{name: "bind verb is per namespace", user: jane, resource: "clusterrolebindings", obj: &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, RoleRef: ref("ClusterRole", "secrets")},
			code: 403, want: `clusterrolebindings.rbac.authorization.k8s.io "b" is forbidden`},
		{name: "binding a missing role", user: jane, resource: "rolebindings", obj: &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "b"}, RoleRef: ref("Role", "missing")},
			code: 404, want: `role.rbac.authorization.k8s.io "missing" not found`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := metaOf(tc.obj)
			req := &apiserver.AdmissionRequest{Operation: tc.op, Resource: rbacv1.SchemeGroupVersion.WithResource(tc.resource),
				Namespace: m.GetNamespace(), Name: m.GetName(), Object: tc.obj, OldObject: tc.old}
			ctx := context.WithValue(context.Background(), userKey{}, tc.user)
			_, err := v.Validate(ctx, req)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("allowed, want refused")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nlacks %q", err, tc.want)
			}
			var st apierrors.APIStatus
			if !errors.As(err, &st) {
				t.Fatalf("not a status error: %T %v", err, err)
			}
			if got := st.Status().Code; got != tc.code {
				t.Errorf("HTTP %d, want %d", got, tc.code)
			}
		})
	}

	// Other groups and subresources are not this validator's business.
	_, err := v.Validate(context.WithValue(context.Background(), userKey{}, jane), &apiserver.AdmissionRequest{
		Resource: rbacv1.SchemeGroupVersion.WithResource("roles"), Subresource: "status", Object: role("t9", secretsRule)})
	if err != nil {
		t.Errorf("subresource write checked: %v", err)
	}
}

func metaOf(obj runtime.Object) (metav1.Object, bool) {
	m, ok := obj.(metav1.Object)
	return m, ok
}

// TestBootstrapKeepsAggregatedRules: starting again leaves an aggregated default role's
// rules to the aggregation controller, which may have added rules of roles created since,
// and writes nothing when the defaults are current.
func TestBootstrapKeepsAggregatedRules(t *testing.T) {
	ctx := context.Background()
	client := kubefake.NewClientset()
	if err := bootstrapRBAC(ctx, client); err != nil {
		t.Fatal(err)
	}
	view, err := client.RbacV1().ClusterRoles().Get(ctx, "view", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	extra := policy(words("get"), words("example.com"), words("widgets"))
	view.Rules = append(view.Rules, extra)
	if _, err := client.RbacV1().ClusterRoles().Update(ctx, view, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	if err := bootstrapRBAC(ctx, client); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" {
			t.Errorf("restart wrote %v", a)
		}
	}
	view, err = client.RbacV1().ClusterRoles().Get(ctx, "view", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(view.Rules, func(r rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(r, extra) }) {
		t.Errorf("restart dropped the aggregated rule; view has %v", view.Rules)
	}
}
