package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests of this file are issue 15's acceptance for containers that outlive their
// agent: the node's shim keeps them, `tranche up` starts the agent again, and the new
// agent adopts them.

const survivor = `apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/agnhost:2.52
    args: ["netexec", "--http-port=8080"]
    readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
`

// TestAgentKilledPodsSurvive: kill -9 of an agent leaves its pod serving through its
// ClusterIP; the agent comes back and reports the same container Running, without a
// restart, and exec and logs work through it again.
func TestAgentKilledPodsSurvive(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, survivor)
	c.waitReady(t, ns, "web")
	field := func(path string) string { return s.must(t, "get", "pod", "web", "-n", ns, "-o", "jsonpath="+path) }
	node, id, uid := field("{.spec.nodeName}"), field("{.status.containerStatuses[0].containerID}"), field("{.metadata.uid}")
	readySince := `{.status.conditions[?(@.type=="Ready")].lastTransitionTime}`
	before := field(readySince)
	clusterIP := s.must(t, "get", "service", "web", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
	get := func() (string, error) {
		return c.inNodeNS(t, ns, "web", nil, "curl", "-s", "--max-time", "3", "http://"+clusterIP+"/hostname")
	}
	if out, err := get(); err != nil || out != "web" {
		t.Fatalf("before: curl the ClusterIP: %q (%v)", out, err)
	}

	pidFile := filepath.Join(c.dataDir, "nodes", node, "agent.pid")
	readPID := func() int {
		data, err := os.ReadFile(pidFile)
		if err != nil {
			return 0
		}
		pid, _ := strconv.Atoi(strings.Fields(string(data))[0])
		return pid
	}
	old := readPID()
	if old <= 1 {
		t.Fatalf("no agent pid in %s", pidFile)
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The container keeps serving while no agent runs (the node's rules stay too).
	if out, err := get(); err != nil || out != "web" {
		t.Errorf("with the agent killed: curl the ClusterIP: %q (%v), want web", out, err)
	}
	eventually(t, 30*time.Second, "a new agent", func() (bool, string) {
		pid := readPID()
		return pid > 1 && pid != old && syscall.Kill(pid, 0) == nil, strconv.Itoa(pid)
	})
	eventually(t, 30*time.Second, "the same container Running and Ready, not restarted", func() (bool, string) {
		out := field("{.metadata.uid} {.status.containerStatuses[0].containerID} {.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].ready}")
		return out == uid+" "+id+" 0 true", out
	})
	if out, err := get(); err != nil || out != "web" {
		t.Errorf("after: curl the ClusterIP: %q (%v)", out, err)
	}
	// Ready all along: the new agent keeps the readiness it adopted until its probe
	// says otherwise, so the pod never left its Service.
	if after := field(readySince); after != before {
		t.Errorf("the pod's Ready condition changed at %s (was %s): it flapped across the agent restart", after, before)
	}
	// The new agent serves exec once it has started its streaming endpoint.
	eventually(t, 20*time.Second, "exec through the new agent", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "exec", "web", "-n", ns, "--", "cat", "/etc/hostname")
		return err == nil && strings.TrimSpace(out) == "web", out + errOut
	})
	if out := s.must(t, "logs", "web", "-n", ns); !strings.Contains(out, "Started HTTP server on port 8080") {
		t.Errorf("logs through the new agent: %q, want what netexec wrote before the restart", out)
	}
	if out := s.must(t, "get", "node", node, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`); out != "True" {
		t.Errorf("node %s Ready=%s after the agent came back", node, out)
	}
}
