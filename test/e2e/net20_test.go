package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// net20Netexec is agnhost netexec behind a Service with a TCP and a UDP port, an
// agnhost exec pod as the e2e framework's "execpod", and a host-network agnhost pod as
// its "host-test-container-pod".
const net20Netexec = `apiVersion: v1
kind: Pod
metadata:
  name: netexec
  labels: {app: netexec}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: netexec
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["netexec", "--http-port=8080", "--udp-port=8081"]
    ports:
    - {name: http, containerPort: 8080}
    - {name: udp, containerPort: 8081, protocol: UDP}
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: netexec
spec:
  selector: {app: netexec}
  ports:
  - {name: tcp, port: 80, targetPort: 8080}
  - {name: udp, port: 81, targetPort: 8081, protocol: UDP}
---
apiVersion: v1
kind: Pod
metadata:
  name: execpod
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: agnhost
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
---
apiVersion: v1
kind: Pod
metadata:
  name: hostexec
spec:
  terminationGracePeriodSeconds: 1
  hostNetwork: true
  containers:
  - name: agnhost
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
`

// TestNet20NetcatReachability runs the e2e framework's reachability checks verbatim:
// `echo hostName | nc -v -t -w 2 SERVICE PORT` (and -u) from an agnhost exec pod
// (jig.go's testEndpointReachability, which all Service specs use) and
// `echo hostName | nc -w 1 -u POD_IP 8081` from a host-network agnhost pod, whose
// stderr must stay empty (framework/network DialFromNode, "node-pod communication:
// udp"). Each answer is netexec's hostName: the pod's name.
func TestNet20NetcatReachability(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, net20Netexec)
	for _, p := range []string{"netexec", "execpod", "hostexec"} {
		c.waitReady(t, ns, p)
	}
	ip := s.must(t, "get", "pod", "netexec", "-n", ns, "-o", "jsonpath={.status.podIP}")

	// netexec's HTTP port answers the line "hostName" with 400 Bad Request, its UDP
	// port with its hostName; the framework only needs a non-empty answer.
	for _, tc := range []struct{ pod, cmd, want string }{
		{"execpod", "echo hostName | nc -v -t -w 2 netexec 80", "HTTP/1.1 400 Bad Request"},
		{"execpod", "echo hostName | nc -v -u -w 2 netexec 81", "netexec"},
		{"execpod", "echo hostName | nc -v -t -w 2 netexec." + ns + ".svc.cluster.local 80", "HTTP/1.1 400 Bad Request"},
		{"hostexec", "echo hostName | nc -w 1 -u " + ip + " 8081 | grep -v '^\\s*$'", "netexec"},
	} {
		eventually(t, 30*time.Second, tc.pod+": "+tc.cmd, func() (bool, string) {
			// As the framework runs them: jig.go with sh -x, DialFromNode without,
			// and any stderr there is a failed try.
			sh := []string{"/bin/sh", "-x", "-c", tc.cmd}
			if tc.pod == "hostexec" {
				sh = []string{"/bin/sh", "-c", tc.cmd}
			}
			out, errOut, err := s.kubectl(t, "", append([]string{"exec", "-n", ns, tc.pod, "--"}, sh...)...)
			ok := err == nil && strings.HasPrefix(strings.TrimSpace(out), tc.want)
			if tc.pod == "hostexec" {
				ok = ok && errOut == ""
			}
			return ok, "stdout " + out + " stderr " + errOut
		})
	}
	// netcat's failures are its own: a refused port is a warning and exit status 1.
	out, errOut, err := s.kubectl(t, "", "exec", "-n", ns, "execpod", "--", "/bin/sh", "-c", "nc -w 2 "+ip+" 9")
	if err == nil || !strings.Contains(errOut, "nc: connect to "+ip+" port 9 (tcp) failed: Connection refused") {
		t.Fatalf("nc to a closed port: %v, stdout %q, stderr %q", err, out, errOut)
	}
}

// net20Porter serves a link on HTTP port 80 and HTTPS port 443 (porter, as the
// conformance spec "Proxy version v1 should proxy through a service and a pod" runs it)
// behind a Service whose ports are named.
const net20Porter = `apiVersion: v1
kind: Pod
metadata:
  name: porter
  labels: {app: porter}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: porter
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["porter"]
    env:
    - {name: SERVE_PORT_80, value: '<a href="/rewriteme">test</a>'}
    - {name: SERVE_TLS_PORT_443, value: '<a href="/tlsrewriteme">test</a>'}
    ports:
    - {name: http, containerPort: 80}
    - {name: https, containerPort: 443}
    readinessProbe:
      tcpSocket: {port: 80}
      periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: porter
spec:
  selector: {app: porter}
  ports:
  - {name: portname1, port: 80, targetPort: 80}
  - {name: tlsportname1, port: 443, targetPort: 443}
`

// TestNet20ProxyRedirectAndRewrite: pods/proxy and services/proxy answer as
// kube-apiserver's do: GET and HEAD of .../proxy are redirected (301) to .../proxy/
// with the query kept, other methods go through, and links in the backend's HTML come
// back rewritten under the proxy path, for http: and https: scheme prefixes and for
// named ports.
func TestNet20ProxyRedirectAndRewrite(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, net20Porter)
	c.waitReady(t, ns, "porter")

	cfg := s.restConfig(t)
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{
		Transport:     rt,
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	base := strings.TrimRight(cfg.Host, "/") + "/api/v1/namespaces/" + ns
	do := func(method, path string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}

	t.Run("redirect", func(t *testing.T) {
		for _, method := range []string{"GET", "HEAD"} {
			for _, p := range []string{"/pods/porter/proxy", "/services/porter:portname1/proxy"} {
				code, h, body := do(method, p+"?method="+method)
				want := "/api/v1/namespaces/" + ns + p + "/?method=" + method
				if code != http.StatusMovedPermanently || h.Get("Location") != want {
					t.Errorf("%s %s: %d Location %q, want 301 %q (%s)", method, p, code, h.Get("Location"), want, body)
				}
			}
		}
		// Other methods are proxied as they are (porter answers any method).
		for _, p := range []string{"/pods/porter/proxy", "/services/porter:portname1/proxy"} {
			eventually(t, 30*time.Second, "POST "+p, func() (bool, string) {
				code, _, body := do("POST", p)
				return code == http.StatusOK && strings.Contains(body, `rewriteme">test</a>`), body
			})
		}
	})

	t.Run("rewrite", func(t *testing.T) {
		for _, tc := range []struct{ path, link string }{
			{"/pods/porter:80/proxy/", "rewriteme"},
			{"/pods/http:porter:80/proxy/", "rewriteme"},
			{"/pods/porter:http/proxy/", "rewriteme"},
			{"/pods/https:porter:443/proxy/", "tlsrewriteme"},
			{"/services/porter:portname1/proxy/", "rewriteme"},
			{"/services/http:porter:portname1/proxy/", "rewriteme"},
			{"/services/https:porter:tlsportname1/proxy/", "tlsrewriteme"},
		} {
			want := `<a href="/api/v1/namespaces/` + ns + tc.path + tc.link + `">test</a>`
			eventually(t, 30*time.Second, "GET "+tc.path, func() (bool, string) {
				code, _, body := do("GET", tc.path)
				return code == http.StatusOK && body == want, body
			})
		}
	})
}

// net20HostPorts is the conformance spec "HostPort validates that there is no conflict
// between pods with same hostPort but different hostIP and protocol": three netexec pods
// on one node share hostPort 54323 (127.0.0.1/TCP, the node's IP/TCP, the node's
// IP/UDP) and a host-network agnhost pod on that node reaches each.
const net20HostPorts = `apiVersion: v1
kind: Pod
metadata:
  name: pod1
spec:
  nodeName: NODE
  terminationGracePeriodSeconds: 1
  containers:
  - name: agnhost
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["netexec", "--http-port=8080", "--udp-port=-1"]
    ports: [{hostPort: 54323, containerPort: 8080, protocol: TCP, hostIP: 127.0.0.1}]
    readinessProbe: {httpGet: {path: /hostname, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata:
  name: pod2
spec:
  nodeName: NODE
  terminationGracePeriodSeconds: 1
  containers:
  - name: agnhost
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["netexec", "--http-port=8080", "--udp-port=-1"]
    ports: [{hostPort: 54323, containerPort: 8080, protocol: TCP, hostIP: NODEIP}]
    readinessProbe: {httpGet: {path: /hostname, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata:
  name: pod3
spec:
  nodeName: NODE
  terminationGracePeriodSeconds: 1
  containers:
  - name: agnhost
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["netexec", "--http-port=8008", "--udp-port=8080"]
    ports: [{hostPort: 54323, containerPort: 8080, protocol: UDP, hostIP: NODEIP}]
    readinessProbe: {httpGet: {path: /hostname, port: 8008}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata:
  name: e2e-host-exec
spec:
  nodeName: NODE
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: e2e-host-exec
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
`

// TestNet20HostPortsByAddressAndProtocol runs the spec's three checks verbatim: curl
// bound to the node's IP to 127.0.0.1:54323 answers pod1, curl to NODEIP:54323 pod2,
// and nc -u to NODEIP:54323 pod3; and when the pods are gone, nothing answers.
func TestNet20HostPortsByAddressAndProtocol(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	node := s.must(t, "get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
	nodeIP := s.must(t, "get", "node", node, "-o", `jsonpath={.status.addresses[?(@.type=="InternalIP")].address}`)
	c.apply(t, ns, strings.NewReplacer("NODEIP", nodeIP, "NODE", node).Replace(net20HostPorts))
	for _, p := range []string{"pod1", "pod2", "pod3", "e2e-host-exec"} {
		c.waitReady(t, ns, p)
	}
	checks := []struct{ cmd, want string }{
		{"curl -g --connect-timeout 5 --interface " + nodeIP + " http://127.0.0.1:54323/hostname", "pod1"},
		{"curl -g --connect-timeout 5 http://" + nodeIP + ":54323/hostname", "pod2"},
		{"echo hostname | nc -u -w 5 " + nodeIP + " 54323", "pod3"},
	}
	for _, tc := range checks {
		eventually(t, 20*time.Second, tc.cmd, func() (bool, string) {
			out, errOut, err := s.kubectl(t, "", "exec", "-n", ns, "e2e-host-exec", "--", "/bin/sh", "-c", tc.cmd)
			return err == nil && out == tc.want, "stdout " + out + " stderr " + errOut
		})
	}
	s.must(t, "delete", "pod", "-n", ns, "pod2", "--wait=true")
	eventually(t, 20*time.Second, "pod2's hostPort gone", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "exec", "-n", ns, "e2e-host-exec", "--", "/bin/sh", "-c", checks[1].cmd)
		return err != nil, "stdout " + out + " stderr " + errOut
	})
}

// net20DNSProbes runs, in agnhost (upstream: musl) and glibc-dns-testing, the lookups
// the DNS conformance specs write their result files with (dns_common.go's
// createProbeCommand and createTargetedProbeCommand), once each, then sleeps.
const net20DNSProbes = `apiVersion: v1
kind: Pod
metadata:
  name: dns-probes
spec:
  hostname: dns-querier-1
  subdomain: dns-test-service
  terminationGracePeriodSeconds: 1
  containers:
  - name: musl-querier
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    command: ["sh", "-c", "SCRIPT"]
  - name: glibc-querier
    image: registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1
    command: ["sh", "-c", "SCRIPT"]
`

// TestNet20DNSProbeTools: both queriers' dig (UDP and TCP, with the search list, +short
// for a CNAME-less A name) and getent hosts (the pod's own /etc/hosts entry) answer,
// and each container's log is read by name, as the specs read them on failure.
func TestNet20DNSProbeTools(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	script := `for p in notcp tcp; do echo "$p: $(dig +$p +noall +answer +search kubernetes.default.svc.cluster.local A)"; done; ` +
		`echo "short: $(dig +short kubernetes.default.svc.cluster.local A)"; ` +
		`echo "search: $(dig +notcp +noall +answer +search kubernetes.default A)"; ` +
		`echo "hosts: $(getent hosts dns-querier-1.dns-test-service.` + ns + `.svc.cluster.local)"; ` +
		`echo done; sleep 3600`
	c.apply(t, ns, strings.Replace(net20DNSProbes, `"SCRIPT"`, strconv.Quote(script), 2))
	ip := s.must(t, "get", "svc", "kubernetes", "-n", "default", "-o", "jsonpath={.spec.clusterIP}")
	for _, ctr := range []string{"musl-querier", "glibc-querier"} {
		var log string
		eventually(t, 60*time.Second, ctr+"'s probes", func() (bool, string) {
			log, _, _ = s.kubectl(t, "", "logs", "-n", ns, "dns-probes", "-c", ctr)
			return strings.Contains(log, "done"), log
		})
		// The cluster DNS answers a search-list expansion with a CNAME to the name
		// (as CoreDNS's autopath); the specs need a non-empty answer.
		for _, re := range []string{
			`(?m)^notcp: kubernetes\.default\.\S*\t\d+\tIN\t(A|CNAME)\t`,
			`(?m)^tcp: kubernetes\.default\.\S*\t\d+\tIN\t(A|CNAME)\t`,
			`(?m)^search: kubernetes\.default\.\S*\t\d+\tIN\t(A|CNAME)\t`,
			`(?m)kubernetes\.default\.svc\.cluster\.local\.\t\d+\tIN\tA\t` + regexp.QuoteMeta(ip) + `$`,
			`(?m)^short: ` + regexp.QuoteMeta(ip) + `$`,
			`(?m)^hosts: \d+\.\d+\.\d+\.\d+ +dns-querier-1\.dns-test-service\.`,
		} {
			if !regexp.MustCompile(re).MatchString(log) {
				t.Errorf("%s: log does not match %s:\n%s", ctr, re, log)
			}
		}
	}
}
