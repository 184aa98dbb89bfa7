package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/auth/pki"
)

// TestRequestHeaderAuthentication: the API server accepts, as kube-apiserver does, a
// request whose client certificate is the front proxy's (issued by the front-proxy CA
// of the cluster's PKI) as made by the user its X-Remote-* headers name, and refuses the
// same headers from a client certificate of the cluster CA; it publishes both CAs in
// kube-system/extension-apiserver-authentication.
func TestRequestHeaderAuthentication(t *testing.T) {
	s := shared
	dir := filepath.Join(s.dataDir, "pki")
	caPEM, err := os.ReadFile(filepath.Join(dir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	clientFor := func(name string) *http.Client {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
		if err != nil {
			t.Fatal(err)
		}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, Certificates: []tls.Certificate{pair}, ServerName: "localhost", MinVersion: tls.VersionTLS12}}}
	}
	review := func(c *http.Client, h http.Header) (int, string) {
		req, err := http.NewRequest("POST", "https://"+s.listen+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
			strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	headers := http.Header{
		"X-Remote-User":         {"alice"},
		"X-Remote-Group":        {"devs"},
		"X-Remote-Extra-Scopes": {"a", "b"},
	}

	code, body := review(clientFor(pki.FrontProxyClientName), headers.Clone())
	var got struct {
		Status struct {
			UserInfo struct {
				Username string              `json:"username"`
				Groups   []string            `json:"groups"`
				Extra    map[string][]string `json:"extra"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(body), &got); code != http.StatusCreated || err != nil {
		t.Fatalf("SelfSubjectReview through the front proxy: HTTP %d %s", code, body)
	}
	u := got.Status.UserInfo
	if u.Username != "alice" || strings.Join(u.Groups, ",") != "devs,system:authenticated" || strings.Join(u.Extra["scopes"], ",") != "a,b" {
		t.Errorf("user through the front proxy: %+v, want alice in devs,system:authenticated with scopes a,b", u)
	}
	// Without a user header the front proxy's certificate is nobody.
	if code, body := review(clientFor(pki.FrontProxyClientName), http.Header{}); code != http.StatusUnauthorized {
		t.Errorf("front-proxy certificate without X-Remote-User: HTTP %d %s, want 401", code, body)
	}
	// The admin's certificate is the admin, whatever the headers say.
	if code, body := review(clientFor("admin"), headers.Clone()); code != http.StatusCreated || !strings.Contains(body, `"username":"admin"`) {
		t.Errorf("admin certificate with X-Remote-User: HTTP %d %s, want the admin", code, body)
	}

	frontProxyCA, err := os.ReadFile(filepath.Join(dir, pki.FrontProxyCACertFile))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "extension-apiserver-authentication published", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "configmap", "extension-apiserver-authentication", "-n", "kube-system", "-o", "json")
		var cm struct{ Data map[string]string }
		_ = json.Unmarshal([]byte(out), &cm)
		ok := cm.Data["client-ca-file"] == string(caPEM) && cm.Data["requestheader-client-ca-file"] == string(frontProxyCA) &&
			cm.Data["requestheader-allowed-names"] == `["front-proxy-client"]` && cm.Data["requestheader-username-headers"] == `["X-Remote-User"]` &&
			cm.Data["requestheader-group-headers"] == `["X-Remote-Group"]` && cm.Data["requestheader-extra-headers-prefix"] == `["X-Remote-Extra-"]`
		return ok, out
	})
}

// sampleAPIServerManifests are what the Aggregator conformance spec creates
// (test/e2e/apimachinery/aggregator.go), in namespace NS: the sample API server's
// serving certificate, the roles of the pod's default service account (the informers of
// its admission plugins, delegated authentication and authorization, the
// extension-apiserver-authentication ConfigMap), its Deployment of the sample-apiserver
// and etcd images, and its Service.
const sampleAPIServerManifests = `apiVersion: v1
kind: Secret
metadata: {name: sample-apiserver-secret, namespace: NS}
type: Opaque
data: {tls.crt: CERT, tls.key: KEY}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: sample-apiserver-reader-NS}
rules:
- {apiGroups: [""], resources: [namespaces], verbs: [get, list, watch]}
- {apiGroups: [admissionregistration.k8s.io], resources: ["*"], verbs: [get, list, watch]}
- {apiGroups: [flowcontrol.apiserver.k8s.io], resources: [prioritylevelconfigurations, flowschemas], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "wardler:NSsample-apiserver-reader-NS"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: sample-apiserver-reader-NS}
subjects: [{kind: ServiceAccount, name: default, namespace: NS}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "wardler:NS:auth-delegator"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator"}
subjects: [{kind: ServiceAccount, name: default, namespace: NS}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: wardler-auth-reader-NS, namespace: kube-system}
roleRef: {apiGroup: "", kind: Role, name: extension-apiserver-authentication-reader}
subjects: [{kind: ServiceAccount, name: default, namespace: NS}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: sample-apiserver-deployment, namespace: NS}
spec:
  replicas: 1
  selector: {matchLabels: {app: sample-apiserver, apiserver: "true"}}
  template:
    metadata: {labels: {app: sample-apiserver, apiserver: "true"}}
    spec:
      volumes:
      - {name: apiserver-certs, secret: {secretName: sample-apiserver-secret}}
      containers:
      - name: sample-apiserver
        image: registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2
        args: [--etcd-servers=http://127.0.0.1:2379, --tls-cert-file=/apiserver.local.config/certificates/tls.crt,
          --tls-private-key-file=/apiserver.local.config/certificates/tls.key, --audit-log-path=-, --audit-log-maxage=0, --audit-log-maxbackup=0]
        volumeMounts: [{name: apiserver-certs, readOnly: true, mountPath: /apiserver.local.config/certificates}]
        readinessProbe:
          httpGet: {scheme: HTTPS, port: 443, path: /readyz}
          initialDelaySeconds: 20
          periodSeconds: 1
      - name: etcd
        image: registry.k8s.io/etcd:3.7.0-0
        command: [/usr/local/bin/etcd, --listen-client-urls, "http://127.0.0.1:2379", --advertise-client-urls, "http://127.0.0.1:2379"]
---
apiVersion: v1
kind: Service
metadata: {name: sample-api, namespace: NS}
spec:
  selector: {apiserver: "true"}
  ports: [{protocol: TCP, port: 7443, targetPort: 443}]
`

// apiServiceManifest registers the sample API server's group version, served by the
// Service, verified with the CA that issued its certificate.
const apiServiceManifest = `apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1alpha1.wardle.example.com}
spec:
  group: wardle.example.com
  version: v1alpha1
  groupPriorityMinimum: 2000
  versionPriority: 200
  caBundle: CA
  service: {namespace: NS, name: sample-api, port: 7443}
`

// TestSampleAPIServer deploys Kubernetes' sample API server as the Aggregator
// conformance spec does, waits for its APIService to turn Available (the aggregator
// reaches it with the front-proxy certificate; it authenticates and authorizes by
// delegation to the cluster), then creates, lists and deletes a Flunder through
// kubectl, which reaches it through the aggregator's proxy as the admin, and lists
// flunders as a user the sample API server authorizes by asking the cluster.
func TestSampleAPIServer(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)

	ca, err := pki.EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.IssueRequest{CommonName: "sample-api." + ns + ".svc",
		DNSNames: []string{"sample-api." + ns + ".svc"}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	manifests := strings.NewReplacer("NS", ns, "CERT", b64(certPEM), "KEY", b64(keyPEM)).Replace(sampleAPIServerManifests)
	t.Cleanup(func() {
		_, _, _ = s.kubectl(t, "", "delete", "apiservice", "v1alpha1.wardle.example.com", "--ignore-not-found", "--wait=false")
		_, _, _ = s.kubectl(t, "", "delete", "clusterrolebinding", "wardler:"+ns+"sample-apiserver-reader-"+ns, "wardler:"+ns+":auth-delegator", "--ignore-not-found", "--wait=false")
		_, _, _ = s.kubectl(t, "", "delete", "clusterrole", "sample-apiserver-reader-"+ns, "--ignore-not-found", "--wait=false")
		_, _, _ = s.kubectl(t, "", "delete", "rolebinding", "wardler-auth-reader-"+ns, "-n", "kube-system", "--ignore-not-found", "--wait=false")
	})
	if out, errOut, err := s.kubectl(t, manifests, "apply", "-f", "-"); err != nil {
		t.Fatalf("creating the sample API server: %v\n%s%s", err, out, errOut)
	}
	logs := func() string {
		var b bytes.Buffer
		for _, container := range []string{"sample-apiserver", "etcd"} {
			out, errOut, _ := s.kubectl(t, "", "logs", "deployment/sample-apiserver-deployment", "-n", ns, "-c", container, "--tail=40")
			fmt.Fprintf(&b, "--- %s ---\n%s%s", container, out, errOut)
		}
		return b.String()
	}
	eventually(t, 90*time.Second, "the sample API server's Deployment available", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "deployment", "sample-apiserver-deployment", "-n", ns, "-o", "jsonpath={.status.availableReplicas}")
		if out == "1" {
			return true, ""
		}
		pods, _, _ := s.kubectl(t, "", "get", "pods", "-n", ns, "-o", "wide")
		return false, "availableReplicas=" + out + "\n" + pods + logs()
	})

	apiService := strings.NewReplacer("NS", ns, "CA", b64(ca.CertPEM)).Replace(apiServiceManifest)
	if out, errOut, err := s.kubectl(t, apiService, "apply", "-f", "-"); err != nil {
		t.Fatalf("creating the APIService: %v\n%s%s", err, out, errOut)
	}
	eventually(t, 60*time.Second, "APIService v1alpha1.wardle.example.com Available", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "apiservice", "v1alpha1.wardle.example.com", "-o",
			`jsonpath={.status.conditions[?(@.type=="Available")].status} {.status.conditions[?(@.type=="Available")].message}`)
		return out == "True all checks passed", out + "\n" + logs()
	})

	const flunder = `apiVersion: wardle.example.com/v1alpha1
kind: Flunder
metadata: {name: test-flunder, labels: {sample-label: "true"}}
`
	// kubectl's discovery may still miss the group for a moment after Available.
	eventually(t, 30*time.Second, "kubectl create flunder", func() (bool, string) {
		out, errOut, err := s.kubectl(t, flunder, "create", "-n", ns, "-f", "-")
		return err == nil && strings.Contains(out, "flunder.wardle.example.com/test-flunder created"), out + errOut + logs()
	})
	if out := s.must(t, "get", "flunders", "-n", ns, "-o", "name"); strings.TrimSpace(out) != "flunder.wardle.example.com/test-flunder" {
		t.Errorf("kubectl get flunders: %q", out)
	}
	if out := s.must(t, "get", "flunder", "test-flunder", "-n", ns, "-o", "jsonpath={.metadata.labels.sample-label}"); out != "true" {
		t.Errorf("the flunder's label: %q", out)
	}

	// Another user is authorized by the sample API server asking the cluster
	// (SubjectAccessReview, as system:auth-delegator allows): denied, then allowed once a
	// RoleBinding exists (its answers are cached 10 s).
	_, errOut, err := s.kubectl(t, "", "get", "flunders", "-n", ns, "--as=bob")
	if want := `flunders.wardle.example.com is forbidden: User "bob" cannot list resource "flunders" in API group "wardle.example.com" in the namespace "` + ns + `"`; err == nil || !strings.Contains(errOut, want) {
		t.Errorf("bob listing flunders: %v %s\nwant %s", err, errOut, want)
	}
	s.must(t, "create", "role", "flunder-reader", "-n", ns, "--verb=list", "--resource=flunders.wardle.example.com")
	s.must(t, "create", "rolebinding", "bob-reads-flunders", "-n", ns, "--role=flunder-reader", "--user=bob")
	eventually(t, 30*time.Second, "bob allowed to list flunders", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "get", "flunders", "-n", ns, "--as=bob", "-o", "name")
		return err == nil && strings.TrimSpace(out) == "flunder.wardle.example.com/test-flunder", out + errOut
	})

	s.must(t, "delete", "flunder", "test-flunder", "-n", ns)
	if out := s.must(t, "get", "flunders", "-n", ns, "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("flunders after the delete: %q", out)
	}
}
