package server

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/controlplane/controller/clusterauthenticationtrust"

	"github.com/tranche/tranche/internal/auth/authn"
	rbacpolicy "github.com/tranche/tranche/internal/auth/bootstrap"
	"github.com/tranche/tranche/internal/auth/pki"
)

// frontProxyHeaders are the request headers of the server's front proxy: what its
// aggregator sends to extension API servers and what its own request-header
// authenticator accepts from the front-proxy client certificate, as kubeadm configures
// kube-apiserver.
var frontProxyHeaders = authn.DefaultRequestHeaders(pki.FrontProxyClientName)

// extensionAuthInfo is what the server publishes in kube-system's
// extension-apiserver-authentication ConfigMap: the cluster CA that verifies client
// certificates (client-ca-file) and the front-proxy CA, allowed names and headers
// (requestheader-*), by which an extension API server authenticates the requests the
// aggregator proxies to it.
func extensionAuthInfo(clusterCA []byte, fp *pki.FrontProxy, h authn.RequestHeaderConfig) (clusterauthenticationtrust.ClusterAuthenticationInfo, error) {
	clientCA, err := dynamiccertificates.NewStaticCAContent("client-ca", clusterCA)
	if err != nil {
		return clusterauthenticationtrust.ClusterAuthenticationInfo{}, fmt.Errorf("client CA: %w", err)
	}
	frontProxyCA, err := dynamiccertificates.NewStaticCAContent("request-header", fp.CA.CertPEM)
	if err != nil {
		return clusterauthenticationtrust.ClusterAuthenticationInfo{}, fmt.Errorf("front-proxy CA: %w", err)
	}
	return clusterauthenticationtrust.ClusterAuthenticationInfo{
		ClientCA:                         clientCA,
		RequestHeaderCA:                  frontProxyCA,
		RequestHeaderUsernameHeaders:     headerrequest.StaticStringSlice(h.UsernameHeaders),
		RequestHeaderUIDHeaders:          headerrequest.StaticStringSlice(h.UIDHeaders),
		RequestHeaderGroupHeaders:        headerrequest.StaticStringSlice(h.GroupHeaders),
		RequestHeaderExtraHeaderPrefixes: headerrequest.StaticStringSlice(h.ExtraHeaderPrefixes),
		RequestHeaderAllowedNames:        headerrequest.StaticStringSlice(h.AllowedNames),
	}, nil
}

// startExtensionAuth publishes extensionAuthInfo of the server's CAs. It creates the
// roles extension API servers are bound to (system:auth-delegator, kube-system's
// extension-apiserver-authentication-reader) when missing, then keeps the
// extension-apiserver-authentication ConfigMap until ctx ends with kube-apiserver's own
// controller: it merges the information into what the ConfigMap has (the CAs and names
// of the cluster's other API servers stay, expired CAs go), writes it again when someone
// changes or deletes it, and checks it every minute.
func startExtensionAuth(ctx context.Context, client kubernetes.Interface, clusterCA []byte, fp *pki.FrontProxy, log *slog.Logger) error {
	info, err := extensionAuthInfo(clusterCA, fp, frontProxyHeaders)
	if err != nil {
		return err
	}
	for _, r := range rbacpolicy.AggregationClusterRoles() {
		if err := ensureClusterRole(ctx, client, &r); err != nil {
			return err
		}
	}
	for _, r := range rbacpolicy.SystemNamespaceRoles() {
		if err := ensureRole(ctx, client, &r); err != nil {
			return err
		}
	}
	c := clusterauthenticationtrust.NewClusterAuthenticationTrustController(info, client)
	go c.Run(ctx, 1)
	log.Info("publishing the extension API server authentication", "configmap", metav1.NamespaceSystem+"/"+rbacpolicy.ExtensionAuthConfigMap)
	return nil
}

// ensureRole creates role when missing and puts back its rules when they differ and it
// is not marked autoupdate=false, as ensureClusterRole does for cluster roles.
func ensureRole(ctx context.Context, client kubernetes.Interface, role *rbacv1.Role) error {
	roles := client.RbacV1().Roles(role.Namespace)
	cur, err := roles.Get(ctx, role.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := roles.Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("role %s/%s: %w", role.Namespace, role.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("role %s/%s: %w", role.Namespace, role.Name, err)
	}
	if cur.Annotations[rbacpolicy.AutoUpdateAnnotation] == "false" || apiequality.Semantic.DeepEqual(cur.Rules, role.Rules) {
		return nil
	}
	cur.Rules = role.Rules
	if _, err := roles.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("role %s/%s: %w", role.Namespace, role.Name, err)
	}
	return nil
}

// clientCAs are the CAs the TLS server accepts client certificates from: the cluster
// CA and the front-proxy CA, whose certificates the request-header authenticator
// alone accepts.
func clientCAs(ca *pki.CA, fp *pki.FrontProxy) *x509.CertPool {
	pool := ca.Pool()
	pool.AddCert(fp.CA.Cert)
	return pool
}
