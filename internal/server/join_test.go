package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/tranche/tranche/internal/apiserver"
	authbootstrap "github.com/tranche/tranche/internal/auth/bootstrap"
	"github.com/tranche/tranche/internal/auth/pki"
	"github.com/tranche/tranche/internal/bootstraptoken"
	"github.com/tranche/tranche/internal/controller/manager"
	"github.com/tranche/tranche/internal/nodeconfig"
	"github.com/tranche/tranche/internal/testutil"
)

func tokenSecret(id, secret string, mutate func(*v1.Secret)) *v1.Secret {
	s := bootstraptoken.Secret(bootstraptoken.Token{ID: id, Secret: secret}, bootstraptoken.Options{TTL: time.Hour, Now: time.Now()})
	if mutate != nil {
		mutate(s)
	}
	return s
}

// TestBootstrapTokenAuth: a valid token is user system:bootstrap:<id> in
// system:bootstrappers and its extra groups; an expired one whose secret matches is
// refused saying it expired; unknown tokens, wrong secrets and tokens without the
// authentication usage get no answer.
func TestBootstrapTokenAuth(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range []*v1.Secret{
		tokenSecret("abcdef", "0123456789abcdef", nil),
		tokenSecret("expire", "0123456789abcdef", func(s *v1.Secret) { s.Data["expiration"] = []byte("2000-01-01T00:00:00Z") }),
		tokenSecret("noauth", "0123456789abcdef", func(s *v1.Secret) { delete(s.Data, "usage-bootstrap-authentication") }),
	} {
		if err := idx.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	var a bootstrapTokenAuth
	lister := corelisters.NewSecretLister(idx).Secrets("kube-system")
	a.secrets.Store(&lister)
	cases := []struct {
		name, header, wantUser, wantErr string
	}{
		{name: "valid", header: "Bearer abcdef.0123456789abcdef", wantUser: "system:bootstrap:abcdef"},
		{name: "wrong secret", header: "Bearer abcdef.0123456789abcdee"},
		{name: "unknown", header: "Bearer zzzzzz.0123456789abcdef"},
		{name: "expired", header: "Bearer expire.0123456789abcdef", wantErr: "bootstrap token expire has expired"},
		{name: "expired, wrong secret", header: "Bearer expire.0123456789abcdee"},
		{name: "no authentication usage", header: "Bearer noauth.0123456789abcdef"},
		{name: "not a bootstrap token", header: "Bearer some-other-token"},
		{name: "no token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api", nil)
			if c.header != "" {
				r.Header.Set("Authorization", c.header)
			}
			u, ok, err := a.Authenticate(r)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || ok {
					t.Fatalf("got %v, %v, %v; want error %q", u, ok, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.wantUser == "" {
				if ok {
					t.Fatalf("authenticated as %+v", u)
				}
				return
			}
			if !ok || u.Name != c.wantUser || !slices.Equal(u.Groups, []string{"system:bootstrappers", bootstraptoken.DefaultGroup}) {
				t.Fatalf("got %+v, %v", u, ok)
			}
		})
	}
}

func TestAnonymousAllowed(t *testing.T) {
	base := apiserver.Request{IsResourceRequest: true, Verb: "get", Namespace: "kube-public", Resource: "configmaps", Name: "cluster-info"}
	if !anonymousAllowed(base) {
		t.Error("cluster-info refused")
	}
	for name, mutate := range map[string]func(*apiserver.Request){
		"list":           func(r *apiserver.Request) { r.Verb, r.Name = "list", "" },
		"other name":     func(r *apiserver.Request) { r.Name = "other" },
		"other ns":       func(r *apiserver.Request) { r.Namespace = "kube-system" },
		"update":         func(r *apiserver.Request) { r.Verb = "update" },
		"secrets":        func(r *apiserver.Request) { r.Resource = "secrets" },
		"non-resource":   func(r *apiserver.Request) { r.IsResourceRequest = false },
		"another group":  func(r *apiserver.Request) { r.APIGroup = "example.com" },
		"a subresource?": func(r *apiserver.Request) { r.Subresource = "status" },
	} {
		r := base
		mutate(&r)
		if anonymousAllowed(r) {
			t.Errorf("%s allowed", name)
		}
	}
}

// csrFor makes a CSR object for subject, requested by user in groups.
func csrFor(t *testing.T, name string, subject pkix.Name, user string, groups []string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			Username:   user, Groups: groups,
		}}
}

// TestJoinControllersApproveAndSign: csrapproving approves a bootstrapper's request for
// a node client certificate and a node's renewal of its own, when RBAC (the
// SubjectAccessReviews) allows them, and nothing else; csrsigning signs the approved
// ones with the cluster CA for a year, client auth only.
func TestJoinControllersApproveAndSign(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.EnsureCA(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	client := kubefake.NewClientset(
		csrFor(t, "bootstrap", pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}}, "system:bootstrap:abcdef",
			[]string{"system:bootstrappers", bootstraptoken.DefaultGroup, "system:authenticated"}),
		csrFor(t, "renewal", pkix.Name{CommonName: "system:node:n2", Organization: []string{"system:nodes"}}, "system:node:n2",
			[]string{"system:nodes", "system:authenticated"}),
		csrFor(t, "other-node", pkix.Name{CommonName: "system:node:n3", Organization: []string{"system:nodes"}}, "system:node:n2",
			[]string{"system:nodes", "system:authenticated"}),
		csrFor(t, "not-a-node", pkix.Name{CommonName: "alice", Organization: []string{"system:nodes"}}, "system:bootstrap:abcdef",
			[]string{"system:bootstrappers", bootstraptoken.DefaultGroup}),
		networkCSR(t, "network", "n2", "system:node:n2"),
		networkCSR(t, "network-other-node", "n3", "system:node:n2"),
		networkCSR(t, "network-bootstrapper", "n2", "system:bootstrap:abcdef"),
	)
	// RBAC as kubeadm binds it: bootstrappers may ask for nodeclient, nodes for selfnodeclient.
	client.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = ra != nil && ra.Resource == "certificatesigningrequests" && ra.Verb == "create" &&
			((ra.Subresource == "nodeclient" && slices.Contains(sar.Spec.Groups, bootstraptoken.DefaultGroup)) ||
				(ra.Subresource == "selfnodeclient" && slices.Contains(sar.Spec.Groups, "system:nodes")))
		return true, sar, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	f := informers.NewSharedInformerFactory(client, 0)
	mc := manager.Context{Client: client, Informers: f, Logger: slog.New(slog.DiscardHandler)}
	var running []manager.Controller
	for _, d := range joinControllers(controllerOptions{pvRoot: filepath.Join(dir, "pv")}) {
		if !strings.HasPrefix(d.Name, "csr") {
			continue
		}
		c, err := d.New(ctx, mc)
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		running = append(running, c)
	}
	f.Start(ctx.Done())
	done := make(chan struct{})
	for _, c := range running {
		go func() { c.Run(ctx); done <- struct{}{} }()
	}
	t.Cleanup(func() {
		cancel()
		for range running {
			<-done
		}
		f.Shutdown()
	})
	get := func(name string) *certificatesv1.CertificateSigningRequest {
		csr, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return csr
	}
	for _, name := range []string{"bootstrap", "renewal", "network"} {
		testutil.EventuallyEvery(t, 20*time.Second, 50*time.Millisecond, name+" approved and signed", func() (bool, string) {
			csr := get(name)
			return len(csr.Status.Certificate) > 0, csr.Status.String()
		})
		csr := get(name)
		if len(csr.Status.Conditions) == 0 || csr.Status.Conditions[0].Type != certificatesv1.CertificateApproved ||
			csr.Status.Conditions[0].Reason != "AutoApproved" {
			t.Errorf("%s conditions %+v", name, csr.Status.Conditions)
		}
		block, _ := pem.Decode(csr.Status.Certificate)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
			t.Errorf("%s: not signed by the cluster CA: %v", name, err)
		}
		if life := cert.NotAfter.Sub(cert.NotBefore); life < 364*24*time.Hour || life > 366*24*time.Hour {
			t.Errorf("%s: lifetime %v, want a year", name, life)
		}
		if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || cert.IsCA {
			t.Errorf("%s: ext key usages %v, CA %v", name, cert.ExtKeyUsage, cert.IsCA)
		}
	}
	// The refused ones stay pending (checked after the approved ones went through).
	for _, name := range []string{"other-node", "not-a-node", "network-other-node", "network-bootstrapper"} {
		if csr := get(name); len(csr.Status.Conditions) != 0 || len(csr.Status.Certificate) != 0 {
			t.Errorf("%s: %+v", name, csr.Status)
		}
	}
}

// networkCSR is a request for node's pod-network client certificate made by user.
func networkCSR(t *testing.T, name, node, user string) *certificatesv1.CertificateSigningRequest {
	groups := []string{"system:nodes", "system:authenticated"}
	if strings.HasPrefix(user, "system:bootstrap:") {
		groups = []string{"system:bootstrappers", bootstraptoken.DefaultGroup, "system:authenticated"}
	}
	csr := csrFor(t, name, pkix.Name{CommonName: NodeNetworkCommonNamePrefix + node, Organization: []string{authbootstrap.NodeNetworkUser}}, user, groups)
	csr.Spec.SignerName = certificatesv1.KubeAPIServerClientSignerName
	return csr
}

// TestNodeNetworkRequest: the node-network approver takes only a node's request for its
// own pod-network client certificate.
func TestNodeNetworkRequest(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(*certificatesv1.CertificateSigningRequest)
		csr    *certificatesv1.CertificateSigningRequest
		want   string
	}{
		{name: "own", csr: networkCSR(t, "a", "n1", "system:node:n1")},
		{name: "another node's", csr: networkCSR(t, "a", "n2", "system:node:n1"), want: `common name "system:tranche:node-network:n2" is not system:tranche:node-network:n1`},
		{name: "bootstrapper", csr: networkCSR(t, "a", "n1", "system:bootstrap:abcdef"), want: "requester is not a node"},
		{name: "kubelet signer", csr: networkCSR(t, "a", "n1", "system:node:n1"), mutate: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = certificatesv1.KubeAPIServerClientKubeletSignerName
		}, want: "signer is not kubernetes.io/kube-apiserver-client"},
		{name: "server usage", csr: networkCSR(t, "a", "n1", "system:node:n1"), mutate: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageServerAuth)
		}, want: `usage "server auth" is not for a client`},
		{name: "masters", csr: csrFor(t, "a", pkix.Name{CommonName: NodeNetworkCommonNamePrefix + "n1", Organization: []string{"system:masters"}}, "system:node:n1",
			[]string{"system:nodes"}), mutate: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = certificatesv1.KubeAPIServerClientSignerName
		}, want: `organization ["system:masters"] is not [system:tranche:node-network]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.mutate != nil {
				c.mutate(c.csr)
			}
			ok, why := nodeNetworkRequest(c.csr)
			if ok != (c.want == "") || why != c.want {
				t.Errorf("nodeNetworkRequest = %v, %q; want %q", ok, why, c.want)
			}
		})
	}
}

// TestEnsureNodeSettings: the settings joined nodes read are published in kube-system
// with a Role each that nodes and bootstrappers may use, the node-network role is bound
// to the group of the nodes' pod-network certificates, and a changed setting is written
// again.
func TestEnsureNodeSettings(t *testing.T) {
	ctx := context.Background()
	client := kubefake.NewClientset()
	s := nodeconfig.Settings{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"), ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"}
	for range 2 {
		if err := ensureNodeSettings(ctx, client, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := nodeconfig.Read(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if got.ClusterCIDR != s.ClusterCIDR || !slices.Equal(got.ClusterDNS, s.ClusterDNS) || got.ClusterDomain != s.ClusterDomain {
		t.Errorf("published %+v, want %+v", got, s)
	}
	for _, name := range []string{"tranche:kubelet-config", "tranche:kube-proxy"} {
		rb, err := client.RbacV1().RoleBindings("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rb.Subjects) != 2 || rb.Subjects[0].Name != "system:nodes" || rb.Subjects[1].Name != bootstraptoken.DefaultGroup {
			t.Errorf("rolebinding %s subjects %+v", name, rb.Subjects)
		}
		role, err := client.RbacV1().Roles("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r := role.Rules; len(r) != 1 || !slices.Equal(r[0].Verbs, []string{"get"}) || len(r[0].ResourceNames) != 1 {
			t.Errorf("role %s rules %+v", name, r)
		}
	}
	crb, err := client.RbacV1().ClusterRoleBindings().Get(ctx, "tranche:node-network-certificates", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if crb.RoleRef.Name != authbootstrap.NodeNetworkUser || len(crb.Subjects) != 1 || crb.Subjects[0].Kind != "Group" || crb.Subjects[0].Name != authbootstrap.NodeNetworkUser {
		t.Errorf("clusterrolebinding %+v", crb)
	}
	s.ClusterCIDR = netip.MustParsePrefix("10.200.0.0/16")
	if err := ensureNodeSettings(ctx, client, s); err != nil {
		t.Fatal(err)
	}
	if got, err := nodeconfig.Read(ctx, client); err != nil || got.ClusterCIDR != s.ClusterCIDR {
		t.Errorf("after a change: %+v, %v", got, err)
	}
}
