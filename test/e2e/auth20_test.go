package e2e

import (
	"context"
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
	"k8s.io/kubernetes/test/utils/hermeticpodcertificatesigner"
	"k8s.io/utils/clock"
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
// account's, automountServiceAccountToken says false, and the agent runs the pod as
// admitted (no token in an opted-out pod); the mounted token is bound to
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
	// The agent runs the pods as admitted: no token where the account opted out.
	for pod, want := range map[string]bool{"sa-optout": false, "pod-optin": true} {
		c.waitReady(t, ns, pod)
		_, errOut, err := s.kubectl(t, "", "exec", pod, "-n", ns, "--", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/token")
		if (err == nil) != want {
			t.Errorf("pod %s: reading the token: %v %s, want mounted %v", pod, err, errOut, want)
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
// (a projection naming both is refused)
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
	if _, errOut, err := s.kubectl(t, pod("both", `{name: x, signerName: `+signer+`, path: ca.pem}`), "create", "-n", ns, "-f", "-"); err == nil ||
		!strings.Contains(errOut, "spec.volumes[0].projected.sources[0].clusterTrustBundle: Invalid value") || !strings.Contains(errOut, "only one of name and signerName may be used") {
		t.Errorf("a projection naming a bundle and a signer: %v %s", err, errOut)
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

// pcrPod is a pod whose podCertificate projection asks signer for an ECDSA P-256
// credential bundle, with extra YAML fields of the projection.
func pcrPod(name, signer, extra string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["pause"]
    volumeMounts: [{name: tls, mountPath: /run/tls}]
  volumes:
  - name: tls
    projected:
      sources:
      - podCertificate: {signerName: ` + signer + `, keyType: ECDSAP256, credentialBundlePath: bundle.pem` + extra + `}
`
}

// TestPodCertificates: PodCertificateRequests are served (status written only with the
// sign verb on the signer), pods whose podCertificate projection asks for less than an
// hour or more than 91 days are refused with kube-apiserver's messages, and the agent
// gets a pod its credentials from a signer (Kubernetes' hermetic test signer, run here
// as the conformance specs run it): it generates the key, creates the request for the
// pod, its service account and node, waits for the signer and writes the key and chain,
// the certificate's lifetime the default day or the projection's maxExpirationSeconds,
// the userAnnotations passed on to the signer; without an answer the pod waits with a
// FailedMount event.
func TestPodCertificates(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	signer := "e2e.example.com/" + ns
	client := s.client(t)
	caKeys, caCerts, err := hermeticpodcertificatesigner.GenerateCAHierarchy(1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go hermeticpodcertificatesigner.New(clock.RealClock{}, signer, "cluster.local", caKeys, caCerts, client).Run(ctx)
	t.Cleanup(func() {
		_, _, _ = s.kubectl(t, "", "delete", "clustertrustbundles", "--field-selector", "spec.signerName="+signer)
	})

	for secs, want := range map[string]string{
		"3599":    "spec.volumes[0].projected.sources[0].podCertificate.maxExpirationSeconds: Invalid value: 3599: if provided, maxExpirationSeconds must be >= 3600",
		"7862401": "spec.volumes[0].projected.sources[0].podCertificate.maxExpirationSeconds: Invalid value: 7862401: if provided, maxExpirationSeconds must be <= 7862400",
	} {
		if _, errOut, err := s.kubectl(t, pcrPod("bad", signer, ", maxExpirationSeconds: "+secs), "create", "-n", ns, "-f", "-"); err == nil || !strings.Contains(errOut, want) {
			t.Errorf("maxExpirationSeconds %s: %v %s\nwant %s", secs, err, errOut, want)
		}
	}
	applyManifest(t, s, ns, pcrPod("default-life", signer, ", userAnnotations: {spiffe/path-overriding: /custom/path}")+"---\n"+
		pcrPod("one-hour", signer, ", maxExpirationSeconds: 3600"))
	for pod, life := range map[string]time.Duration{"default-life": 24 * time.Hour, "one-hour": time.Hour} {
		c.waitReady(t, ns, pod)
		bundle := s.must(t, "exec", pod, "-n", ns, "--", "cat", "/run/tls/bundle.pem")
		rest := []byte(bundle)
		var key, leaf *pem.Block
		for {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			switch {
			case b.Type == "PRIVATE KEY" && key == nil:
				key = b
			case b.Type == "CERTIFICATE" && leaf == nil:
				leaf = b
			}
		}
		if key == nil || leaf == nil {
			t.Fatalf("pod %s: bundle.pem lacks a key or a certificate:\n%s", pod, bundle)
		}
		cert, err := x509.ParseCertificate(leaf.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if got := cert.NotAfter.Sub(cert.NotBefore); got != life {
			t.Errorf("pod %s: certificate lifetime %v, want %v", pod, got, life)
		}
		priv, err := x509.ParsePKCS8PrivateKey(key.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if !priv.(*ecdsa.PrivateKey).PublicKey.Equal(cert.PublicKey) {
			t.Errorf("pod %s: the certificate is not for the projected key", pod)
		}
		if pod == "default-life" && (len(cert.URIs) != 1 || cert.URIs[0].Path != "/custom/path") {
			t.Errorf("pod %s: URIs %v, want the userAnnotations' SPIFFE path", pod, cert.URIs)
		}
	}
	node := s.must(t, "get", "pod", "one-hour", "-n", ns, "-o", "jsonpath={.spec.nodeName}")
	out := s.must(t, "get", "podcertificaterequests", "-n", ns, "--field-selector", "spec.podName=one-hour")
	if !strings.Contains(out, "one-hour") || !strings.Contains(out, node) || !strings.Contains(out, "Issued") {
		t.Errorf("requests of pod one-hour:\n%s", out)
	}

	// A signer nobody runs leaves the pod waiting for its volume, with its request
	// pending; its status is the signer's: a user who may update it but not sign for
	// the signer is refused.
	unsigned := "e2e.example.com/nobody-" + ns
	applyManifest(t, s, ns, pcrPod("unsigned", unsigned, ""))
	var name string
	eventually(t, 60*time.Second, "a pending request of pod unsigned", func() (bool, string) {
		name = s.must(t, "get", "podcertificaterequests", "-n", ns, "--field-selector", "spec.podName=unsigned", "-o", "jsonpath={.items[*].metadata.name}")
		return name != "" && !strings.Contains(name, " "), name
	})
	eventually(t, 60*time.Second, "FailedMount event for pod unsigned", func() (bool, string) {
		out := s.must(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=unsigned,reason=FailedMount", "-o", "jsonpath={.items[*].message}")
		return strings.Contains(out, `MountVolume.SetUp failed for volume "tls" : PodCertificateRequest `+ns+`/`+name+` is not issued yet`), out
	})
	user := "e2e-pcr-" + ns
	s.must(t, "create", "role", "pcr-status", "-n", ns, "--verb=get,update,patch", "--resource=podcertificaterequests.certificates.k8s.io/status,podcertificaterequests.certificates.k8s.io")
	s.must(t, "create", "rolebinding", "pcr-status", "-n", ns, "--role=pcr-status", "--user="+user)
	_, errOut, err := s.kubectl(t, "", "patch", "podcertificaterequest", name, "-n", ns, "--subresource=status", "--type=merge", "--as="+user,
		"-p", `{"status":{"conditions":[{"type":"Failed","status":"True","reason":"X","message":"x","lastTransitionTime":"`+time.Now().UTC().Format(time.RFC3339)+`"}]}}`)
	if want := `spec.signerName: Forbidden: User "` + user + `" is not permitted to "sign" for signer "` + unsigned + `"`; err == nil || !strings.Contains(errOut, want) {
		t.Errorf("status write without sign: %v %s\nwant %s", err, errOut, want)
	}
}
