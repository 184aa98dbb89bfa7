package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const hostNetPod = `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  hostNetwork: true
  dnsPolicy: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "hostname; cat /etc/hosts /etc/resolv.conf; echo ok > /tmp/index.html; exec httpd -f -p %d -h /tmp"]
    ports:
    - containerPort: %d
    readinessProbe:
      httpGet: {path: /index.html, port: %d}
      periodSeconds: 1
    volumeMounts:
    - {name: www, mountPath: /tmp}
  volumes:
  - name: www
    emptyDir: {}
`

// TestHostNetworkPod: a hostNetwork pod runs in its node's network namespace: its IP
// is the node's InternalIP, its hostname the node's name, it serves on the node's
// address, its /etc/hosts is the node's, and dnsPolicy ClusterFirst falls back to the
// node's resolver while ClusterFirstWithHostNet gets the cluster DNS.
func TestHostNetworkPod(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	pods := map[string]string{"hostnet": "ClusterFirst", "hostnet-dns": "ClusterFirstWithHostNet"}
	port := map[string]int{"hostnet": 18081, "hostnet-dns": 18082}
	for name, policy := range pods {
		p := port[name]
		if _, errOut, err := s.kubectl(t, fmt.Sprintf(hostNetPod, name, policy, p, p, p), "apply", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("apply: %v %s", err, errOut)
		}
	}
	for name := range pods {
		c.waitReady(t, ns, name)
		out := s.must(t, "get", "pod", name, "-n", ns, "-o", "jsonpath={.status.podIP} {.status.hostIP} {.spec.nodeName}")
		f := strings.Fields(out)
		if len(f) != 3 || f[0] != f[1] {
			t.Fatalf("%s: podIP, hostIP, node = %q; want the node's address as pod IP", name, out)
		}
		ip, node := f[0], f[2]
		internal := s.must(t, "get", "node", node, "-o", `jsonpath={.status.addresses[?(@.type=="InternalIP")].address}`)
		if ip != internal {
			t.Errorf("%s: pod IP %s, node %s's InternalIP %s", name, ip, node, internal)
		}
		// The pod's server listens in the node's namespace: another pod reaches it on
		// the node's address, and the node itself has the socket.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, err := exec.CommandContext(ctx, "ip", "netns", "exec", c.prefix+node, "busybox", "netstat", "-ltn").CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(got), fmt.Sprintf(":%d ", port[name])) {
			t.Errorf("%s: the node's namespace does not listen on %d: %v\n%s", name, port[name], err, got)
		}
		var log string
		eventually(t, 20*time.Second, name+"'s output", func() (bool, string) {
			log = c.podLog(t, ns, name, "c")
			return strings.Contains(log, "nameserver"), log
		})
		for _, want := range []string{"stdout F " + node + "\n", "stdout F # Kubernetes-managed hosts file (host network)."} {
			if !strings.Contains(log, want) {
				t.Errorf("%s: output lacks %q:\n%s", name, want, log)
			}
		}
		if strings.Contains(log, "# Kubernetes-managed hosts file.\n") {
			t.Errorf("%s: got a pod network hosts file:\n%s", name, log)
		}
		clusterDNS := strings.Contains(log, "stdout F nameserver 10.96.0.10") && strings.Contains(log, "stdout F options ndots:5") &&
			strings.Contains(log, "stdout F search "+ns+".svc.cluster.local svc.cluster.local cluster.local")
		if want := pods[name] == "ClusterFirstWithHostNet"; clusterDNS != want {
			t.Errorf("%s (dnsPolicy %s): cluster DNS in resolv.conf = %v, want %v:\n%s", name, pods[name], clusterDNS, want, log)
		}
	}
	// No namespace of their own.
	for name := range pods {
		if pns := c.podNS(t, ns, name); len(netnsWithPrefix(pns)) != 0 {
			t.Errorf("%s has a network namespace %s", name, pns)
		}
	}
	// Deleting one leaves the node's namespace and the other pod alone.
	s.must(t, "delete", "pod", "hostnet", "-n", ns)
	node := s.must(t, "get", "pod", "hostnet-dns", "-n", ns, "-o", "jsonpath={.spec.nodeName}")
	if len(netnsWithPrefix(c.prefix+node)) == 0 {
		t.Fatalf("the node's namespace %s went with a hostNetwork pod", c.prefix+node)
	}
	c.waitReady(t, ns, "hostnet-dns")
}
