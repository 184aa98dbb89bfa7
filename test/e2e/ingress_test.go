package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// ingressBackends are the pods and Services seed 003's Ingresses name (its named-port
// Service is in the Ingress manifest). Each pod runs agnhost's echo on its declared
// port, which answers HTTP with "<method> <uri> from <pod>".
const ingressBackends = `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: nginx
spec:
  controller: tranche.dev/ingress
---
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers: [{name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.52, args: [echo, --port=80], ports: [{containerPort: 80}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: api, labels: {app: api}}
spec:
  containers: [{name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.52, args: [echo, --port=8080], ports: [{containerPort: 8080}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: default-page, labels: {app: default-page}}
spec:
  containers: [{name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.52, args: [echo, --port=80], ports: [{containerPort: 80}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: secure-api, labels: {app: secure-api}}
spec:
  containers: [{name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.52, args: [echo, --port=8443], ports: [{containerPort: 8443}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: admin, labels: {app: mon-app}}
spec:
  containers: [{name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.52, args: [echo, --port=80], ports: [{containerPort: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: service-web}
spec: {selector: {app: web}, ports: [{port: 80, targetPort: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: service-api}
spec: {selector: {app: api}, ports: [{port: 8080, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: service-default-page}
spec: {selector: {app: default-page}, ports: [{port: 80, targetPort: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: service-secure-api}
spec: {selector: {app: secure-api}, ports: [{port: 443, targetPort: 8443}]}
`

// TestIngressSeed003: on tranche up, the bootstrap's kube-system/tranche-ingress gets a
// load-balancer address; seed 003's Ingresses (class nginx, served through an
// IngressClass naming tranche's controller) route by Host and path from the host, the
// default backend answers the rest, the named-port backend works, and the TLS Ingress
// serves its Secret's certificate (curl --resolve with the test CA). The Ingress status
// shows the address.
func TestIngressSeed003(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "ingressclass", "nginx", "--ignore-not-found") })
	diagnoseIngressOnFailure(t, c, ns)

	dir := t.TempDir()
	caFile := writeTestCertificates(t, dir, "monapp.secure.example.com")
	s.must(t, "create", "secret", "tls", "mon-tls-secret", "-n", ns,
		"--cert", filepath.Join(dir, "tls.crt"), "--key", filepath.Join(dir, "tls.key"))
	if _, errOut, err := s.kubectl(t, ingressBackends, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply backends: %v %s", err, errOut)
	}
	s.must(t, "apply", "-n", ns, "-f", "testdata/003-ingress.yaml")

	ip := ingressAddress(t, s)
	curl := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "curl", append([]string{"-sS", "-m", "5"}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	resolve := func(host, port string) string { return host + ":" + port + ":" + ip }
	cases := []struct{ host, path, want string }{
		{"monapp.example.com", "/web/index.html", "GET /web/index.html from web"},
		{"monapp.example.com", "/api/v1", "GET /api/v1 from api"},
		{"monapp.example.com", "/other", "GET /other from default-page"},
		{"unknown.example.com", "/web", "GET /web from default-page"},
		{"unknown.example.com", "/admin-stuff/x", "GET /admin-stuff/x from admin"},
	}
	for _, tc := range cases {
		eventually(t, 60*time.Second, "http://"+tc.host+tc.path+" answered by the right backend", func() (bool, string) {
			out, err := curl("--resolve", resolve(tc.host, "80"), "http://"+tc.host+tc.path)
			return err == nil && out == tc.want, out
		})
	}
	eventually(t, 30*time.Second, "the TLS Ingress serves the Secret's certificate", func() (bool, string) {
		out, err := curl("--cacert", caFile, "--resolve", resolve("monapp.secure.example.com", "443"),
			"https://monapp.secure.example.com/secure-data")
		return err == nil && out == "GET /secure-data from secure-api", out
	})
	eventually(t, 30*time.Second, "kubectl get ingress shows the address", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "ingress", "mon-ingress", "-n", ns, "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
		return out == ip, out
	})

	// A backend Service that does not exist: 503 and an Event on the Ingress naming it.
	if _, errOut, err := s.kubectl(t, missingBackend, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	eventually(t, 30*time.Second, "a missing Service answers 503", func() (bool, string) {
		out, err := curl("-i", "--resolve", resolve("missing.example.com", "80"), "http://missing.example.com/")
		return err == nil && strings.HasPrefix(out, "HTTP/1.1 503") && strings.Contains(out, "Service "+ns+"/nope not found"), tail(out, 300)
	})
	eventually(t, 30*time.Second, "an Event names the missing Service", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "events", "-n", ns, "--field-selector", "involvedObject.name=missing", "-o",
			"jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}")
		return strings.Contains(out, "BackendMissing: Service "+ns+"/nope not found"), out
	})
}

// diagnoseIngressOnFailure logs, when t fails, what a failure of a request through the
// Ingress needs explained: the pods and endpoints on the way, the nodes' readiness, the
// Events of ns and kube-system, and the ends of the ingress controller's and the
// cluster's logs.
func diagnoseIngressOnFailure(t *testing.T, c *localCluster, ns string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		s := c.srv
		for _, args := range [][]string{
			{"get", "nodes"},
			{"get", "pods,svc,endpointslices,ingress", "-n", ns, "-o", "wide"},
			{"get", "pods,svc,endpointslices", "-n", "kube-system", "-o", "wide"},
			{"get", "events", "-n", ns, "--sort-by", ".lastTimestamp"},
			{"get", "events", "-n", "kube-system", "--sort-by", ".lastTimestamp"},
			{"logs", "-n", "kube-system", "deployment/tranche-ingress", "--tail", "60"},
		} {
			out, errOut, _ := s.kubectl(t, "", args...)
			t.Logf("kubectl %s:\n%s%s", strings.Join(args, " "), tail(out, 4000), errOut)
		}
		log, _ := os.ReadFile(filepath.Join(c.dataDir, "tranche.log"))
		t.Logf("tranche.log (end):\n%s", tail(string(log), 8000))
	})
}

const missingBackend = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: missing}
spec:
  rules:
  - host: missing.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: nope, port: {number: 80}}}}
`

// ingressAddress waits for kube-system/tranche-ingress's load-balancer address.
func ingressAddress(t *testing.T, s *server) string {
	t.Helper()
	var ip string
	row := regexp.MustCompile(`(?m)^tranche-ingress\s+LoadBalancer\s+10\.\S+\s+(127\.0\.10\.\d+)\s`)
	eventually(t, 60*time.Second, "kube-system/tranche-ingress gets an EXTERNAL-IP", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "svc", "tranche-ingress", "-n", "kube-system")
		if m := row.FindStringSubmatch(out); m != nil {
			ip = m[1]
		}
		return ip != "", out
	})
	return ip
}

const rollingApp = `apiVersion: apps/v1
kind: Deployment
metadata: {name: rolling}
spec:
  replicas: 3
  selector: {matchLabels: {app: rolling}}
  template:
    metadata: {labels: {app: rolling}}
    spec:
      containers:
      - name: c
        image: registry.k8s.io/e2e-test-images/agnhost:2.52
        args: [echo, --port=80]
        ports: [{containerPort: 80}]
        readinessProbe:
          httpGet: {path: /, port: 80}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: rolling}
spec: {selector: {app: rolling}, ports: [{port: 80, targetPort: 80}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: rolling}
spec:
  rules:
  - host: rolling.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: rolling, port: {number: 80}}}}
`

// TestIngressRollingUpdate: requests sent without pause through the Ingress (default
// class) while its backend Deployment rolls all three pods see no failure: endpoints
// leave the proxy's table as they stop being ready, and a GET that meets a closed port
// moves to another endpoint.
func TestIngressRollingUpdate(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	diagnoseIngressOnFailure(t, c, ns)
	if _, errOut, err := s.kubectl(t, rollingApp, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	ip := ingressAddress(t, s)
	client := &http.Client{Timeout: 5 * time.Second}
	get := func() (string, error) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+ip+"/", nil)
		req.Host = "rolling.example.com"
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: %s", resp.Status, b)
		}
		return string(b), nil
	}
	eventually(t, 60*time.Second, "three pods answer through the Ingress", func() (bool, string) {
		seen := map[string]bool{}
		for range 12 {
			if out, err := get(); err == nil {
				seen[out] = true
			}
		}
		return len(seen) == 3, fmt.Sprint(seen)
	})
	before := s.must(t, "get", "pods", "-n", ns, "-l", "app=rolling", "-o", "jsonpath={.items[*].metadata.name}")

	stop := make(chan struct{})
	type result struct {
		n      int
		failed []string
	}
	done := make(chan result)
	go func() {
		var r result
		for {
			select {
			case <-stop:
				done <- r
				return
			default:
			}
			r.n++
			if _, err := get(); err != nil {
				r.failed = append(r.failed, err.Error())
			}
		}
	}()
	s.must(t, "rollout", "restart", "deployment/rolling", "-n", ns)
	eventually(t, 90*time.Second, "the rollout replaced all three pods", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pods", "-n", ns, "-l", "app=rolling", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}`)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		ready := 0
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) == 2 && f[1] == "True" && !strings.Contains(before, f[0]) {
				ready++
			}
		}
		return ready == 3 && len(lines) == 3, out
	})
	close(stop)
	r := <-done
	if len(r.failed) > 0 {
		t.Errorf("%d of %d requests failed during the rollout; first: %s", len(r.failed), r.n, r.failed[0])
		// Why the ingress answered so: its warnings (the log's tail, printed when the
		// test ends, is long past them).
		out, _, _ := s.kubectl(t, "", "logs", "-n", "kube-system", "deployment/tranche-ingress", "--tail", "-1")
		var warns []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "level=WARN") || strings.Contains(l, "status=502") {
				warns = append(warns, l)
			}
		}
		t.Logf("the ingress's warnings and 502 answers:\n%s", strings.Join(warns, "\n"))
	}
	if r.n < 50 {
		t.Errorf("only %d requests during the rollout; the test proves little", r.n)
	}
	t.Logf("%d requests during the rollout, %d failed", r.n, len(r.failed))
}

// writeTestCertificates writes a test CA (ca.crt, returned) and a certificate for host
// signed by it (tls.crt, tls.key) into dir.
func writeTestCertificates(t *testing.T, dir, host string) string {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tranche e2e test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{
		"ca.crt":  {Type: "CERTIFICATE", Bytes: caDER},
		"tls.crt": {Type: "CERTIFICATE", Bytes: der},
		"tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "ca.crt")
}
