package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// systemNamespaces exist from the start, as on every Kubernetes cluster.
var systemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// bootstrapObjects creates the objects every cluster has (namespaces, RBAC policy) through the
// API, so they are validated and defaulted like anything a user writes. Existing objects
// are left as they are.
func bootstrapObjects(ctx context.Context, restCfg *rest.Config, cfg Config, log *slog.Logger) error {
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	// The listener may take a moment; wait for it rather than fail.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.Discovery().ServerVersion()
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("API server did not answer: %w", err)
	}
	for _, name := range systemNamespaces {
		ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", name, err)
		}
	}
	if err := bootstrapRBAC(ctx, client); err != nil {
		return err
	}
	if err := ensureAPIService(ctx, client, cfg); err != nil {
		return err
	}
	if err := ensureClusterDNS(ctx, client, cfg); err != nil {
		return err
	}
	if err := ensureIngress(ctx, client, cfg); err != nil {
		return err
	}
	log.Debug("bootstrap objects present")
	return nil
}

// DNSConfig is what the cluster DNS Deployment (kube-system/tranche-dns) is given.
type DNSConfig struct {
	// Upstreams are the resolvers (IP:port) tranche-dns forwards other names to; none
	// means it refuses them.
	Upstreams []string
	// APIServer is the URL tranche-dns reads the API at, bypassing the kubernetes
	// Service as kube-proxy does; empty means the Service (KUBERNETES_SERVICE_HOST).
	APIServer string
}

// The cluster DNS objects; kube-dns is the Service name every Kubernetes user expects.
const (
	dnsNamespace   = metav1.NamespaceSystem
	dnsAppName     = "tranche-dns"
	dnsServiceName = "kube-dns"
	dnsRoleName    = "system:tranche-dns"
	dnsMetricsPort = 9153
)

// ensureClusterDNS creates what runs the cluster DNS when it is missing: the
// ClusterRole to read Services, EndpointSlices, Namespaces and Pods, the ServiceAccount
// and binding, the kube-dns Service at the tenth address of the service range, and the
// Deployment of two tranche-dns replicas (the image "tranche" runs the tranche binary).
// Objects that exist are left as they are, so an operator's changes stay.
func ensureClusterDNS(ctx context.Context, client kubernetes.Interface, cfg Config) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: dnsRoleName},
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"services", "namespaces", "pods"}},
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}},
		},
	}
	if err := ensureClusterRole(ctx, client, role); err != nil {
		return err
	}
	labels := map[string]string{"k8s-app": "kube-dns"}
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: dnsAppName, Namespace: dnsNamespace}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: dnsRoleName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: dnsRoleName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: dnsAppName, Namespace: dnsNamespace}},
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: dnsServiceName, Namespace: dnsNamespace,
			Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "tranche-dns"}},
		Spec: v1.ServiceSpec{
			ClusterIP: nthAddr(cfg.ServiceCIDR, 10).String(),
			Selector:  labels,
			Ports: []v1.ServicePort{
				{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
				{Name: "metrics", Port: dnsMetricsPort, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(dnsMetricsPort)},
			},
		},
	}
	args := []string{"dns", "--listen=:53", fmt.Sprintf("--metrics-listen=:%d", dnsMetricsPort), "--cluster-domain=cluster.local"}
	// The DNS answers the reverse zones of the service and pod ranges itself; given
	// the cluster's own ranges rather than trusting its defaults to match them.
	if cfg.ServiceCIDR.IsValid() {
		args = append(args, "--service-cluster-ip-range="+cfg.ServiceCIDR.String())
	}
	if cfg.ClusterCIDR.IsValid() {
		args = append(args, "--cluster-cidr="+cfg.ClusterCIDR.String())
	}
	for _, u := range cfg.DNS.Upstreams {
		args = append(args, "--upstream="+u)
	}
	if cfg.DNS.APIServer != "" {
		args = append(args, "--api-server="+cfg.DNS.APIServer)
	}
	probe := func(path string, period, failures int32) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: intstr.FromInt32(dnsMetricsPort)}},
			PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 1}
	}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: dnsAppName, Namespace: dnsNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					ServiceAccountName: dnsAppName,
					// The DNS must not resolve through itself.
					DNSPolicy: v1.DNSDefault,
					Containers: []v1.Container{{
						Name:  "dns",
						Image: "tranche",
						Args:  args,
						Ports: []v1.ContainerPort{
							{Name: "dns", ContainerPort: 53, Protocol: v1.ProtocolUDP},
							{Name: "dns-tcp", ContainerPort: 53, Protocol: v1.ProtocolTCP},
							{Name: "metrics", ContainerPort: dnsMetricsPort, Protocol: v1.ProtocolTCP},
						},
						ReadinessProbe: probe("/ready", 1, 3),
						LivenessProbe:  probe("/health", 10, 5),
					}},
				},
			},
		},
	}
	objects := []bootstrapObject{
		{"serviceaccount " + dnsNamespace + "/" + dnsAppName, func() error {
			_, err := client.CoreV1().ServiceAccounts(dnsNamespace).Get(ctx, sa.Name, metav1.GetOptions{})
			return err
		}, func() error {
			_, err := client.CoreV1().ServiceAccounts(dnsNamespace).Create(ctx, sa, metav1.CreateOptions{})
			return err
		}},
		{"clusterrolebinding " + dnsRoleName, func() error {
			_, err := client.RbacV1().ClusterRoleBindings().Get(ctx, binding.Name, metav1.GetOptions{})
			return err
		}, func() error {
			_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
			return err
		}},
		{"service " + dnsNamespace + "/" + dnsServiceName, func() error {
			_, err := client.CoreV1().Services(dnsNamespace).Get(ctx, svc.Name, metav1.GetOptions{})
			return err
		}, func() error {
			_, err := client.CoreV1().Services(dnsNamespace).Create(ctx, svc, metav1.CreateOptions{})
			return err
		}},
		{"deployment " + dnsNamespace + "/" + dnsAppName, func() error {
			_, err := client.AppsV1().Deployments(dnsNamespace).Get(ctx, deploy.Name, metav1.GetOptions{})
			return err
		}, func() error {
			_, err := client.AppsV1().Deployments(dnsNamespace).Create(ctx, deploy, metav1.CreateOptions{})
			return err
		}},
	}
	if err := ensure(objects); err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	return nil
}

// bootstrapObject is one object a bootstrap step makes sure exists: what names it in
// errors, get reads it, create makes it.
type bootstrapObject struct {
	what   string
	get    func() error
	create func() error
}

// ensure creates, in order, each object that get does not find, and leaves alone the
// ones that exist (a restart, or another API server that got there first). Get comes
// before Create because on a restart a Service's addresses and ports are allocated
// already, and the allocators refuse them before storage could say AlreadyExists.
func ensure(objects []bootstrapObject) error {
	for _, o := range objects {
		err := o.get()
		if apierrors.IsNotFound(err) {
			err = o.create()
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: %w", o.what, err)
		}
	}
	return nil
}
