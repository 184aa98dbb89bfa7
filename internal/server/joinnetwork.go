package server

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/tranche/tranche/internal/auth/bootstrap"
	"github.com/tranche/tranche/internal/bootstraptoken"
	"github.com/tranche/tranche/internal/controller/manager"
	"github.com/tranche/tranche/internal/nodeconfig"
)

// NodeNetworkCommonNamePrefix starts the common name of a joined node's pod-network
// certificate: system:tranche:node-network:<node>, in the group (organization)
// bootstrap.NodeNetworkUser, which is bound to the node-network ClusterRole (read Nodes).
const NodeNetworkCommonNamePrefix = bootstrap.NodeNetworkUser + ":"

// nodeNetworkRequest says whether csr is a node asking for its own pod-network client
// certificate, which the node-network approver approves: signer
// kubernetes.io/kube-apiserver-client, requested by system:node:<n> (group
// system:nodes), subject CN system:tranche:node-network:<n> and O exactly
// system:tranche:node-network, no SANs, client-auth usages only. The reason says what
// does not fit.
func nodeNetworkRequest(csr *certificatesv1.CertificateSigningRequest) (bool, string) {
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName {
		return false, "signer is not " + certificatesv1.KubeAPIServerClientSignerName
	}
	node, ok := strings.CutPrefix(csr.Spec.Username, "system:node:")
	if !ok || node == "" || !slices.Contains(csr.Spec.Groups, "system:nodes") {
		return false, "requester is not a node"
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return false, "request is not a PEM CERTIFICATE REQUEST"
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return false, "request does not parse: " + err.Error()
	}
	if req.Subject.CommonName != NodeNetworkCommonNamePrefix+node {
		return false, fmt.Sprintf("common name %q is not %s%s", req.Subject.CommonName, NodeNetworkCommonNamePrefix, node)
	}
	if !slices.Equal(req.Subject.Organization, []string{bootstrap.NodeNetworkUser}) {
		return false, fmt.Sprintf("organization %q is not [%s]", req.Subject.Organization, bootstrap.NodeNetworkUser)
	}
	if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 {
		return false, "request has subject alternative names"
	}
	for _, u := range csr.Spec.Usages {
		if u != certificatesv1.UsageClientAuth && u != certificatesv1.UsageDigitalSignature && u != certificatesv1.UsageKeyEncipherment {
			return false, fmt.Sprintf("usage %q is not for a client", u)
		}
	}
	if !slices.Contains(csr.Spec.Usages, certificatesv1.UsageClientAuth) {
		return false, "usages lack client auth"
	}
	return true, ""
}

// nodeNetworkApprover approves nodes' requests for their own pod-network certificate
// (nodeNetworkRequest); it leaves every other request alone, pending for a person or
// another approver.
type nodeNetworkApprover struct {
	client kubernetes.Interface
	synced cache.InformerSynced
	queue  chan *certificatesv1.CertificateSigningRequest
}

func newNodeNetworkApprover(c manager.Context) (manager.Controller, error) {
	a := &nodeNetworkApprover{client: c.Client, queue: make(chan *certificatesv1.CertificateSigningRequest, 64)}
	inf := c.Informers.Certificates().V1().CertificateSigningRequests().Informer()
	a.synced = inf.HasSynced
	enqueue := func(obj any) {
		if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && pending(csr) {
			a.queue <- csr
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }}); err != nil {
		return nil, err
	}
	return a, nil
}

func pending(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
			return false
		}
	}
	return true
}

// Run implements manager.Controller.
func (a *nodeNetworkApprover) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), a.synced) {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case csr := <-a.queue:
			if ok, _ := nodeNetworkRequest(csr); !ok {
				continue
			}
			csr = csr.DeepCopy()
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "AutoApproved",
				Message: "Auto approving the pod-network client certificate of " + csr.Spec.Username, LastUpdateTime: metav1.Now()})
			// A conflict or a gone request needs nothing more: the update event brings the
			// current one back if it is still pending.
			_, _ = a.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
		}
	}
}

// ensureNodeSettings publishes the cluster settings joined nodes read
// (internal/nodeconfig), lets nodes and bootstrappers read them, as kubeadm's
// kubeadm:kubelet-config and kube-proxy Roles, and binds the node-network ClusterRole
// to the group of the nodes' pod-network certificates.
func ensureNodeSettings(ctx context.Context, client kubernetes.Interface, s nodeconfig.Settings) error {
	cms, err := nodeconfig.ConfigMaps(s)
	if err != nil {
		return err
	}
	for _, cm := range cms {
		cur, err := client.CoreV1().ConfigMaps(cm.Namespace).Get(ctx, cm.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := client.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("configmap %s/%s: %w", cm.Namespace, cm.Name, err)
			}
		case err != nil:
			return fmt.Errorf("configmap %s/%s: %w", cm.Namespace, cm.Name, err)
		case !apiequality.Semantic.DeepEqual(cur.Data, cm.Data):
			cur.Data = cm.Data
			if _, err := client.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("configmap %s/%s: %w", cm.Namespace, cm.Name, err)
			}
		}
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tranche:" + cm.Name, Namespace: cm.Namespace},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{cm.Name}}}}
		if err := ensureRole(ctx, client, role); err != nil {
			return err
		}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:nodes"},
				{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: bootstraptoken.DefaultGroup}}}
		if _, err := client.RbacV1().RoleBindings(rb.Namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("rolebinding %s/%s: %w", rb.Namespace, rb.Name, err)
		}
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tranche:node-network-certificates"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: bootstrap.NodeNetworkUser},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: bootstrap.NodeNetworkUser}}}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("clusterrolebinding %s: %w", crb.Name, err)
	}
	return nil
}
