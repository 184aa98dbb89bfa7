package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNetworkPolicyEngine checks the node side of NetworkPolicy enforcement
// (internal/netpol) on the shared cluster: every node has table ip tranche-netpol; a
// policy isolating a server on one node makes a client on another time out, the
// server's node counts the drop and its programming duration, an allowing policy lets
// the client through and counts it, and deleting the policies empties the pod's entry.
// The full matrix of policy semantics is TestNetworkPolicyMatrix.
func TestNetworkPolicyEngine(t *testing.T) {
	c := up(t)
	s := c.srv
	nodes := strings.Fields(s.must(t, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"))
	if len(nodes) < 2 {
		t.Fatalf("nodes: %v, want at least 2", nodes)
	}
	for _, n := range nodes {
		eventually(t, 60*time.Second, n+": table ip tranche-netpol", func() (bool, string) {
			out, err := c.inNode(n, "nft", "list", "chain", "ip", "tranche-netpol", "forward-ingress")
			return err == nil && strings.Contains(out, "vmap @ingress-pods"), out
		})
	}
	ns := s.namespace(t)
	srvNode, cliNode := nodes[0], nodes[1]
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: srv, labels: {app: srv}}
spec:
  nodeName: %s
  containers:
  - name: httpd
    image: busybox
    command: [sh, -c, "mkdir -p /w && echo hello > /w/index.html && exec httpd -f -p 8080 -h /w"]
    ports: [{name: http, containerPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: cli, labels: {app: cli}}
spec:
  nodeName: %s
  containers: [{name: sh, image: busybox, command: [sleep, "3600"]}]
`, srvNode, cliNode)
	if out, errOut, err := s.kubectl(t, manifest, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply pods: %v\n%s%s", err, out, errOut)
	}
	s.must(t, "wait", "-n", ns, "--for=condition=Ready", "pod/srv", "pod/cli", "--timeout=120s")
	srvIP := strings.TrimSpace(s.must(t, "get", "pod", "-n", ns, "srv", "-o", "jsonpath={.status.podIP}"))
	connects := func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "exec", "-n", ns, "cli", "--", "sh", "-c",
			fmt.Sprintf(`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 %s 8080`, srvIP))
		return err == nil && strings.Contains(out, "hello"), out + errOut
	}
	eventually(t, 30*time.Second, "cli reaches srv without policy", connects)

	policies := `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-srv}
spec: {podSelector: {matchLabels: {app: srv}}}
`
	if out, errOut, err := s.kubectl(t, policies, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply deny-srv: %v\n%s%s", err, out, errOut)
	}
	eventually(t, 30*time.Second, "cli denied by deny-srv", func() (bool, string) {
		ok, out := connects()
		return !ok, out
	})
	metric := func(node, name string, labels ...string) float64 {
		out, err := c.inNode(node, "curl", "-s", "--max-time", "3", "http://127.0.0.1:10249/metrics")
		if err != nil {
			return -1
		}
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{([^}]*)\} (\S+)$`)
		for _, m := range re.FindAllStringSubmatch(out, -1) {
			all := true
			for _, l := range labels {
				all = all && strings.Contains(m[1], l)
			}
			if v, err := strconv.ParseFloat(m[2], 64); all && err == nil {
				return v
			}
		}
		return -1
	}
	eventually(t, 30*time.Second, "denied connections counted on "+srvNode, func() (bool, string) {
		v := metric(srvNode, "tranche_networkpolicy_denied_connections_total", `direction="ingress"`, `namespace="`+ns+`"`, `pod="srv"`)
		return v >= 1, fmt.Sprint(v)
	})
	if out, _ := c.inNode(srvNode, "curl", "-s", "--max-time", "3", "http://127.0.0.1:10249/metrics"); !regexp.MustCompile(`(?m)^tranche_networkpolicy_programming_duration_seconds_count [1-9]`).MatchString(out) ||
		!strings.Contains(out, "tranche_networkpolicy_sync_duration_seconds_count") {
		t.Errorf("%s: no programming or sync durations in its metrics:\n%s", srvNode, out)
	}

	allow := `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-cli}
spec:
  podSelector: {matchLabels: {app: srv}}
  ingress: [{from: [{podSelector: {matchLabels: {app: cli}}}], ports: [{port: http}]}]
`
	if out, errOut, err := s.kubectl(t, allow, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply allow-cli: %v\n%s%s", err, out, errOut)
	}
	eventually(t, 30*time.Second, "cli allowed by allow-cli (named port)", connects)
	eventually(t, 30*time.Second, "allowed connections counted on "+srvNode, func() (bool, string) {
		v := metric(srvNode, "tranche_networkpolicy_allowed_connections_total", `direction="ingress"`, `namespace="`+ns+`"`, `policy="allow-cli"`)
		return v >= 1, fmt.Sprint(v)
	})

	s.must(t, "delete", "networkpolicy", "-n", ns, "deny-srv", "allow-cli")
	eventually(t, 30*time.Second, srvNode+": srv no longer isolated", func() (bool, string) {
		out, err := c.inNode(srvNode, "nft", "list", "map", "ip", "tranche-netpol", "ingress-pods")
		return err == nil && !strings.Contains(out, srvIP+" "), out
	})
}
