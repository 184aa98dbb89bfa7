package bootstrap

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/auth/authn"
	"github.com/tranche/tranche/internal/auth/authz"
)

// source serves the bootstrap policy plus namespace bindings to authz.RBAC.
type source struct {
	roles        []*rbacv1.ClusterRole
	bindings     []*rbacv1.ClusterRoleBinding
	roleBindings []*rbacv1.RoleBinding
}

func (s *source) ListClusterRoleBindings() ([]*rbacv1.ClusterRoleBinding, error) {
	return s.bindings, nil
}
func (s *source) ListClusterRoles() ([]*rbacv1.ClusterRole, error) { return s.roles, nil }
func (s *source) GetClusterRole(name string) (*rbacv1.ClusterRole, error) {
	for _, r := range s.roles {
		if r.Name == name {
			return r, nil
		}
	}
	return nil, apierrors.NewNotFound(rbacv1.Resource("clusterrole"), name)
}
func (s *source) ListRoleBindings(ns string) ([]*rbacv1.RoleBinding, error) {
	var out []*rbacv1.RoleBinding
	for _, b := range s.roleBindings {
		if b.Namespace == ns {
			out = append(out, b)
		}
	}
	return out, nil
}
func (s *source) GetRole(ns, name string) (*rbacv1.Role, error) {
	return nil, apierrors.NewNotFound(rbacv1.Resource("role"), name)
}

func bootstrapSource() *source {
	s := &source{}
	for _, r := range ClusterRoles() {
		s.roles = append(s.roles, &r)
	}
	// Aggregated roles are stored with their parts' rules, as the API server's
	// bootstrap writes them and the authorizer reads them.
	for _, r := range s.roles {
		if r.AggregationRule != nil {
			r.Rules = authz.AggregateRules(r, s.roles)
		}
	}
	for _, b := range ClusterRoleBindings() {
		s.bindings = append(s.bindings, &b)
	}
	for _, role := range []string{"admin", "edit", "view"} {
		s.roleBindings = append(s.roleBindings, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: role},
			RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: role + "-user"}},
		})
	}
	return s
}

func TestObjectsAreWellFormed(t *testing.T) {
	roles := map[string]bool{}
	for _, r := range ClusterRoles() {
		if roles[r.Name] {
			t.Errorf("cluster role %q appears twice", r.Name)
		}
		roles[r.Name] = true
		checkMeta(t, r.ObjectMeta)
		if r.AggregationRule == nil && len(r.Rules) == 0 {
			t.Errorf("cluster role %q has no rules", r.Name)
		}
	}
	for _, b := range ClusterRoleBindings() {
		checkMeta(t, b.ObjectMeta)
		if !roles[b.RoleRef.Name] || b.RoleRef.Kind != "ClusterRole" || b.RoleRef.APIGroup != "rbac.authorization.k8s.io" {
			t.Errorf("binding %q refers to %+v, which is not a bootstrap cluster role", b.Name, b.RoleRef)
		}
		if len(b.Subjects) == 0 {
			t.Errorf("binding %q has no subjects", b.Name)
		}
	}
	// Callers own what they get.
	first := ClusterRoles()
	first[0].Rules[0].Verbs[0] = "changed"
	if ClusterRoles()[0].Rules[0].Verbs[0] == "changed" {
		t.Error("ClusterRoles shares rule slices between calls")
	}
}

func checkMeta(t *testing.T, m metav1.ObjectMeta) {
	t.Helper()
	if m.Labels[BootstrappingLabel] != BootstrappingValue || m.Annotations[AutoUpdateAnnotation] != "true" {
		t.Errorf("%q lacks the bootstrapping label or autoupdate annotation: %v %v", m.Name, m.Labels, m.Annotations)
	}
}

func TestPolicyGrants(t *testing.T) {
	authenticated := func(name string, groups ...string) *authn.User {
		return &authn.User{Name: name, Groups: append(groups, authn.GroupAuthenticated)}
	}
	res := func(u *authn.User, verb, group, resource, sub, ns, name string) authz.Attributes {
		return authz.Attributes{User: u, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name, ResourceRequest: true}
	}
	path := func(u *authn.User, p string) authz.Attributes { return authz.Attributes{User: u, Verb: "get", Path: p} }
	admin, edit, view := authenticated("admin-user"), authenticated("edit-user"), authenticated("view-user")
	cases := []struct {
		name  string
		attrs authz.Attributes
		want  bool
	}{
		{name: "masters are cluster admins", attrs: res(authenticated("root", "system:masters"), "delete", "", "nodes", "", "", "n"), want: true},
		{name: "anonymous may read /healthz", attrs: path(authn.Anonymous(), "/healthz"), want: true},
		{name: "anonymous may read /version", attrs: path(authn.Anonymous(), "/version"), want: true},
		{name: "anonymous may not discover APIs", attrs: path(authn.Anonymous(), "/apis"), want: false},
		{name: "authenticated users discover APIs", attrs: path(authenticated("u"), "/apis/apps/v1"), want: true},
		{name: "authenticated users may review their rules", attrs: res(authenticated("u"), "create", "authorization.k8s.io", "selfsubjectrulesreviews", "", "", ""), want: true},
		{name: "authenticated users may not list pods", attrs: res(authenticated("u"), "list", "", "pods", "", "t1", ""), want: false},
		{name: "admin manages role bindings", attrs: res(admin, "create", "rbac.authorization.k8s.io", "rolebindings", "", "t1", ""), want: true},
		{name: "admin has edit's powers", attrs: res(admin, "create", "apps", "deployments", "", "t1", ""), want: true},
		{name: "admin has view's powers", attrs: res(admin, "get", "apps", "deployments", "status", "t1", "d"), want: true},
		{name: "edit may not manage role bindings", attrs: res(edit, "create", "rbac.authorization.k8s.io", "rolebindings", "", "t1", ""), want: false},
		{name: "edit reads secrets", attrs: res(edit, "get", "", "secrets", "", "t1", "s"), want: true},
		{name: "edit execs into pods", attrs: res(edit, "create", "", "pods", "exec", "t1", "p"), want: true},
		{name: "edit reads pod logs through view", attrs: res(edit, "get", "", "pods", "log", "t1", "p"), want: true},
		// Kubernetes leaves pods/ephemeralcontainers out of admin and edit on purpose: it
		// adds containers that admission policies written before it may not check, so
		// administrators grant it with a role of their own (aggregated or bound).
		{name: "edit may not add ephemeral containers", attrs: res(edit, "patch", "", "pods", "ephemeralcontainers", "t1", "p"), want: false},
		{name: "admin may not add ephemeral containers", attrs: res(admin, "update", "", "pods", "ephemeralcontainers", "t1", "p"), want: false},
		{name: "masters add ephemeral containers", attrs: res(authenticated("root", "system:masters"), "patch", "", "pods", "ephemeralcontainers", "t1", "p"), want: true},
		{name: "view lists endpointslices", attrs: res(view, "list", "discovery.k8s.io", "endpointslices", "", "t1", ""), want: true},
		{name: "view reads pod metrics (kubectl top)", attrs: res(view, "list", "metrics.k8s.io", "pods", "", "t1", ""), want: true},
		{name: "admin reads pod metrics", attrs: res(admin, "get", "metrics.k8s.io", "pods", "", "t1", "p"), want: true},
		{name: "authenticated users may not read pod metrics", attrs: res(authenticated("u"), "list", "metrics.k8s.io", "pods", "", "t1", ""), want: false},
		{name: "view may not read secrets", attrs: res(view, "get", "", "secrets", "", "t1", "s"), want: false},
		{name: "view may not scale", attrs: res(view, "update", "apps", "deployments", "scale", "t1", "d"), want: false},
		{name: "view binding does not reach other namespaces", attrs: res(view, "list", "", "pods", "", "t2", ""), want: false},
		{name: "controller manager does anything", attrs: res(authenticated(ControllerManagerUser), "deletecollection", "apps", "replicasets", "", "t1", ""), want: true},
		{name: "scheduler binds pods", attrs: res(authenticated(SchedulerUser), "create", "", "pods", "binding", "t1", "p"), want: true},
		{name: "scheduler may not create pods", attrs: res(authenticated(SchedulerUser), "create", "", "pods", "", "t1", ""), want: false},
		{name: "proxy watches endpointslices", attrs: res(authenticated(ProxyUser), "watch", "discovery.k8s.io", "endpointslices", "", "", ""), want: true},
		{name: "proxy creates events", attrs: res(authenticated(ProxyUser), "create", "", "events", "", "default", ""), want: true},
		{name: "proxy may not update services", attrs: res(authenticated(ProxyUser), "update", "", "services", "", "t1", "s"), want: false},
		{name: "dns lists namespaces", attrs: res(authenticated(DNSUser), "list", "", "namespaces", "", "", ""), want: true},
		{name: "dns may not read secrets", attrs: res(authenticated(DNSUser), "list", "", "secrets", "", "", ""), want: false},
		{name: "ingress updates ingress status", attrs: res(authenticated(IngressUser), "update", "networking.k8s.io", "ingresses", "status", "t1", "i"), want: true},
		{name: "ingress reads TLS secrets", attrs: res(authenticated(IngressUser), "get", "", "secrets", "", "t1", "tls"), want: true},
		{name: "ingress may not update ingresses", attrs: res(authenticated(IngressUser), "update", "networking.k8s.io", "ingresses", "", "t1", "i"), want: false},
		{name: "the pod network watches every node", attrs: res(authenticated(NodeNetworkUser), "watch", "", "nodes", "", "", ""), want: true},
		{name: "the pod network may not change nodes", attrs: res(authenticated(NodeNetworkUser), "patch", "", "nodes", "", "", "n"), want: false},
		{name: "nodes are not granted every node by RBAC", attrs: res(authenticated("system:node:a", "system:nodes"), "list", "", "nodes", "", "", ""), want: false},
	}
	rbac := authz.NewRBAC(bootstrapSource())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, reason, err := rbac.Authorize(context.Background(), tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if got := d == authz.Allow; got != tc.want {
				t.Errorf("allowed = %v, want %v (reason %q)", got, tc.want, reason)
			}
		})
	}
}
