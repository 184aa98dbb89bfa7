package server

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstrapsecrets "k8s.io/cluster-bootstrap/util/secrets"
	"k8s.io/kubernetes/pkg/controller/bootstrap"
	"k8s.io/kubernetes/pkg/controller/certificates/approver"
	"k8s.io/kubernetes/pkg/controller/certificates/signer"
	bootstraptokenauth "k8s.io/kubernetes/plugin/pkg/auth/authenticator/token/bootstrap"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/auth/authn"
	"github.com/tranche/tranche/internal/auth/pki"
	"github.com/tranche/tranche/internal/bootstraptoken"
	"github.com/tranche/tranche/internal/controller/manager"
	"github.com/tranche/tranche/internal/nodeconfig"
)

// bootstrapTokenAuth authenticates bootstrap tokens (Secrets bootstrap-token-<id> in
// kube-system) with kube-apiserver's authenticator: user system:bootstrap:<id>, groups
// system:bootstrappers and the token's auth-extra-groups. Unknown tokens and wrong
// secrets get no answer (401 "Unauthorized"); a token whose secret matches but which
// has expired is refused with a message saying so, which a joining node reports.
type bootstrapTokenAuth struct {
	secrets atomic.Pointer[corelisters.SecretNamespaceLister]
}

var _ authn.Authenticator = (*bootstrapTokenAuth)(nil)

// Authenticate implements authn.Authenticator.
func (b *bootstrapTokenAuth) Authenticate(r *http.Request) (*authn.User, bool, error) {
	token, ok := authn.BearerToken(r)
	if !ok {
		return nil, false, nil
	}
	tok, err := bootstraptoken.Parse(token)
	if err != nil {
		return nil, false, nil
	}
	lister := b.secrets.Load()
	if lister == nil {
		return nil, false, nil
	}
	if s, err := (*lister).Get(bootstrapapi.BootstrapTokenSecretPrefix + tok.ID); err == nil &&
		subtle.ConstantTimeCompare([]byte(bootstrapsecrets.GetData(s, bootstrapapi.BootstrapTokenSecretKey)), []byte(tok.Secret)) == 1 &&
		bootstrapsecrets.HasExpired(s, time.Now()) {
		return nil, false, fmt.Errorf("bootstrap token %s has expired (%s)", tok.ID, bootstrapsecrets.GetData(s, bootstrapapi.BootstrapTokenExpirationKey))
	}
	resp, ok, err := bootstraptokenauth.NewTokenAuthenticator(*lister).AuthenticateToken(r.Context(), token)
	if !ok || err != nil {
		return nil, ok, err
	}
	return &authn.User{Name: resp.User.GetName(), Groups: resp.User.GetGroups()}, true, nil
}

// watchBootstrapTokens fills the authenticator's cache of kube-system Secrets.
func (s *security) watchBootstrapTokens(ctx context.Context, client kubernetes.Interface) error {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(metav1.NamespaceSystem))
	lister := f.Core().V1().Secrets().Lister().Secrets(metav1.NamespaceSystem)
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache of %v did not sync", typ)
		}
	}
	s.bootstrapTokens.secrets.Store(&lister)
	return nil
}

// anonymousAllowed is what an unauthenticated request may still ask (and RBAC then
// decides): kube-public/cluster-info, which joining nodes read before they trust the
// cluster, as kubeadm's anonymous access to it.
func anonymousAllowed(req apiserver.Request) bool {
	return req.IsResourceRequest && req.Verb == "get" && req.APIGroup == "" && req.Namespace == metav1.NamespacePublic &&
		req.Resource == "configmaps" && req.Subresource == "" && req.Name == bootstrapapi.ConfigMapClusterInfo
}

// joinControllers are kube-controller-manager's controllers for nodes that join with a
// token: bootstrapsigner (signs kube-public/cluster-info with each token's secret),
// tokencleaner (deletes expired tokens), csrapproving (approves node client requests
// that RBAC allows) and csrsigning (signs kubelet client and serving certificates, and
// kube-apiserver-client ones, with the cluster CA, for --cluster-signing-duration,
// upstream's default of one year, unless the request asks less); and tranche's csrapproving-node-network, which
// approves a node's request for its own pod-network certificate (nodeNetworkRequest).
func joinControllers(o controllerOptions) []manager.Descriptor {
	pkiDir := filepath.Join(filepath.Dir(o.pvRoot), "pki") // the data dir holds pv/ and pki/
	caFile, caKeyFile := filepath.Join(pkiDir, pki.CACertFile), filepath.Join(pkiDir, pki.CAKeyFile)
	ttl := o.signingDuration
	if ttl <= 0 {
		ttl = DefaultClusterSigningDuration
	}
	return []manager.Descriptor{
		{Name: "bootstrapsigner", New: func(_ context.Context, c manager.Context) (manager.Controller, error) {
			return bootstrap.NewSigner(c.Client, c.Informers.Core().V1().Secrets(), c.Informers.Core().V1().ConfigMaps(), bootstrap.DefaultSignerOptions())
		}},
		{Name: "tokencleaner", New: func(_ context.Context, c manager.Context) (manager.Controller, error) {
			return bootstrap.NewTokenCleaner(c.Client, c.Informers.Core().V1().Secrets(), bootstrap.DefaultTokenCleanerOptions())
		}},
		{Name: "csrapproving", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(approver.NewCSRApprovingController(ctx, c.Client, c.Informers.Certificates().V1().CertificateSigningRequests()), 5), nil
		}},
		{Name: "csrsigning-kubelet-client", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			sc, err := signer.NewKubeletClientCSRSigningController(ctx, c.Client, c.Informers.Certificates().V1().CertificateSigningRequests(), caFile, caKeyFile, ttl)
			if err != nil {
				return nil, err
			}
			return manager.Workers(sc, 5), nil
		}},
		{Name: "csrapproving-node-network", New: func(_ context.Context, c manager.Context) (manager.Controller, error) {
			return newNodeNetworkApprover(c)
		}},
		{Name: "csrsigning-kube-apiserver-client", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			sc, err := signer.NewKubeAPIServerClientCSRSigningController(ctx, c.Client, c.Informers.Certificates().V1().CertificateSigningRequests(), caFile, caKeyFile, ttl)
			if err != nil {
				return nil, err
			}
			return manager.Workers(sc, 5), nil
		}},
		{Name: "csrsigning-kubelet-serving", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			sc, err := signer.NewKubeletServingCSRSigningController(ctx, c.Client, c.Informers.Certificates().V1().CertificateSigningRequests(), caFile, caKeyFile, ttl)
			if err != nil {
				return nil, err
			}
			return manager.Workers(sc, 5), nil
		}},
	}
}

// DefaultClusterSigningDuration is kube-controller-manager's --cluster-signing-duration default.
const DefaultClusterSigningDuration = 365 * 24 * time.Hour

// keepJoinObjects publishes kube-public/cluster-info (the API server's advertised URL
// and the CA, unsigned: bootstrapsigner adds the signatures) and kubeadm's RBAC for
// joining: bootstrappers may create node CSRs and have them approved, nodes have
// their renewals approved, anonymous users may read cluster-info. It retries until
// it succeeds or ctx ends.
func keepJoinObjects(ctx context.Context, client kubernetes.Interface, cfg Config, caPEM []byte, log *slog.Logger) {
	server := "https://" + net.JoinHostPort(cfg.AdvertiseAddress.String(), strconv.Itoa(advertisedPort(cfg)))
	_ = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		settings := nodeconfig.Settings{ClusterCIDR: cfg.ClusterCIDR, ClusterDNS: []string{nthAddr(cfg.ServiceCIDR, 10).String()}, ClusterDomain: "cluster.local"}
		if err := ensureJoinObjects(ctx, client, server, caPEM); err != nil {
			log.Warn("join objects", "err", err)
			return false, nil
		}
		if err := ensureNodeSettings(ctx, client, settings); err != nil {
			log.Warn("join objects", "err", err)
			return false, nil
		}
		return true, nil
	})
}

func ensureJoinObjects(ctx context.Context, client kubernetes.Interface, server string, caPEM []byte) error {
	kc, err := bootstraptoken.ClusterInfoKubeconfig(server, caPEM)
	if err != nil {
		return err
	}
	cms := client.CoreV1().ConfigMaps(metav1.NamespacePublic)
	cur, err := cms.Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: bootstrapapi.ConfigMapClusterInfo, Namespace: metav1.NamespacePublic},
			Data: map[string]string{bootstrapapi.KubeConfigKey: string(kc)}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("configmap kube-public/cluster-info: %w", err)
		}
	case err != nil:
		return fmt.Errorf("configmap kube-public/cluster-info: %w", err)
	case cur.Data[bootstrapapi.KubeConfigKey] != string(kc):
		if cur.Data == nil {
			cur.Data = map[string]string{}
		}
		cur.Data[bootstrapapi.KubeConfigKey] = string(kc)
		if _, err := cms.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("configmap kube-public/cluster-info: %w", err)
		}
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:bootstrap-signer-clusterinfo", Namespace: metav1.NamespacePublic},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{bootstrapapi.ConfigMapClusterInfo}}}}
	if err := ensureRole(ctx, client, role); err != nil {
		return err
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: metav1.NamespacePublic},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: authn.Anonymous().Name}}}
	if _, err := client.RbacV1().RoleBindings(rb.Namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("rolebinding %s/%s: %w", rb.Namespace, rb.Name, err)
	}
	bootstrappers := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: bootstraptoken.DefaultGroup}
	nodes := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:nodes"}
	for _, b := range []struct {
		name, role string
		subject    rbacv1.Subject
	}{
		{"kubeadm:kubelet-bootstrap", "system:node-bootstrapper", bootstrappers},
		{"kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", bootstrappers},
		{"kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", nodes},
	} {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role}, Subjects: []rbacv1.Subject{b.subject}}
		if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("clusterrolebinding %s: %w", b.name, err)
		}
	}
	return nil
}
