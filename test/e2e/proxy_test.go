package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/netns"
)

// proxyManifests is the seed 000 example (Deployment api, Service api-svc) with two
// changes: the seed's image (myregistry/api:2.1, which no node can pull: tranche has
// no registry) becomes busybox's httpd serving the pod's hostname and a /healthz file
// the test can remove from the node, so that readiness can fail, and the probe runs
// every second instead of five. Beside
// it: the seed 003 NodePort 30080, services for session affinity, internal traffic
// policy and no endpoints, and a client pod.
const proxyManifests = seedAPIHead + `            failureThreshold: 1
` + seedAPITail + `---
apiVersion: v1
kind: Service
metadata:
  name: svc-nodeport
spec:
  type: NodePort
  selector:
    app: api
  ports:
    - protocol: TCP
      port: 80
      targetPort: 8080
      nodePort: 30080
---
apiVersion: v1
kind: Service
metadata:
  name: sticky
spec:
  selector:
    app: api
  sessionAffinity: ClientIP
  ports:
    - port: 80
      targetPort: 8080
---
apiVersion: v1
kind: Service
metadata:
  name: node-local
spec:
  selector:
    app: api
  internalTrafficPolicy: Local
  ports:
    - port: 80
      targetPort: 8080
---
apiVersion: v1
kind: Service
metadata:
  name: empty
spec:
  selector:
    app: nothing
  ports:
    - port: 80
---
apiVersion: v1
kind: Pod
metadata:
  name: client
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: c
      image: busybox
      command: ["sleep", "3600"]
`

// seedAPIHead and seedAPITail are seed 000 (Deployment api, 3 replicas, Service api-svc
// 80 -> 8080) with its image myregistry/api:2.1, which no node can pull, replaced by
// busybox's httpd answering with the pod's hostname and serving a /healthz file, probed
// every second instead of five; between them, more of the readiness probe.
const seedAPIHead = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  replicas: 3
  selector:
    matchLabels:
      app: api
  template:
    metadata:
      labels:
        app: api
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: api
          image: busybox
          command: ["sh", "-c", "hostname > /tmp/index.html; echo ok > /tmp/healthz; exec busybox httpd -f -p 8080 -h /tmp"]
          ports:
            - containerPort: 8080
          readinessProbe:
            httpGet:
              path: /healthz
              port: 8080
            periodSeconds: 1
`

// seedAPITail is the end of seed 000 after seedAPIHead.
const seedAPITail = `          volumeMounts:
            - {name: www, mountPath: /tmp}
      volumes:
        - name: www
          emptyDir: {}
---
apiVersion: v1
kind: Service
metadata:
  name: api-svc
spec:
  type: ClusterIP
  selector:
    app: api
  ports:
    - port: 80
      targetPort: 8080
`

// soloManifests are one netexec pod (HTTP /clientip, UDP "hostname") behind a
// LoadBalancer with externalTrafficPolicy Local and behind a UDP service.
const soloManifests = `apiVersion: v1
kind: Service
metadata:
  name: keep-source
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector: {role: solo}
  ports:
    - {name: http, port: 80, targetPort: 8080}
---
apiVersion: v1
kind: Service
metadata:
  name: udp
spec:
  selector: {role: solo}
  ports:
    - {name: u, port: 81, targetPort: 8081, protocol: UDP}
`

const soloPod = `apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {role: solo}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: c
      image: registry.k8s.io/e2e-test-images/agnhost:2.52
      args: ["netexec", "--http-port=8080", "--udp-port=8081"]
      readinessProbe:
        httpGet: {path: /healthz, port: 8080}
        periodSeconds: 1
`

// whoamiManifests are a netexec pod (HTTP /clientip answers the caller's ip:port) on
// node %s behind a ClusterIP Service.
const whoamiManifests = `apiVersion: v1
kind: Service
metadata:
  name: whoami
spec:
  selector: {role: whoami}
  ports:
    - {name: http, port: 80, targetPort: 8080}
---
apiVersion: v1
kind: Pod
metadata:
  name: whoami
  labels: {role: whoami}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
    - name: c
      image: registry.k8s.io/e2e-test-images/agnhost:2.52
      args: ["netexec", "--http-port=8080"]
      readinessProbe:
        httpGet: {path: /healthz, port: 8080}
        periodSeconds: 1
`

// fetch runs busybox wget in a network namespace and returns the body.
func fetch(nsName, url string) (string, error) {
	// (Debian's busybox wget crashes with -T; the context bounds the request.)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", nsName, "busybox", "wget", "--no-check-certificate", "-qO-", url).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("wget %s in %s: %v: %s", url, nsName, err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// hits sends n requests and counts the answers (hostnames), errors counted as "error: ...".
func hits(nsName, url string, n int) map[string]int {
	got := map[string]int{}
	for range n {
		body, err := fetch(nsName, url)
		if err != nil {
			body = "error: " + err.Error()
		}
		got[body]++
	}
	return got
}

// TestServiceProxy runs the proxy's scenarios on the shared 3-node cluster: ClusterIP
// spreading over the seed's three pods on three nodes, readiness, the kubernetes
// Service, NodePort on every node, session affinity, refusal without endpoints, ping,
// hairpin, the client's own address seen by a server on its node and on another, both
// traffic policies with the health check node port, UDP conntrack
// cleanup, and a rolling restart under continuous requests. Requests come from a
// busybox pod's network namespace (`ip netns exec`, or sockets opened there).
func TestServiceProxy(t *testing.T) {
	serviceProxyChecks(t, up(t))
}

// serviceProxyChecks runs TestServiceProxy's scenarios on c, a cluster of three nodes
// tranche-1..3 in any proxy mode, in a namespace of its own, which it returns.
func serviceProxyChecks(t *testing.T, c *localCluster) string {
	s := c.srv
	ns := s.namespace(t)
	if _, errOut, err := s.kubectl(t, proxyManifests, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	eventually(t, 60*time.Second, "3 api pods and the client Ready", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pods", "-n", ns, "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		return strings.Count(out, " True") == 4, out
	})
	// Pods and nodes: name → node, node → underlay address.
	podNodes := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(s.must(t, "get", "pods", "-n", ns, "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}`)), "\n") {
		name, node, _ := strings.Cut(line, " ")
		podNodes[name] = node
	}
	nodeIPs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(s.must(t, "get", "nodes", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}`)), "\n") {
		if name, ip, _ := strings.Cut(line, " "); regexp.MustCompile(`^tranche-[123]$`).MatchString(name) {
			nodeIPs[name] = ip
		}
	}
	var apiPods []string
	apiNodes := map[string]bool{}
	for p, n := range podNodes {
		if strings.HasPrefix(p, "api-") {
			apiPods = append(apiPods, p)
			apiNodes[n] = true
		}
	}
	if len(apiPods) != 3 || len(apiNodes) != 3 || len(nodeIPs) != 3 {
		t.Fatalf("want the 3 api pods on the 3 nodes: pods %v, nodes %v", podNodes, nodeIPs)
	}
	client := c.podNS(t, ns, "client")
	clusterIP := func(svc string) string {
		return s.must(t, "get", "svc", svc, "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
	}
	api := "http://" + clusterIP("api-svc") + "/"

	t.Run("ClusterIP reaches all three pods", func(t *testing.T) {
		seen := map[string]int{}
		eventually(t, 20*time.Second, "every api pod answering through "+api, func() (bool, string) {
			for k, v := range hits(client, api, 6) {
				seen[k] += v
			}
			n := 0
			for _, p := range apiPods {
				if seen[p] > 0 {
					n++
				}
			}
			return n == 3, fmt.Sprint(seen)
		})
	})

	t.Run("the kubernetes Service reaches the API server", func(t *testing.T) {
		body, err := fetch(client, "https://10.96.0.1/version")
		if err != nil || !strings.Contains(body, `"gitVersion"`) {
			t.Fatalf("GET https://10.96.0.1/version from a pod: %v %q", err, body)
		}
	})

	t.Run("an unready pod gets no new connections and comes back", func(t *testing.T) {
		victim := apiPods[0]
		healthz := filepath.Join(c.podDir(t, ns, victim), "volumes", "kubernetes.io~empty-dir", "www", "healthz")
		if err := os.Remove(healthz); err != nil {
			t.Fatal(err)
		}
		restored := false
		defer func() {
			if !restored {
				_ = os.WriteFile(healthz, []byte("ok\n"), 0o644)
			}
		}()
		eventually(t, 20*time.Second, victim+" not ready in the EndpointSlice", func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=api-svc", "-o",
				`jsonpath={range .items[*].endpoints[*]}{.targetRef.name}={.conditions.ready} {end}`)
			return strings.Contains(out, victim+"=false"), out
		})
		// Each round of 30 requests would reach the victim with near certainty if its
		// endpoint were still programmed.
		eventually(t, 10*time.Second, "30 requests in a row avoiding "+victim, func() (bool, string) {
			h := hits(client, api, 30)
			return h[victim] == 0 && len(h) == 2, fmt.Sprint(h)
		})
		if err := os.WriteFile(healthz, []byte("ok\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		restored = true
		eventually(t, 20*time.Second, victim+" answering again", func() (bool, string) {
			h := hits(client, api, 6)
			return h[victim] > 0, fmt.Sprint(h)
		})
	})

	t.Run("NodePort 30080 on every node and the proxy health port", func(t *testing.T) {
		underlay := c.prefix + "net"
		for node, ip := range nodeIPs {
			for _, from := range []string{client, underlay} {
				body, err := fetch(from, "http://"+ip+":30080/")
				if err != nil || !strings.HasPrefix(body, "api-") {
					t.Errorf("NodePort on %s (%s) from %s: %v %q", node, ip, from, err, body)
				}
			}
			body, err := fetch(underlay, "http://"+ip+":10256/healthz")
			if err != nil || !strings.Contains(body, `"nodeEligible":true`) {
				t.Errorf("proxy /healthz of %s: %v %q", node, err, body)
			}
		}
	})

	t.Run("session affinity ClientIP sticks, None spreads", func(t *testing.T) {
		url := "http://" + clusterIP("sticky") + "/"
		sticks := func(what string) {
			eventually(t, 20*time.Second, what, func() (bool, string) {
				var answers []string
				for range 16 {
					body, _ := fetch(client, url)
					answers = append(answers, body)
				}
				for _, a := range answers[1:] {
					if a != answers[1] || !strings.HasPrefix(a, "api-") {
						return false, fmt.Sprint(answers)
					}
				}
				return true, ""
			})
		}
		sticks("the last 15 of 16 requests on one pod")
		s.must(t, "patch", "svc", "sticky", "-n", ns, "-p", `{"spec":{"sessionAffinity":"None"}}`)
		eventually(t, 20*time.Second, "sessionAffinity None spreading", func() (bool, string) {
			h := hits(client, url, 16)
			return len(h) > 1, fmt.Sprint(h)
		})
		s.must(t, "patch", "svc", "sticky", "-n", ns, "-p", `{"spec":{"sessionAffinity":"ClientIP"}}`)
		sticks("ClientIP sticking again")
	})

	t.Run("a Service without endpoints refuses at once", func(t *testing.T) {
		_, err := fetch(client, "http://"+clusterIP("empty")+"/")
		if err == nil || !strings.Contains(err.Error(), "Connection refused") {
			t.Fatalf("want connection refused, got %v", err)
		}
	})

	t.Run("ping to a ClusterIP gets no reply", func(t *testing.T) {
		ping := func(ip string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return exec.CommandContext(ctx, "ip", "netns", "exec", client, "busybox", "ping", "-c", "1", "-W", "2", ip).Run()
		}
		podIP := s.must(t, "get", "pod", apiPods[1], "-n", ns, "-o", "jsonpath={.status.podIP}")
		if err := ping(podIP); err != nil {
			t.Fatalf("ping to pod %s: %v (the control must answer)", podIP, err)
		}
		if err := ping(clusterIP("api-svc")); err == nil {
			t.Fatalf("ping to the ClusterIP got a reply")
		}
	})

	t.Run("hairpin: a pod reaches itself through its Service", func(t *testing.T) {
		self := apiPods[2]
		from := c.podNS(t, ns, self)
		eventually(t, 20*time.Second, self+" answering itself through "+api, func() (bool, string) {
			h := hits(from, api, 6)
			return h[self] > 0, fmt.Sprint(h)
		})
	})

	t.Run("a ClusterIP server sees the client pod's own address, from its node and another", func(t *testing.T) {
		near := podNodes["client"]
		if _, errOut, err := s.kubectl(t, fmt.Sprintf(whoamiManifests, near), "apply", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("apply: %v %s", err, errOut)
		}
		c.waitReady(t, ns, "whoami")
		url := "http://" + clusterIP("whoami") + "/clientip"
		clients := []string{"client"}
		for _, p := range apiPods {
			if podNodes[p] != near {
				clients = append(clients, p)
				break
			}
		}
		for _, from := range clients {
			ip := s.must(t, "get", "pod", from, "-n", ns, "-o", "jsonpath={.status.podIP}")
			where := "another node"
			if podNodes[from] == near {
				where = "the server's node"
			}
			eventually(t, 20*time.Second, from+" (on "+where+") seen as "+ip+" through "+url, func() (bool, string) {
				body, err := fetch(c.podNS(t, ns, from), url)
				return err == nil && strings.HasPrefix(body, ip+":"), fmt.Sprint(body, err)
			})
		}
		// Hairpin: the server reaching itself through its own Service (masqueraded, so
		// its reply leaves it to be un-DNATed by the node).
		self := c.podNS(t, ns, "whoami")
		eventually(t, 20*time.Second, "whoami answering itself through "+url, func() (bool, string) {
			body, err := fetch(self, url)
			return err == nil && body != "", fmt.Sprint(body, err)
		})
	})

	t.Run("internalTrafficPolicy Local stays on the client's node", func(t *testing.T) {
		var local string
		for _, p := range apiPods {
			if podNodes[p] == podNodes["client"] {
				local = p
			}
		}
		h := hits(client, "http://"+clusterIP("node-local")+"/", 12)
		if h[local] != 12 {
			t.Fatalf("want every answer from %s (the client's node's pod), got %v", local, h)
		}
	})

	t.Run("externalTrafficPolicy Local keeps the client address; UDP survives an endpoint change", func(t *testing.T) {
		if _, errOut, err := s.kubectl(t, soloManifests+"---\n"+fmt.Sprintf(soloPod, "solo"), "apply", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("apply: %v %s", err, errOut)
		}
		c.waitReady(t, ns, "solo")
		soloNode := s.must(t, "get", "pod", "solo", "-n", ns, "-o", "jsonpath={.spec.nodeName}")
		nodePort := s.must(t, "get", "svc", "keep-source", "-n", ns, "-o", "jsonpath={.spec.ports[0].nodePort}")
		hcPort := s.must(t, "get", "svc", "keep-source", "-n", ns, "-o", "jsonpath={.spec.healthCheckNodePort}")
		underlay := c.prefix + "net"
		// The underlay namespace's address is the API server's cluster listener's.
		underlayIP := s.must(t, "get", "endpointslice", "kubernetes", "-n", "default", "-o", "jsonpath={.endpoints[0].addresses[0]}")
		eventually(t, 20*time.Second, "the client address through the NodePort of "+soloNode, func() (bool, string) {
			body, err := fetch(underlay, "http://"+nodeIPs[soloNode]+":"+nodePort+"/clientip")
			return err == nil && strings.HasPrefix(body, underlayIP+":"), fmt.Sprint(body, err)
		})
		for node, ip := range nodeIPs {
			body, err := fetch(underlay, "http://"+ip+":"+hcPort+"/")
			if node == soloNode && (err != nil || !strings.Contains(body, `"localEndpoints":1`)) {
				t.Errorf("health check port of %s (with the endpoint): %v %q", node, err, body)
			}
			if node != soloNode && (err == nil || !strings.Contains(err.Error(), "503")) {
				t.Errorf("health check port of %s (without an endpoint): want 503, got %v %q", node, err, body)
			}
		}

		// One socket, so every datagram has the same addresses and ports: conntrack
		// keeps sending it to the endpoint it first chose until that entry is deleted.
		conn, err := netns.ListenPacket(client, "udp4", ":0")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		svc, err := net.ResolveUDPAddr("udp4", clusterIP("udp")+":81")
		if err != nil {
			t.Fatal(err)
		}
		ask := func() string {
			if _, err := conn.WriteTo([]byte("hostname"), svc); err != nil {
				return err.Error()
			}
			buf := make([]byte, 100)
			_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				return err.Error()
			}
			return string(buf[:n])
		}
		eventually(t, 10*time.Second, "solo answering over UDP", func() (bool, string) { a := ask(); return a == "solo", a })
		if _, errOut, err := s.kubectl(t, fmt.Sprintf(soloPod, "solo-2"), "apply", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("apply: %v %s", err, errOut)
		}
		c.waitReady(t, ns, "solo-2")
		s.must(t, "delete", "pod", "solo", "-n", ns, "--wait=false")
		eventually(t, 20*time.Second, "solo-2 answering the same UDP flow", func() (bool, string) { a := ask(); return a == "solo-2", a })
	})

	t.Run("a rolling restart under continuous requests fails none", func(t *testing.T) {
		// A new connection per request, as a client opening one per call would: each
		// is a new choice of endpoint by the proxy.
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
				return netns.Dial(client, network, addr, 2*time.Second)
			}}}
		type result struct {
			ok     int
			failed []string
		}
		stop, done := make(chan struct{}), make(chan result)
		go func() {
			var r result
			for {
				select {
				case <-stop:
					done <- r
					return
				default:
				}
				resp, err := hc.Get(api)
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %s", resp.Status)
					}
				}
				if err != nil {
					r.failed = append(r.failed, err.Error())
				} else {
					r.ok++
				}
			}
		}()
		s.must(t, "rollout", "restart", "deployment", "api", "-n", ns)
		s.must(t, "rollout", "status", "deployment", "api", "-n", ns, "--timeout=90s")
		close(stop)
		r := <-done
		if len(r.failed) > 0 || r.ok < 20 {
			t.Fatalf("%d requests succeeded, %d failed during the rollout: %v", r.ok, len(r.failed), r.failed)
		}
		// The last old pod was deleted as rollout status returned; it still serves during
		// the agent's endpoint drain until every proxy has dropped it, then only new pods
		// answer.
		eventually(t, 5*time.Second, "only new pods answering after the rollout", func() (bool, string) {
			body, err := fetch(client, api)
			return err == nil && !slices.Contains(apiPods, body), fmt.Sprintf("%q %v", body, err)
		})
		t.Logf("%d requests, none failed", r.ok)
	})
	return ns
}
