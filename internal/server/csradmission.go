package server

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"reflect"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/auth/authn"
	"github.com/tranche/tranche/internal/auth/authz"
)

var csrResource = schema.GroupResource{Group: certificatesv1.GroupName, Resource: "certificatesigningrequests"}

// csrAdmission is what kube-apiserver does to CertificateSigningRequests beyond their
// strategy: a new request carries its requester's identity in spec (username, uid,
// groups, extra), whatever the client sent; CertificateSubjectRestriction refuses the
// kube-apiserver-client signer for the system:masters organization;
// CertificateApproval lets a user write /approval only with the "approve" verb on the
// request's signer (certificates.k8s.io signers, by name or "domain/*");
// CertificateSigning lets a user change status through /status only with "sign".
type csrAdmission struct{ sec *security }

var _ apiserver.Mutator = csrAdmission{}

// Mutate implements apiserver.Mutator.
func (c csrAdmission) Mutate(ctx context.Context, req *apiserver.AdmissionRequest) error {
	if req.Resource.GroupResource() != csrResource {
		return nil
	}
	csr, ok := req.Object.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return nil
	}
	old, _ := req.OldObject.(*certificatesv1.CertificateSigningRequest)
	user := userFrom(ctx)
	switch {
	case req.Operation == apiserver.AdmitCreate && req.Subresource == "":
		setRequester(csr, user)
		if err := restrictSubject(csr, req.Name); err != nil {
			return err
		}
		return c.guardLiveNode(csr, user, req.Name)
	case req.Subresource == "approval" && old != nil:
		if !c.authorizedForSigner(ctx, user, "approve", old.Spec.SignerName) {
			return apierrors.NewForbidden(csrResource, req.Name, fmt.Errorf("user not permitted to approve requests with signerName %q", old.Spec.SignerName))
		}
	case req.Subresource == "status" && old != nil:
		if reflect.DeepEqual(old.Status.Certificate, csr.Status.Certificate) && apiequality.Semantic.DeepEqual(old.Status.Conditions, csr.Status.Conditions) {
			return nil
		}
		if !c.authorizedForSigner(ctx, user, "sign", old.Spec.SignerName) {
			return apierrors.NewForbidden(csrResource, req.Name, fmt.Errorf("user not permitted to sign requests with signerName %q", old.Spec.SignerName))
		}
	}
	return nil
}

// setRequester writes the requesting user's identity into spec.
func setRequester(csr *certificatesv1.CertificateSigningRequest, user *authn.User) {
	csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups, csr.Spec.Extra = "", "", nil, nil
	if user == nil {
		return
	}
	csr.Spec.Username, csr.Spec.UID = user.Name, user.UID
	csr.Spec.Groups = append([]string(nil), user.Groups...)
	if len(user.Extra) > 0 {
		csr.Spec.Extra = map[string]certificatesv1.ExtraValue{}
		for k, v := range user.Extra {
			csr.Spec.Extra[k] = append(certificatesv1.ExtraValue(nil), v...)
		}
	}
}

// restrictSubject refuses a kube-apiserver-client request for system:masters.
func restrictSubject(csr *certificatesv1.CertificateSigningRequest, name string) error {
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName {
		return nil
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return apierrors.NewForbidden(csrResource, name, fmt.Errorf("failed to parse CSR: PEM block type must be CERTIFICATE REQUEST"))
	}
	parsed, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return apierrors.NewForbidden(csrResource, name, fmt.Errorf("failed to parse CSR: %v", err))
	}
	for _, o := range parsed.Subject.Organization {
		if o == authn.GroupMasters {
			return apierrors.NewForbidden(csrResource, name, fmt.Errorf("use of %s signer with system:masters group is not allowed", certificatesv1.KubeAPIServerClientSignerName))
		}
	}
	return nil
}

// guardLiveNode refuses a bootstrap token's request for the client certificate of a
// node that is registered and Ready. Kubernetes approves such a request for any node
// name, so whoever holds a token can take over a live node's identity (its pods'
// secrets, its status); tranche refuses it while that Node is Ready. A machine
// reinstalled under its old name joins once its Node is NotReady or deleted.
func (c csrAdmission) guardLiveNode(csr *certificatesv1.CertificateSigningRequest, user *authn.User, name string) error {
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || user == nil ||
		!slices.Contains(user.Groups, bootstrapapi.BootstrapDefaultGroup) || c.sec == nil {
		return nil
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		return nil // the request's own validation names what is wrong with it
	}
	parsed, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil
	}
	node, ok := strings.CutPrefix(parsed.Subject.CommonName, "system:node:")
	if !ok {
		return nil
	}
	n, found, err := lookup(c.sec, func(l *listers) (*v1.Node, error) { return l.nodes.Get(node) })
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("checking node %q: %v", node, err))
	}
	if found && nodeIsReady(n) {
		return apierrors.NewForbidden(csrResource, name, fmt.Errorf("node %q is registered and Ready: a bootstrap token may not take over a live node's identity (delete the Node first if its machine was reinstalled)", node))
	}
	return nil
}

// nodeIsReady reports whether n's Ready condition is True.
func nodeIsReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// authorizedForSigner asks the authorizer for verb on the signer by name, then on its
// domain's wildcard ("example.com/*"), as kube-apiserver's certauthorization does.
func (c csrAdmission) authorizedForSigner(ctx context.Context, user *authn.User, verb, signerName string) bool {
	if c.sec == nil || c.sec.authorizer == nil {
		return true
	}
	domain, _, _ := strings.Cut(signerName, "/")
	for _, name := range []string{signerName, domain + "/*"} {
		a := authz.Attributes{User: user, Verb: verb, APIGroup: certificatesv1.GroupName, APIVersion: "*", Resource: "signers",
			Name: name, ResourceRequest: true}
		if d, _, _ := c.sec.authorizer.Authorize(ctx, a); d == authz.Allow {
			return true
		}
	}
	return false
}
