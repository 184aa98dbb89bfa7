package e2e

import (
	"fmt"
	"regexp"
	"testing"
	"time"
)

// agnhostPods run subcommands of Kubernetes' own agnhost (imported from k8s.io/kubernetes)
// as the conformance tests do. porter and liveness install no SIGTERM handler, so as a
// container's PID 1 they ignore it, as with upstream's image: a short grace period keeps
// the namespace's deletion quick.
const agnhostPods = `apiVersion: v1
kind: Pod
metadata:
  name: porter
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: porter
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["porter"]
    env:
    - {name: SERVE_PORT_8080, value: served-by-porter}
    ports:
    - containerPort: 8080
    readinessProbe:
      httpGet: {path: /, port: 8080}
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata:
  name: liveness
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: liveness
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["liveness"]
    livenessProbe:
      httpGet: {path: /healthz, port: 8080}
      initialDelaySeconds: 2
      periodSeconds: 1
      failureThreshold: 1
---
apiVersion: v1
kind: Pod
metadata:
  name: etc-hosts
spec:
  restartPolicy: Never
  containers:
  - name: etc-hosts
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["etc-hosts"]
`

// TestAgnhostUpstreamSubcommands: the agnhost image runs upstream's subcommands, not
// stand-ins: porter serves the value of its SERVE_PORT_8080 variable, liveness's
// /healthz fails after 10 s so that its liveness probe restarts it (the conformance
// test "should be restarted with a /healthz http liveness probe"), and etc-hosts prints
// the pod's /etc/hosts, which names the pod, and exits 0.
func TestAgnhostUpstreamSubcommands(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, agnhostPods)

	c.waitReady(t, ns, "porter")
	ip := s.must(t, "get", "pod", "porter", "-n", ns, "-o", "jsonpath={.status.podIP}")
	eventually(t, 20*time.Second, "porter's answer on "+ip+":8080", func() (bool, string) {
		out, err := c.inNodeNS(t, ns, "porter", nil, "busybox", "wget", "-qO-", "http://"+ip+":8080/")
		return err == nil && out == "served-by-porter", fmt.Sprintf("%v %q", err, out)
	})

	c.waitRow(t, 60*time.Second, ns, "pod/etc-hosts", regexp.MustCompile(`Completed`))
	hostsLine := regexp.MustCompile(`stdout F [0-9a-f.:]+\s+etc-hosts\b`)
	eventually(t, 10*time.Second, "etc-hosts's output: the pod's address and name", func() (bool, string) {
		log := c.podLog(t, ns, "etc-hosts", "etc-hosts")
		return hostsLine.MatchString(log), log
	})

	eventually(t, 60*time.Second, "liveness restarted by its probe", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "liveness", "-n", ns, "-o", "jsonpath={.status.containerStatuses[0].restartCount}")
		return out != "" && out != "0", "restartCount " + out
	})
}
