package server

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/ingress"
)

// The Ingress controller's objects.
const (
	ingressNamespace   = metav1.NamespaceSystem
	ingressAppName     = "tranche-ingress"
	ingressRoleName    = "system:tranche-ingress"
	ingressClassName   = "tranche"
	ingressMetricsPort = 10254
)

// ensureIngress creates what the Ingress controller needs: the default IngressClass
// "tranche", a ClusterRole limited to what the controller reads and writes, its
// ServiceAccount and binding, the LoadBalancer Service kube-system/tranche-ingress
// (ports 80 and 443) and the Deployment running `tranche ingress`. Existing objects are
// left as they are, so a user's changes (say, another replica count) survive restarts.
func ensureIngress(ctx context.Context, client kubernetes.Interface, cfg Config) error {
	class := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: ingressClassName,
			Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
		Spec: networkingv1.IngressClassSpec{Controller: ingress.ControllerName},
	}
	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ingressRoleName},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "secrets"}, Verbs: read},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses", "ingressclasses"}, Verbs: read},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses/status"}, Verbs: []string{"update"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		},
	}
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ingressAppName, Namespace: ingressNamespace}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ingressRoleName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ingressRoleName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ingressAppName, Namespace: ingressNamespace}},
	}
	labels := map[string]string{"app.kubernetes.io/name": ingressAppName}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ingressAppName, Namespace: ingressNamespace, Labels: labels},
		Spec: v1.ServiceSpec{
			Type:     v1.ServiceTypeLoadBalancer,
			Selector: labels,
			Ports: []v1.ServicePort{
				{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("http")},
				{Name: "https", Port: 443, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("https")},
			},
		},
	}
	// Pods here get no KUBERNETES_SERVICE_* variables of their own yet; give the ones
	// client-go's in-cluster configuration reads: the kubernetes Service's address.
	apiEnv := []v1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: nthAddr(cfg.ServiceCIDR, 1).String()},
		{Name: "KUBERNETES_SERVICE_PORT", Value: "443"},
	}
	probe := func(path string, period, failures int32) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: intstr.FromInt32(ingressMetricsPort)}},
			PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 1}
	}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: ingressAppName, Namespace: ingressNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					ServiceAccountName: ingressAppName,
					Containers: []v1.Container{{
						Name:  "ingress",
						Image: "tranche",
						Args: []string{"ingress", "--http-listen=:80", "--https-listen=:443",
							fmt.Sprintf("--metrics-listen=:%d", ingressMetricsPort),
							"--publish-service=" + ingressNamespace + "/" + ingressAppName},
						Env: apiEnv,
						Ports: []v1.ContainerPort{
							{Name: "http", ContainerPort: 80, Protocol: v1.ProtocolTCP},
							{Name: "https", ContainerPort: 443, Protocol: v1.ProtocolTCP},
							{Name: "metrics", ContainerPort: ingressMetricsPort, Protocol: v1.ProtocolTCP},
						},
						ReadinessProbe: probe("/ready", 1, 3),
						LivenessProbe:  probe("/healthz", 10, 5),
					}},
				},
			},
		},
	}
	objects := []bootstrapObject{
		{"ingressclass " + class.Name, func() error {
			_, err := client.NetworkingV1().IngressClasses().Get(ctx, class.Name, metav1.GetOptions{})
			return err
		}, func() error {
			_, err := client.NetworkingV1().IngressClasses().Create(ctx, class, metav1.CreateOptions{})
			return err
		}},
		{"clusterrole " + role.Name, func() error {
			_, err := client.RbacV1().ClusterRoles().Get(ctx, role.Name, metav1.GetOptions{})
			return err
		}, func() error {
			_, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
			return err
		}},
		{"serviceaccount " + ingressNamespace + "/" + sa.Name, func() error {
			_, err := client.CoreV1().ServiceAccounts(ingressNamespace).Get(ctx, sa.Name, metav1.GetOptions{})
			return err
		}, func() error {
			_, err := client.CoreV1().ServiceAccounts(ingressNamespace).Create(ctx, sa, metav1.CreateOptions{})
			return err
		}},
		{"clusterrolebinding " + binding.Name, func() error {
			_, err := client.RbacV1().ClusterRoleBindings().Get(ctx, binding.Name, metav1.GetOptions{})
			return err
		}, func() error {
			_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
			return err
		}},
		{"service " + ingressNamespace + "/" + svc.Name, func() error {
			_, err := client.CoreV1().Services(ingressNamespace).Get(ctx, svc.Name, metav1.GetOptions{})
			return err
		}, func() error {
			_, err := client.CoreV1().Services(ingressNamespace).Create(ctx, svc, metav1.CreateOptions{})
			return err
		}},
		{"deployment " + ingressNamespace + "/" + deploy.Name, func() error {
			_, err := client.AppsV1().Deployments(ingressNamespace).Get(ctx, deploy.Name, metav1.GetOptions{})
			return err
		}, func() error {
			_, err := client.AppsV1().Deployments(ingressNamespace).Create(ctx, deploy, metav1.CreateOptions{})
			return err
		}},
	}
	return ensure(objects)
}
