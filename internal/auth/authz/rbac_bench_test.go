package authz

import (
	"context"
	"fmt"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tranche/tranche/internal/auth/authn"
	"github.com/tranche/tranche/internal/auth/bootstrap"
)

// listerRBAC is a RuleSource shaped like the informer listers the API server reads:
// roles found by name in a map, bindings listed per namespace.
type listerRBAC struct {
	clusterRoles        map[string]*rbacv1.ClusterRole
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
	roles               map[string]*rbacv1.Role
	roleBindings        map[string][]*rbacv1.RoleBinding
}

var _ RuleSource = (*listerRBAC)(nil)

func (l *listerRBAC) ListClusterRoleBindings() ([]*rbacv1.ClusterRoleBinding, error) {
	return l.clusterRoleBindings, nil
}
func (l *listerRBAC) GetClusterRole(name string) (*rbacv1.ClusterRole, error) {
	if r, ok := l.clusterRoles[name]; ok {
		return r, nil
	}
	return nil, apierrors.NewNotFound(rbacv1.Resource("clusterrole"), name)
}
func (l *listerRBAC) ListRoleBindings(ns string) ([]*rbacv1.RoleBinding, error) {
	return l.roleBindings[ns], nil
}
func (l *listerRBAC) GetRole(ns, name string) (*rbacv1.Role, error) {
	if r, ok := l.roles[ns+"/"+name]; ok {
		return r, nil
	}
	return nil, apierrors.NewNotFound(rbacv1.Resource("role"), name)
}

// bootstrapCluster is a cluster's RBAC after start-up: the bootstrap roles, with the
// aggregated ones (admin, edit, view) holding the rules the aggregation controller
// writes, the bootstrap bindings, and 20 namespaces each with a service account bound
// to edit and a user bound to a Role of its own.
func bootstrapCluster() *listerRBAC {
	roles := bootstrap.ClusterRoles()
	all := make([]*rbacv1.ClusterRole, len(roles))
	for i := range roles {
		all[i] = &roles[i]
	}
	l := &listerRBAC{clusterRoles: map[string]*rbacv1.ClusterRole{}, roles: map[string]*rbacv1.Role{}, roleBindings: map[string][]*rbacv1.RoleBinding{}}
	for _, r := range all {
		stored := r.DeepCopy()
		if stored.AggregationRule != nil {
			stored.Rules = AggregateRules(r, all)
		}
		l.clusterRoles[r.Name] = stored
	}
	for _, b := range bootstrap.ClusterRoleBindings() {
		l.clusterRoleBindings = append(l.clusterRoleBindings, b.DeepCopy())
	}
	for i := range 20 {
		ns := fmt.Sprintf("team-%d", i)
		role := makeRole(ns, "config-reader", rule([]string{"get", "list"}, []string{""}, []string{"configmaps"}, nil))
		l.roles[ns+"/"+role.Name] = role
		l.roleBindings[ns] = []*rbacv1.RoleBinding{
			makeRB(ns, "app-edit", "ClusterRole", "edit", sa(ns, "app")),
			makeRB(ns, "dev-config", "Role", "config-reader", user("dev-"+ns)),
		}
	}
	return l
}

// BenchmarkAuthorize measures one RBAC decision over a freshly started cluster's
// policy: a service account allowed through a RoleBinding to the aggregated edit role
// (the common case of a workload's request), a user allowed through a Role, and a
// denial, which visits every rule the user is bound to.
//
//	go test -run '^$' -bench Authorize ./internal/auth/authz/
func BenchmarkAuthorize(b *testing.B) {
	rbac := NewRBAC(bootstrapCluster())
	const ns = "team-7"
	app := &authn.User{Name: authn.ServiceAccountUsername(ns, "app"), Groups: authn.ServiceAccountGroups(ns)}
	dev := &authn.User{Name: "dev-" + ns, Groups: []string{authn.GroupAuthenticated}}
	cases := []struct {
		name  string
		attrs Attributes
		want  Decision
	}{
		{"edit-allowed", resAttrs(app, "update", "apps", "deployments", "", ns, "web"), Allow},
		{"role-allowed", resAttrs(dev, "get", "", "configmaps", "", ns, "settings"), Allow},
		{"denied", resAttrs(app, "delete", "", "nodes", "", "", "n1"), NoOpinion},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				if d, _, _ := rbac.Authorize(ctx, tc.attrs); d != tc.want {
					b.Fatalf("decision %v, want %v", d, tc.want)
				}
			}
		})
	}
}
