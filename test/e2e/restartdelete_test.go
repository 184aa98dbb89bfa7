package e2e

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const restartDeletePod = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  nodeName: m1
` +
	webContainer

// TestGracefulDeletionAfterAgentRestart: a pod adopted by a restarted agent (on a
// simulated machine) and deleted with the default 30 s grace period is gone as soon as
// its container exits on SIGTERM (agnhost does at once), not when the grace period
// runs out. (The 30 s and more once seen in TestMachinesOverlay's clean-up were not the
// agent's: t.Cleanup runs last-registered first, so the restarted agent's stop, added
// after the pods' deletion, ran before it and no agent was left to finish it.)
func TestGracefulDeletionAfterAgentRestart(t *testing.T) {
	t.Parallel()
	c := upOwn(t, "rd", 1)
	s := c.srv
	l := underlayLAN(c)
	m1 := l.addMachine(t, "m1", c.prefix+"m1", netip.MustParseAddr("10.240.0.131"))
	cidr := netip.MustParsePrefix("10.244.41.0/24")
	stop := m1.startAgent(t, c, cidr, "vxlan")
	waitNodesReady(t, s, 90*time.Second, "m1")
	ns := s.namespace(t)
	t.Cleanup(func() { s.kubectl(t, "", "delete", "pod", "web", "-n", ns, "--force", "--grace-period=0") })
	c.apply(t, ns, restartDeletePod)
	c.waitReady(t, ns, "web")

	logPath := filepath.Join(c.dataDir, "nodes", "m1", "agent.log")
	stop()
	m1.startAgent(t, c, cidr, "vxlan")
	eventually(t, 60*time.Second, "the restarted agent adopting web's container", func() (bool, string) {
		b, _ := os.ReadFile(logPath)
		return strings.Count(string(b), `msg="adopted a running container"`) == 1, tail(string(b), 1000)
	})
	c.waitReady(t, ns, "web")
	deleted := time.Now()
	s.must(t, "delete", "pod", "web", "-n", ns, "--wait=false")
	eventually(t, 60*time.Second, "web gone", func() (bool, string) {
		out, errOut, _ := s.kubectl(t, "", "get", "pod", "web", "-n", ns)
		return strings.Contains(errOut, "NotFound"), out + errOut
	})
	if took := time.Since(deleted); took > 20*time.Second {
		b, _ := os.ReadFile(logPath)
		t.Errorf("web took %v to go after its deletion: its container exits on SIGTERM at once, yet the agent waited for the 30 s grace period\n%s",
			took.Round(time.Second), tail(string(b), 3000))
	} else {
		t.Logf("web gone %v after its deletion", took.Round(100*time.Millisecond))
	}
}
