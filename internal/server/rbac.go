package server

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

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
	cur.Rules, cur.AggregationRule = role.Rules, role.AggregationRule
	if _, err := client.RbacV1().ClusterRoles().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("clusterrole %s: %w", role.Name, err)
	}
	return nil
}
