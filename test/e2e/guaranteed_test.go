package e2e

import (
	"os"
	"strings"
	"testing"
)

const guaranteedPod = `apiVersion: v1
kind: Pod
metadata:
  name: gq
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:1.37
    command: ["sleep", "3600"]
    resources:
      requests: {cpu: 100m, memory: 32Mi}
      limits: {cpu: 100m, memory: 32Mi}
`

// TestGuaranteedPodRuns: a Guaranteed pod starts and its container gets kubelet's
// oom_score_adj, -997, or, on a host where the agent lacks CAP_SYS_RESOURCE (no process
// may then lower its score, and runc failed every Guaranteed pod), the lowest score the
// agent can give: its own.
func TestGuaranteedPodRuns(t *testing.T) {
	c := up(t)
	ns := c.srv.namespace(t)
	c.apply(t, ns, guaranteedPod)
	c.waitReady(t, ns, "gq")
	if qos := c.srv.must(t, "get", "pod", "gq", "-n", ns, "-o", "jsonpath={.status.qosClass}"); qos != "Guaranteed" {
		t.Fatalf("qosClass %q", qos)
	}
	got := strings.TrimSpace(c.srv.must(t, "exec", "-n", ns, "gq", "--", "cat", "/proc/1/oom_score_adj"))
	want := "-997"
	if !hasCapSysResource(t) {
		own, err := os.ReadFile("/proc/self/oom_score_adj")
		if err != nil {
			t.Fatal(err)
		}
		want = strings.TrimSpace(string(own))
	}
	if got != want {
		t.Errorf("the Guaranteed container's oom_score_adj is %s, want %s", got, want)
	}
}

// hasCapSysResource reports whether this process's bounding set (the agents' too)
// holds CAP_SYS_RESOURCE (bit 24).
func hasCapSysResource(t *testing.T) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapBnd:"); ok {
			var mask uint64
			for _, ch := range strings.TrimSpace(v) {
				mask = mask<<4 | uint64(strings.IndexRune("0123456789abcdef", ch))
			}
			return mask&(1<<24) != 0
		}
	}
	t.Fatal("no CapBnd in /proc/self/status")
	return false
}
