package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDebugNode: `kubectl debug node/NAME` runs its pod in the node's network, PID and
// IPC namespaces with the node's root file system at /host, as on any cluster (the
// node of a local cluster is the machine).
func TestDebugNode(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	node := strings.Fields(s.must(t, "get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"))[0]
	out := s.must(t, "debug", "node/"+node, "-n", ns, "--image=busybox:1.37", "--profile=general", "--", "sleep", "3600")
	m := regexp.MustCompile(`pod (node-debugger-\S+) with container`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("kubectl debug node: %q, want the debugging pod's name", out)
	}
	pod := m[1]
	c.waitReady(t, ns, pod)
	want, err := os.ReadFile("/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.must(t, "exec", pod, "-n", ns, "--", "cat", "/host/etc/hostname"); got != string(want) {
		t.Errorf("/host/etc/hostname in the debugging pod: %q, want the node's %q", got, want)
	}
	nodeIP := s.must(t, "get", "node", node, "-o", `jsonpath={.status.addresses[?(@.type=="InternalIP")].address}`)
	if got := s.must(t, "exec", pod, "-n", ns, "--", "ip", "-4", "addr"); !strings.Contains(got, nodeIP+"/") {
		t.Errorf("addresses in the debugging pod: %q, want the node's %s", got, nodeIP)
	}
	initComm, err := os.ReadFile("/proc/1/comm")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the node's PID 1", func() (bool, string) {
		got, _, _ := s.kubectl(t, "", "exec", pod, "-n", ns, "--", "cat", "/proc/1/comm")
		return got == string(initComm), got
	})
}
