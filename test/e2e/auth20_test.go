package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// curlAPI sends method path to s with an optional bearer token and body, and returns
// the HTTP status code and the body.
func curlAPI(t *testing.T, s *server, token, method, path, body string) (string, string) {
	t.Helper()
	args := []string{"-sk", "-X", method, "-w", "\n%{http_code}", "https://" + s.listen + path}
	if token != "" {
		args = append(args, "-H", "Authorization: Bearer "+token)
	}
	if body != "" {
		args = append(args, "-H", "Content-Type: application/json", "-d", body)
	}
	out, err := exec.Command("curl", args...).Output()
	if err != nil {
		t.Fatalf("curl %s %s: %v", method, path, err)
	}
	i := strings.LastIndex(string(out), "\n")
	return string(out[i+1:]), string(out[:i])
}

const automountPods = `apiVersion: v1
kind: ServiceAccount
metadata: {name: nomount}
automountServiceAccountToken: false
---
apiVersion: v1
kind: Pod
metadata: {name: defaulted}
spec:
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["pause"]
    volumeMounts: [{name: tok, mountPath: /var/run/secrets/tokens}]
  volumes:
  - name: tok
    projected:
      sources:
      - serviceAccountToken: {path: sa-token, audience: oidc-check, expirationSeconds: 600}
---
apiVersion: v1
kind: Pod
metadata: {name: sa-optout}
spec:
  serviceAccountName: nomount
  containers: [{name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.53, args: ["pause"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: pod-optin}
spec:
  serviceAccountName: nomount
  automountServiceAccountToken: true
  containers: [{name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.53, args: ["pause"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: pod-optout}
spec:
  automountServiceAccountToken: false
  containers: [{name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.53, args: ["pause"]}]
`

// TestServiceAccountAdmissionAndBoundTokens: the ServiceAccount admission defaults a
// pod's serviceAccountName to "default" before validation (so a projected token needs
// no account named) and adds the kube-api-access volume unless the pod's, then the
// account's, automountServiceAccountToken says false; the mounted token is bound to
// the pod and names its node, which SelfSubjectReview shows as the
// authentication.kubernetes.io/node-name and node-uid extras.
func TestServiceAccountAdmissionAndBoundTokens(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	eventually(t, 30*time.Second, "default ServiceAccount", func() (bool, string) {
		_, errOut, err := s.kubectl(t, "", "get", "serviceaccount", "default", "-n", ns)
		return err == nil, errOut
	})
	applyManifest(t, s, ns, automountPods)
	for pod, want := range map[string]bool{"defaulted": true, "sa-optout": false, "pod-optin": true, "pod-optout": false} {
		out := s.must(t, "get", "pod", pod, "-n", ns, "-o", `jsonpath={.spec.serviceAccountName} {.spec.volumes[*].name} {.spec.containers[0].volumeMounts[*].mountPath}`)
		got := strings.Contains(out, "kube-api-access-") && strings.Contains(out, "/var/run/secrets/kubernetes.io/serviceaccount")
		if got != want || (pod == "defaulted" && !strings.HasPrefix(out, "default ")) {
			t.Errorf("pod %s: %q, want the kube-api-access volume mounted %v", pod, out, want)
		}
	}
	c.waitReady(t, ns, "defaulted")
	token := strings.TrimSpace(s.must(t, "exec", "defaulted", "-n", ns, "--", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/token"))
	node := s.must(t, "get", "pod", "defaulted", "-n", ns, "-o", "jsonpath={.spec.nodeName}")
	nodeUID := s.must(t, "get", "node", node, "-o", "jsonpath={.metadata.uid}")
	code, body := curlAPI(t, s, token, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
		`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	var review struct {
		Status struct {
			UserInfo struct {
				Username string              `json:"username"`
				Extra    map[string][]string `json:"extra"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(body), &review); code != "201" || err != nil {
		t.Fatalf("SelfSubjectReview: HTTP %s %s (%v)", code, body, err)
	}
	u := review.Status.UserInfo
	if u.Username != "system:serviceaccount:"+ns+":default" {
		t.Errorf("username %q", u.Username)
	}
	for key, want := range map[string]string{
		"authentication.kubernetes.io/pod-name":  "defaulted",
		"authentication.kubernetes.io/node-name": node,
		"authentication.kubernetes.io/node-uid":  nodeUID,
	} {
		if got := u.Extra[key]; len(got) != 1 || got[0] != want {
			t.Errorf("extra %s = %v, want [%s] (all: %v)", key, got, want, u.Extra)
		}
	}
}

const oidcValidator = `apiVersion: v1
kind: Pod
metadata: {name: oidc-discovery-validator}
spec:
  restartPolicy: Never
  containers:
  - name: validator
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["test-service-account-issuer-discovery", "--token-path", "/var/run/secrets/tokens/sa-token", "--audience", "oidc-discovery-test"]
    volumeMounts: [{name: sa-token, mountPath: /var/run/secrets/tokens, readOnly: true}]
  volumes:
  - name: sa-token
    projected:
      sources:
      - serviceAccountToken: {path: sa-token, audience: oidc-discovery-test, expirationSeconds: 600}
`

// TestServiceAccountIssuerDiscovery: the API server serves the issuer's OIDC
// configuration and key set to service accounts (not to unauthenticated clients), the
// configuration names the tokens' issuer, the key set holds the key a token is signed
// with, and agnhost's test-service-account-issuer-discovery (go-oidc) verifies a pod's
// projected token against them from inside the cluster.
func TestServiceAccountIssuerDiscovery(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	s.must(t, "create", "serviceaccount", "reader", "-n", ns)
	token := strings.TrimSpace(s.must(t, "create", "token", "reader", "-n", ns))
	if code, body := curlAPI(t, s, "", "GET", "/.well-known/openid-configuration", ""); code != "401" && code != "403" {
		t.Errorf("anonymous discovery: HTTP %s %s, want it refused", code, body)
	}
	code, body := curlAPI(t, s, token, "GET", "/.well-known/openid-configuration", "")
	var config struct {
		Issuer  string   `json:"issuer"`
		JWKSURI string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := json.Unmarshal([]byte(body), &config); code != "200" || err != nil {
		t.Fatalf("discovery: HTTP %s %s (%v)", code, body, err)
	}
	header, claims := jwtParts(t, token)
	if config.Issuer != claims["iss"] || config.JWKSURI != config.Issuer+"/openid/v1/jwks" || len(config.Algs) != 1 || config.Algs[0] != header["alg"] {
		t.Errorf("configuration %+v does not match the token's issuer %v and algorithm %v", config, claims["iss"], header["alg"])
	}
	code, body = curlAPI(t, s, token, "GET", "/openid/v1/jwks", "")
	if code != "200" || !strings.Contains(body, `"kid":"`+header["kid"].(string)+`"`) {
		t.Errorf("key set: HTTP %s %s, want the token's kid %v", code, body, header["kid"])
	}

	applyManifest(t, s, ns, oidcValidator)
	eventually(t, 90*time.Second, "validator pod Succeeded", func() (bool, string) {
		phase := s.must(t, "get", "pod", "oidc-discovery-validator", "-n", ns, "-o", "jsonpath={.status.phase}")
		if phase == "Failed" {
			logs, _, _ := s.kubectl(t, "", "logs", "oidc-discovery-validator", "-n", ns)
			t.Fatalf("validator failed:\n%s", logs)
		}
		return phase == "Succeeded", phase
	})
}

// jwtParts decodes a JWT's header and claims without verifying it.
func jwtParts(t *testing.T, token string) (map[string]any, map[string]any) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	var out [2]map[string]any
	for i := range out {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err == nil {
			err = json.Unmarshal(raw, &out[i])
		}
		if err != nil {
			t.Fatalf("JWT part %d: %v", i, err)
		}
	}
	return out[0], out[1]
}

// testCAPEM returns a fresh self-signed CA certificate in PEM.
func testCAPEM(t *testing.T, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: now, NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// ctbJSON is a ClusterTrustBundle manifest.
func ctbJSON(name, signer string, labels map[string]string, bundle string) string {
	obj := map[string]any{"apiVersion": "certificates.k8s.io/v1", "kind": "ClusterTrustBundle",
		"metadata": map[string]any{"name": name, "labels": labels},
		"spec":     map[string]any{"signerName": signer, "trustBundle": bundle}}
	b, _ := json.Marshal(obj)
	return string(b)
}

// TestClusterTrustBundles: certificates.k8s.io/v1 ClusterTrustBundles go through the
// conformance framework's CRUD steps, are validated as kube-apiserver validates them
// (name prefix of a signer-linked bundle, PEM CA certificates), need the attest verb on
// their signer, and are projected into pods by name or by signerName and label selector
// (all matches combined); a non-optional source that matches nothing keeps the pod
// from starting with kubelet's FailedMount event, an optional one gives an empty file.
func TestClusterTrustBundles(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	ca1, ca2, ca3 := testCAPEM(t, "one"), testCAPEM(t, "two"), testCAPEM(t, "three")
	runResourceCase(t, s, ns, resourceCase{
		gvr: schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "clustertrustbundles"}, kind: "ClusterTrustBundle",
		initial: ctbJSONSpec(ca1),
		update: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, ca2, "spec", "trustBundle")
		},
		specPatches: map[types.PatchType]string{types.MergePatchType: ctbJSONSpec(ca2), types.StrategicMergePatchType: ctbJSONSpec(ca3)},
	})

	signer := "e2e.example.com/" + ns
	prefix := strings.ReplaceAll(signer, "/", ":") + ":"
	var cleanup []string
	t.Cleanup(func() {
		for _, n := range cleanup {
			_, _, _ = s.kubectl(t, "", "delete", "clustertrustbundle", n, "--ignore-not-found")
		}
	})
	create := func(name, signer string, labels map[string]string, bundle, as string) (string, error) {
		args := []string{"create", "-f", "-"}
		if as != "" {
			args = append(args, "--as="+as)
		}
		_, errOut, err := s.kubectl(t, ctbJSON(name, signer, labels, bundle), args...)
		if err == nil {
			cleanup = append(cleanup, name)
		}
		return errOut, err
	}
	if out, err := create(ns+"-bad", signer, nil, ca1, ""); err == nil ||
		!strings.Contains(out, `metadata.name: Invalid value: "`+ns+`-bad": ClusterTrustBundle for signerName `+signer+` must be named with prefix `+prefix) {
		t.Errorf("unprefixed name: %v %s", err, out)
	}
	if out, err := create(ns+"-notca", "", nil, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", ""); err == nil ||
		!strings.Contains(out, "entry 0 does not parse as X.509") {
		t.Errorf("bad PEM: %v %s", err, out)
	}
	// A user allowed to create bundles, but not to attest for the signer.
	user := "e2e-ctb-" + ns
	s.must(t, "create", "clusterrole", user, "--verb=create,get,list,delete", "--resource=clustertrustbundles.certificates.k8s.io")
	s.must(t, "create", "clusterrolebinding", user, "--clusterrole="+user, "--user="+user)
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "clusterrole,clusterrolebinding", user) })
	if out, err := create(prefix+"denied", signer, nil, ca1, user); err == nil ||
		!strings.Contains(out, `user not permitted to attest for signerName "`+signer+`"`) {
		t.Errorf("create without attest: %v %s", err, out)
	}
	if out, err := create(ns+"-unlinked", "", nil, ca3, user); err != nil {
		t.Errorf("an unlinked bundle needs no attest: %s", out)
	}
	for i, b := range []string{ca1, ca2 + ca1} {
		if out, err := create(fmt.Sprintf("%sx%d", prefix, i), signer, map[string]string{"pick": "yes"}, b, ""); err != nil {
			t.Fatalf("create: %s", out)
		}
	}
	if out, err := create(prefix+"other", signer, map[string]string{"pick": "no"}, ca3, ""); err != nil {
		t.Fatalf("create: %s", out)
	}

	pod := func(name, source string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["pause"]
    volumeMounts: [{name: ctb, mountPath: /ctb}]
  volumes:
  - name: ctb
    projected:
      sources:
      - clusterTrustBundle: ` + source + `
`
	}
	applyManifest(t, s, ns, pod("by-signer", `{signerName: `+signer+`, labelSelector: {matchLabels: {pick: "yes"}}, path: ca.pem}`)+"---\n"+
		pod("by-name", `{name: `+ns+`-unlinked, path: ca.pem}`)+"---\n"+
		pod("optional", `{signerName: `+signer+`, labelSelector: {matchLabels: {pick: "none"}}, optional: true, path: ca.pem}`)+"---\n"+
		pod("missing", `{signerName: `+signer+`, labelSelector: {matchLabels: {pick: "none"}}, path: ca.pem}`))
	for p, want := range map[string][]string{"by-signer": {ca1, ca2}, "by-name": {ca3}, "optional": nil} {
		c.waitReady(t, ns, p)
		got := s.must(t, "exec", p, "-n", ns, "--", "cat", "/ctb/ca.pem")
		if strings.Count(got, "BEGIN CERTIFICATE") != len(want) {
			t.Errorf("pod %s: %d certificates in ca.pem, want %d:\n%s", p, strings.Count(got, "BEGIN CERTIFICATE"), len(want), got)
		}
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("pod %s: ca.pem lacks an anchor:\n%s", p, got)
			}
		}
	}
	eventually(t, 60*time.Second, "FailedMount event for pod missing", func() (bool, string) {
		out := s.must(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=missing,reason=FailedMount", "-o", "jsonpath={.items[*].message}")
		return strings.Contains(out, `MountVolume.SetUp failed for volume "ctb" : combination of signerName and labelSelector matched zero ClusterTrustBundles`), out
	})
	if phase := s.must(t, "get", "pod", "missing", "-n", ns, "-o", "jsonpath={.status.phase}"); phase != "Pending" {
		t.Errorf("pod missing is %s, want Pending", phase)
	}
}

// ctbJSONSpec is the JSON of a ClusterTrustBundle's spec holding bundle.
func ctbJSONSpec(bundle string) string {
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"trustBundle": bundle}})
	return string(b)
}
