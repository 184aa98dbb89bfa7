package bootstrap

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExtensionAuthConfigMap is the kube-system ConfigMap in which the API server
// publishes how extension API servers authenticate its clients and its front proxy
// (client-ca-file, requestheader-*), as kube-apiserver does.
const ExtensionAuthConfigMap = "extension-apiserver-authentication"

// AggregationClusterRoles are the cluster roles Kubernetes has for extension API
// servers: system:auth-delegator, which lets a server delegate authentication
// (TokenReviews) and authorization (SubjectAccessReviews) to the cluster, with
// Kubernetes' content.
func AggregationClusterRoles() []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{
		clusterRole("system:auth-delegator", nil,
			rule([]string{"create"}, groups("authentication.k8s.io"), "tokenreviews"),
			rule([]string{"create"}, groups("authorization.k8s.io"), "subjectaccessreviews"),
		),
	}
}

// SystemNamespaceRoles are the kube-system roles Kubernetes bootstraps that
// extension API servers are bound to: extension-apiserver-authentication-reader, which
// reads the ConfigMap ExtensionAuthConfigMap and nothing else of kube-system.
func SystemNamespaceRoles() []rbacv1.Role {
	r := rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacAPIVersion, Kind: "Role"},
		ObjectMeta: bootstrapMeta("extension-apiserver-authentication-reader", nil),
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{ExtensionAuthConfigMap}}},
	}
	r.Namespace = metav1.NamespaceSystem
	return []rbacv1.Role{r}
}
