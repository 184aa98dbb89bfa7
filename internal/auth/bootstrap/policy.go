// Package bootstrap holds the RBAC objects a new cluster starts with: Kubernetes'
// default cluster roles (cluster-admin, the aggregated admin/edit/view and the
// aggregate-to-* roles holding their rules, system:basic-user, system:discovery,
// system:public-info-viewer, ...) with their content as in Kubernetes 1.32, and the
// roles of tranche's own components. The API server creates them on start when
// missing and, because of the autoupdate annotation, may reconcile them on upgrade.
package bootstrap

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/auth/authn"
)

// Labels and annotations every bootstrap object carries, and the labels that feed
// the aggregated admin, edit and view roles, as in Kubernetes.
const (
	BootstrappingLabel    = "kubernetes.io/bootstrapping"
	BootstrappingValue    = "rbac-defaults"
	AutoUpdateAnnotation  = "rbac.authorization.kubernetes.io/autoupdate"
	AggregateToAdminLabel = "rbac.authorization.k8s.io/aggregate-to-admin"
	AggregateToEditLabel  = "rbac.authorization.k8s.io/aggregate-to-edit"
	AggregateToViewLabel  = "rbac.authorization.k8s.io/aggregate-to-view"
)

const (
	kubeProxyUser           = "system:kube-proxy"
	groupMonitoring         = "system:monitoring"
	componentRolePrefix     = "system:tranche:"
	rbacGroup               = "rbac.authorization.k8s.io"
	rbacAPIVersion          = "rbac.authorization.k8s.io/v1"
	clusterRoleKind         = "ClusterRole"
	clusterRoleBindingKind  = "ClusterRoleBinding"
	aggregationLabelEnabled = "true"
)

// User names of tranche's components; each is bound to the cluster role of the same
// name. Their client certificates carry these as common names.
const (
	ControllerManagerUser = componentRolePrefix + "controller-manager"
	SchedulerUser         = componentRolePrefix + "scheduler"
	ProxyUser             = componentRolePrefix + "proxy"
	DNSUser               = componentRolePrefix + "dns"
	IngressUser           = componentRolePrefix + "ingress"
	// NodeNetworkUser is the identity of the agents' pod network (internal/overlay,
	// `tranche agent --network-kubeconfig`), which reads every Node as flannel's service
	// account does; a node identity may read only its own Node.
	NodeNetworkUser = componentRolePrefix + "node-network"
)

var (
	read      = []string{"get", "list", "watch"}
	listWatch = []string{"list", "watch"}
	write     = []string{"create", "delete", "deletecollection", "patch", "update"}
	readWrite = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	recordEvt = []string{"create", "patch", "update"}
	getVerb   = []string{"get"}
)

// rule builds a resource rule; verbs and resources are written sorted, as Kubernetes'
// rule builder leaves them.
func rule(verbs []string, groups []string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources}
}

func urls(verbs []string, paths ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: paths}
}

func groups(g ...string) []string { return g }

var core = groups("")

// eventsRule lets a component record events through client-go's recorder, which
// creates, patches (series) and updates them in both event APIs.
var eventsRule = rule(recordEvt, groups("", "events.k8s.io"), "events")

// ClusterRoles returns the bootstrap cluster roles, each a fresh copy. admin, edit and
// view have no rules of their own: they aggregate the roles labelled
// aggregate-to-admin/edit/view (edit is labelled aggregate-to-admin and view
// aggregate-to-edit, so admin ⊇ edit ⊇ view).
func ClusterRoles() []rbacv1.ClusterRole {
	roles := []rbacv1.ClusterRole{
		clusterRole("cluster-admin", nil,
			rule([]string{"*"}, groups("*"), "*"),
			urls([]string{"*"}, "*"),
		),
		aggregatedRole("admin", AggregateToAdminLabel, nil),
		aggregatedRole("edit", AggregateToEditLabel, map[string]string{AggregateToAdminLabel: aggregationLabelEnabled}),
		aggregatedRole("view", AggregateToViewLabel, map[string]string{AggregateToEditLabel: aggregationLabelEnabled}),
		clusterRole("system:aggregate-to-admin", map[string]string{AggregateToAdminLabel: aggregationLabelEnabled},
			rule([]string{"create"}, groups("authorization.k8s.io"), "localsubjectaccessreviews"),
			rule(readWrite, groups(rbacGroup), "rolebindings", "roles"),
		),
		clusterRole("system:aggregate-to-edit", map[string]string{AggregateToEditLabel: aggregationLabelEnabled},
			rule(read, core, "pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"),
			rule([]string{"impersonate"}, core, "serviceaccounts"),
			rule(write, core, "pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"),
			rule([]string{"create"}, core, "pods/eviction"),
			rule(write, core, "configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
				"replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"),
			rule([]string{"create"}, core, "serviceaccounts/token"),
			rule(write, groups("apps"), "daemonsets", "deployments", "deployments/rollback", "deployments/scale",
				"replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale"),
			rule(write, groups("autoscaling"), "horizontalpodautoscalers"),
			rule(write, groups("batch"), "cronjobs", "jobs"),
			rule(write, groups("extensions"), "daemonsets", "deployments", "deployments/rollback", "deployments/scale",
				"ingresses", "networkpolicies", "replicasets", "replicasets/scale", "replicationcontrollers/scale"),
			rule(write, groups("policy"), "poddisruptionbudgets"),
			rule(write, groups("networking.k8s.io"), "ingresses", "networkpolicies"),
			rule(readWrite, groups("coordination.k8s.io"), "leases"),
			rule(write, groups("resource.k8s.io"), "resourceclaims", "resourceclaimtemplates"),
		),
		clusterRole("system:aggregate-to-view", map[string]string{AggregateToViewLabel: aggregationLabelEnabled},
			rule(read, core, "configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods",
				"replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services", "services/status"),
			rule(read, core, "bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status",
				"replicationcontrollers/status", "resourcequotas", "resourcequotas/status"),
			rule(read, core, "namespaces"),
			rule(read, groups("discovery.k8s.io"), "endpointslices"),
			rule(read, groups("apps"), "controllerrevisions", "daemonsets", "daemonsets/status", "deployments",
				"deployments/scale", "deployments/status", "replicasets", "replicasets/scale", "replicasets/status",
				"statefulsets", "statefulsets/scale", "statefulsets/status"),
			rule(read, groups("autoscaling"), "horizontalpodautoscalers", "horizontalpodautoscalers/status"),
			rule(read, groups("batch"), "cronjobs", "cronjobs/status", "jobs", "jobs/status"),
			rule(read, groups("extensions"), "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
				"deployments/status", "ingresses", "ingresses/status", "networkpolicies", "replicasets",
				"replicasets/scale", "replicasets/status", "replicationcontrollers/scale"),
			rule(read, groups("policy"), "poddisruptionbudgets", "poddisruptionbudgets/status"),
			rule(read, groups("networking.k8s.io"), "ingresses", "ingresses/status", "networkpolicies"),
			rule(read, groups("resource.k8s.io"), "resourceclaims", "resourceclaims/status", "resourceclaimtemplates"),
		),
		// What metrics-server's manifest adds: reading the resource metrics API is
		// part of admin, edit and view, as `kubectl top` is to their users.
		clusterRole("system:aggregated-metrics-reader", map[string]string{AggregateToAdminLabel: aggregationLabelEnabled,
			AggregateToEditLabel: aggregationLabelEnabled, AggregateToViewLabel: aggregationLabelEnabled},
			rule(read, groups("metrics.k8s.io"), "nodes", "pods"),
		),
		clusterRole("system:basic-user", nil,
			rule([]string{"create"}, groups("authorization.k8s.io"), "selfsubjectaccessreviews", "selfsubjectrulesreviews"),
			rule([]string{"create"}, groups("authentication.k8s.io"), "selfsubjectreviews"),
		),
		clusterRole("system:discovery", nil,
			urls(getVerb, "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"),
		),
		clusterRole("system:public-info-viewer", nil,
			urls(getVerb, "/healthz", "/livez", "/readyz", "/version", "/version/"),
		),
		clusterRole("system:monitoring", nil,
			urls(getVerb, "/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*"),
		),
		clusterRole("system:service-account-issuer-discovery", nil,
			urls(getVerb, "/.well-known/openid-configuration", "/openid/v1/jwks"),
		),
		clusterRole("system:node-proxier", nil,
			rule(listWatch, core, "endpoints", "services"),
			rule(read, core, "nodes"),
			eventsRule,
			rule(listWatch, groups("discovery.k8s.io"), "endpointslices"),
		),
		clusterRole(NodeNetworkUser, nil, rule(read, core, "nodes")),
		clusterRole(ControllerManagerUser, nil,
			rule([]string{"*"}, groups("*"), "*"),
		),
		clusterRole(SchedulerUser, nil,
			eventsRule,
			rule([]string{"create", "get", "list", "update", "watch"}, groups("coordination.k8s.io"), "leases"),
			rule(read, core, "nodes"),
			rule([]string{"delete", "get", "list", "watch"}, core, "pods"),
			rule([]string{"create"}, core, "bindings", "pods/binding"),
			rule([]string{"patch", "update"}, core, "pods/status"),
			rule(read, core, "namespaces", "persistentvolumeclaims", "persistentvolumes", "replicationcontrollers", "services"),
			rule(read, groups("apps"), "replicasets", "statefulsets"),
			rule(read, groups("policy"), "poddisruptionbudgets"),
		),
		clusterRole(ProxyUser, nil,
			rule(read, core, "nodes", "services"),
			rule(read, groups("discovery.k8s.io"), "endpointslices"),
			eventsRule,
		),
		clusterRole(DNSUser, nil,
			rule(listWatch, core, "namespaces", "services"),
			rule(listWatch, groups("discovery.k8s.io"), "endpointslices"),
		),
		clusterRole(IngressUser, nil,
			rule(read, core, "secrets", "services"),
			rule(read, groups("discovery.k8s.io"), "endpointslices"),
			rule(read, groups("networking.k8s.io"), "ingressclasses", "ingresses"),
			rule([]string{"update"}, groups("networking.k8s.io"), "ingresses/status"),
			eventsRule,
		),
		// Kubernetes' certificate roles: requesting node certificates and approving
		// requests for the built-in signers.
		clusterRole("system:node-bootstrapper", nil,
			rule([]string{"create", "get", "list", "watch"}, groups(certificatesGroup), "certificatesigningrequests")),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:nodeclient", nil,
			rule([]string{"create"}, groups(certificatesGroup), "certificatesigningrequests/nodeclient")),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", nil,
			rule([]string{"create"}, groups(certificatesGroup), "certificatesigningrequests/selfnodeclient")),
		clusterRole("system:certificates.k8s.io:legacy-unknown-approver", nil, signerRule("approve", "kubernetes.io/legacy-unknown")),
		clusterRole("system:certificates.k8s.io:kubelet-serving-approver", nil, signerRule("approve", "kubernetes.io/kubelet-serving")),
		clusterRole("system:certificates.k8s.io:kube-apiserver-client-approver", nil, signerRule("approve", "kubernetes.io/kube-apiserver-client")),
		clusterRole("system:certificates.k8s.io:kube-apiserver-client-kubelet-approver", nil, signerRule("approve", "kubernetes.io/kube-apiserver-client-kubelet")),
	}
	return roles
}

const certificatesGroup = "certificates.k8s.io"

// signerRule allows verb (approve, sign) on one signer.
func signerRule(verb, signerName string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: groups(certificatesGroup), Resources: []string{"signers"}, ResourceNames: []string{signerName}}
}

// ClusterRoleBindings returns the bootstrap cluster role bindings: cluster-admin to
// system:masters, basic-user and discovery to every authenticated user,
// public-info-viewer to everyone (authenticated or not), the issuer discovery role to
// service accounts, and each tranche component role to its user.
func ClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	return []rbacv1.ClusterRoleBinding{
		binding("cluster-admin", group(authn.GroupMasters)),
		binding("system:basic-user", group(authn.GroupAuthenticated)),
		binding("system:discovery", group(authn.GroupAuthenticated)),
		binding("system:public-info-viewer", group(authn.GroupAuthenticated), group(authn.GroupUnauthenticated)),
		binding("system:monitoring", group(groupMonitoring)),
		binding("system:service-account-issuer-discovery", group(authn.GroupServiceAccounts)),
		binding("system:node-proxier", user(kubeProxyUser)),
		binding(NodeNetworkUser, user(NodeNetworkUser)),
		binding(ControllerManagerUser, user(ControllerManagerUser)),
		binding(SchedulerUser, user(SchedulerUser)),
		binding(ProxyUser, user(ProxyUser)),
		binding(DNSUser, user(DNSUser)),
		binding(IngressUser, user(IngressUser)),
	}
}

func bootstrapMeta(name string, extraLabels map[string]string) metav1.ObjectMeta {
	labels := map[string]string{BootstrappingLabel: BootstrappingValue}
	for k, v := range extraLabels {
		labels[k] = v
	}
	return metav1.ObjectMeta{
		Name:        name,
		Labels:      labels,
		Annotations: map[string]string{AutoUpdateAnnotation: "true"},
	}
}

func clusterRole(name string, labels map[string]string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
	// Rules are deep-copied so callers may modify what they get.
	copied := make([]rbacv1.PolicyRule, len(rules))
	for i := range rules {
		rules[i].DeepCopyInto(&copied[i])
	}
	return rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacAPIVersion, Kind: clusterRoleKind},
		ObjectMeta: bootstrapMeta(name, labels),
		Rules:      copied,
	}
}

func aggregatedRole(name, selectLabel string, labels map[string]string) rbacv1.ClusterRole {
	r := clusterRole(name, labels)
	r.Rules = nil
	r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
		{MatchLabels: map[string]string{selectLabel: aggregationLabelEnabled}},
	}}
	return r
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacGroup, Name: name}
}

func user(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacGroup, Name: name}
}

// binding binds the cluster role of the same name to subjects.
func binding(name string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacAPIVersion, Kind: clusterRoleBindingKind},
		ObjectMeta: bootstrapMeta(name, nil),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacGroup, Kind: clusterRoleKind, Name: name},
		Subjects:   subjects,
	}
}
