package e2e

import (
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
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
