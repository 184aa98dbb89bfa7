package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// badWebPod answers HTTP on 8080 with its hostname, pinned to a node, labelled app=%s.
// Its /tmp is an emptyDir, as in the other busybox web pods of these tests.
const badWebPod = `apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {app: %s}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
    - name: web
      image: busybox
      command: ["sh", "-c", "hostname > /tmp/index.html; exec busybox httpd -f -p 8080 -h /tmp"]
      readinessProbe:
        tcpSocket: {port: 8080}
        periodSeconds: 1
      volumeMounts:
        - {name: www, mountPath: /tmp}
  volumes:
    - name: www
      emptyDir: {}
---
`

// badServices: "manual" has no selector (the test writes its EndpointSlice), "other"
// selects its own pod and must keep working whatever manual's slice holds.
const badServices = `apiVersion: v1
kind: Service
metadata:
  name: manual
spec:
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata:
  name: other
spec:
  selector: {app: other}
  ports: [{port: 80, targetPort: 8080}]
`

// manualSlice lists two pods around two addresses the API accepts but no proxy can
// send to: a multicast address and a ClusterIP. Its managed-by label keeps the
// EndpointSlice controller's hands off it.
const manualSlice = `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: manual-1
  labels:
    kubernetes.io/service-name: manual
    endpointslice.kubernetes.io/managed-by: e2e.tranche.test
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
  - {addresses: ["%s"], nodeName: tranche-1}
  - {addresses: ["239.1.2.3"]}
  - {addresses: ["%s"]}
  - {addresses: ["%s"], nodeName: tranche-2}
`

// TestProxyBadInput: an EndpointSlice with unusable addresses gets one Warning Event
// from each node's proxy naming them (endpoints[1] multicast, endpoints[2] a ClusterIP),
// while its good endpoints answer through the Service's ClusterIP from a pod on a third
// node and another Service keeps answering.
func TestProxyBadInput(t *testing.T) {
	proxyBadInputChecks(t, up(t))
}

// proxyBadInputChecks runs TestProxyBadInput's checks on c, a cluster of nodes
// tranche-1..3 in any proxy mode.
func proxyBadInputChecks(t *testing.T, c *localCluster) {
	s := c.srv
	ns := s.namespace(t)
	manifests := fmt.Sprintf(badWebPod, "good-1", "manual", "tranche-1") + fmt.Sprintf(badWebPod, "good-2", "manual", "tranche-2") +
		fmt.Sprintf(badWebPod, "other-1", "other", "tranche-2") + fmt.Sprintf(zoneClient, "client", "tranche-3") + badServices
	if _, errOut, err := s.kubectl(t, manifests, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	for _, p := range []string{"good-1", "good-2", "other-1", "client"} {
		c.waitReady(t, ns, p)
	}
	get := func(args ...string) string { return strings.TrimSpace(s.must(t, append(args, "-n", ns)...)) }
	otherIP := get("get", "svc", "other", "-o", "jsonpath={.spec.clusterIP}")
	slice := fmt.Sprintf(manualSlice, get("get", "pod", "good-1", "-o", "jsonpath={.status.podIP}"), otherIP,
		get("get", "pod", "good-2", "-o", "jsonpath={.status.podIP}"))
	if _, errOut, err := s.kubectl(t, slice, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply the EndpointSlice: %v %s", err, errOut)
	}

	wantMessage := fmt.Sprintf(`skips what it cannot send traffic to: endpoints[1].addresses[0] "239.1.2.3": a multicast address; endpoints[2].addresses[0] %q: inside the service CIDR`, otherIP)
	eventually(t, 30*time.Second, "one UnusableEndpointAddress Event on manual-1 from each node's proxy", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "events", "-n", ns, "-o",
			`jsonpath={range .items[?(@.reason=="UnusableEndpointAddress")]}{.involvedObject.kind}/{.involvedObject.name} {.type} {.source.component}@{.source.host} x{.count}: {.message}{"\n"}{end}`)
		hosts := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			head, msg, _ := strings.Cut(line, ": ")
			f := strings.Fields(head)
			if len(f) != 4 || f[0] != "EndpointSlice/manual-1" || f[1] != "Warning" || f[3] != "x1" || !strings.Contains(msg, wantMessage) {
				return false, out
			}
			component, host, _ := strings.Cut(f[2], "@")
			if component != "tranche-proxy" {
				return false, out
			}
			hosts[host] = true
		}
		return len(hosts) == 3 && hosts["tranche-1"] && hosts["tranche-2"] && hosts["tranche-3"], out
	})

	client := c.podNS(t, ns, "client")
	manualURL := "http://" + get("get", "svc", "manual", "-o", "jsonpath={.spec.clusterIP}") + "/"
	// 20 requests over the 2 good endpoints: each is missed with probability 2^-20, and
	// any request sent to a bad address would show as an error.
	eventually(t, 20*time.Second, "manual's good endpoints answering through its ClusterIP, and only them", func() (bool, string) {
		h := hits(client, manualURL, 20)
		return len(h) == 2 && h["good-1"] > 0 && h["good-2"] > 0, fmt.Sprint(h)
	})
	eventually(t, 20*time.Second, "the other Service answering", func() (bool, string) {
		h := hits(client, "http://"+otherIP+"/", 5)
		return h["other-1"] == 5, fmt.Sprint(h)
	})
}
