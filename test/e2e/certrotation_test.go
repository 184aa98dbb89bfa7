package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"golang.org/x/sys/unix"
)

// TestMachineCertificateRotation runs a joined machine past the expiry of its first
// certificates: the server signs for two minutes (--cluster-signing-duration 2m), so
// the agent's node certificate and its pod network's are renewed through CSRs (at
// 70-90% of their lives, counted from five minutes before issue, as upstream's signer
// backdates them) and the first ones expire while the test watches. The node must go
// on renewing its Lease with the new certificates past that expiry, stay Ready, and
// its pod network must go on reading the Nodes, without restarting.
func TestMachineCertificateRotation(t *testing.T) {
	t.Parallel()
	prefix := fmt.Sprintf("cr%d-", runID)
	home := t.TempDir()
	useMachineMounts(t)
	l := newLAN(t, prefix+"lan", netip.MustParsePrefix("192.168.95.0/24"), netip.Addr{})
	etcd := startEtcdCluster(t, l, 1)
	s := startMachineServers(t, l, prefix, etcd, []string{"tre2e-cr-a"}, "--cluster-signing-duration", "2m")[0]
	joinCmd, _ := s.joinCommand(t)

	m := addReadmeMachine(t, l, "cr1", prefix+"cr1", netip.MustParseAddr("192.168.95.31"), home)
	logPath := filepath.Join(t.TempDir(), "agent.log")
	m.start(t, m.command(context.Background(), joinCmd), logPath)
	c := s.client(t)
	ctx := context.Background()
	nodeReady := func() (bool, string) {
		out, _, _ := s.kubectl("", "get", "node", "cr1", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True", out
	}
	eventually(t, 120*time.Second, "cr1 joined and Ready", nodeReady)

	// The first certificate of each identity, and when it expires.
	firstExpiry := func(signer, user string) time.Time {
		list, err := c.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var first *certificatesv1.CertificateSigningRequest
		for i, csr := range list.Items {
			if csr.Spec.SignerName == signer && strings.HasPrefix(csr.Spec.Username, user) && len(csr.Status.Certificate) > 0 &&
				(first == nil || csr.CreationTimestamp.Before(&first.CreationTimestamp)) {
				first = &list.Items[i]
			}
		}
		if first == nil {
			t.Fatalf("no issued CSR of signer %s by %s", signer, user)
		}
		block, _ := pem.Decode(first.Status.Certificate)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if life := cert.NotAfter.Sub(first.CreationTimestamp.Time); life > 3*time.Minute {
			t.Fatalf("CSR %s: a certificate for %s, want about 2m (--cluster-signing-duration)", first.Name, life)
		}
		return cert.NotAfter
	}
	nodeExpiry := firstExpiry(certificatesv1.KubeAPIServerClientKubeletSignerName, "system:bootstrap:")
	networkExpiry := firstExpiry(certificatesv1.KubeAPIServerClientSignerName, "system:node:cr1")
	until := nodeExpiry
	if networkExpiry.After(until) {
		until = networkExpiry
	}
	t.Logf("first certificates expire at %s (node) and %s (pod network)", nodeExpiry.Format(time.TimeOnly), networkExpiry.Format(time.TimeOnly))
	// The agent's process (the machine's shell runs it as printed), which must not restart.
	// A child it is starting (nft, runc) shows the agent's command line until it has
	// executed its own program: such a process, whose parent is a candidate, is not one.
	candidates := map[int]bool{}
	for _, pid := range netnsPIDs(t, m.ns) {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if args := strings.Split(string(cmd), "\x00"); len(args) > 1 && filepath.Base(args[0]) == "tranche" && args[1] == "agent" {
			candidates[pid] = true
		}
	}
	var agentPIDs []int
	for pid := range candidates {
		if !candidates[parentPID(pid)] {
			agentPIDs = append(agentPIDs, pid)
		}
	}
	if len(agentPIDs) != 1 {
		t.Fatalf("tranche agent processes on cr1: %v (of %v), want one", agentPIDs, candidates)
	}

	// Past both expiries, the Lease is renewed with a later certificate and the node
	// stays Ready throughout.
	for time.Now().Before(until.Add(25 * time.Second)) {
		if ok, got := nodeReady(); !ok {
			t.Fatalf("cr1 not Ready (%s) at %s, its first certificate expiring at %s:\n%s", got,
				time.Now().Format(time.TimeOnly), nodeExpiry.Format(time.TimeOnly), tail(readFile(logPath), 3000))
		}
		time.Sleep(2 * time.Second)
	}
	eventually(t, 30*time.Second, "cr1's Lease renewed after its first certificate expired", func() (bool, string) {
		l, err := c.CoordinationV1().Leases("kube-node-lease").Get(ctx, "cr1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime.After(nodeExpiry.Add(10 * time.Second)), l.Spec.RenewTime.String()
	})
	// Renewals of each identity, each approved and issued.
	for _, want := range []struct{ signer, user string }{
		{certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:cr1"},
		{certificatesv1.KubeAPIServerClientSignerName, "system:node:cr1"},
	} {
		list, err := c.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, csr := range list.Items {
			if csr.Spec.SignerName == want.signer && csr.Spec.Username == want.user && len(csr.Status.Certificate) > 0 {
				n++
			}
		}
		// The pod network's first request is its node's too: a renewal is a second one.
		if min := map[bool]int{true: 1, false: 2}[want.signer == certificatesv1.KubeAPIServerClientKubeletSignerName]; n < min {
			t.Errorf("%d issued CSRs of signer %s by %s, want at least %d (renewals)", n, want.signer, want.user, min)
		}
	}
	// The pod network read the Nodes throughout (a refused identity logs it), and the
	// agent did not restart.
	if log := readFile(logPath); strings.Contains(log, "Unauthorized") {
		t.Errorf("the agent was refused by the API server:\n%s", tail(log, 3000))
	}
	if unix.Kill(agentPIDs[0], 0) != nil {
		t.Errorf("the agent (process %d) ended during the rotations:\n%s", agentPIDs[0], tail(readFile(logPath), 3000))
	}
}

// readFile returns path's content, or the error reading it.
func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// parentPID is the parent of process pid (0 once it is gone).
func parentPID(pid int) int {
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
