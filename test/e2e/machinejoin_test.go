package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/agent"
	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/netns"
)

// TestMachineJoin: an agent on a simulated machine joins with only what kubeadm join
// needs (--server, --token, --ca-cert-hash, and here --node-name and --root-dir, as the
// machines share one file system): no cluster file and no pod-network kubeconfig. Its
// namespace becomes the node (named tranche-NODE, the pod bridge in it), the Node gets
// its podCIDR from node IPAM and the machine's address, the cluster's settings come from
// kube-system/kubelet-config and kube-proxy, and the pod network's identity comes from
// an auto-approved kube-apiserver-client CSR: it reads Nodes and nothing else. A pod
// runs there with an address of that podCIDR and survives a restart of the agent, which
// resumes with its certificates. In the host's root namespace the agent refuses to
// start, naming --take-host-network.
func TestMachineJoin(t *testing.T) {
	t.Parallel()
	c := upOwn(t, "mj", 1)
	s := c.srv
	out, err := exec.Command(trancheBin, "token", "create", "--kubeconfig", s.kubeconfig, "--print-join-command").CombinedOutput()
	if err != nil {
		t.Fatalf("tranche token create: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`^tranche agent --server (https://\S+) --token (\S+) --ca-cert-hash (sha256:[0-9a-f]{64})\n$`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("tranche token create --print-join-command printed %q", out)
	}
	server, token, hash := m[1], m[2], m[3]

	// The host's namespace is refused before anything is sent.
	out, err = exec.Command(trancheBin, "agent", "--server", "https://127.0.0.1:1", "--token", token, "--ca-cert-hash", hash,
		"--node-name", "refused", "--root-dir", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "runs in the host's root network namespace") || !strings.Contains(string(out), "--take-host-network") {
		t.Fatalf("agent in the host's namespace: %v\n%s", err, out)
	}

	node := fmt.Sprintf("mj%d", os.Getpid()%100000)
	l := underlayLAN(c)
	mach := l.addMachine(t, node, c.prefix+node, netip.MustParseAddr("10.240.0.121"))
	root := filepath.Join(t.TempDir(), "agent")
	// The agent names its namespace tranche-NODE and its pods' tranche-p-*: remove what
	// it left (its shim and pods outlive it on purpose) once it has stopped.
	t.Cleanup(func() {
		removeMachineNamespaces(t, agent.MachinePrefix+node, root)
		killNodeCgroup(t, runc.NodeCgroup(agent.MachinePrefix+node))
	})
	agentLog := filepath.Join(t.TempDir(), "agent.log")
	startAgent := func() func() {
		return mach.start(t, exec.Command(trancheBin, "agent", "--server", server, "--token", token, "--ca-cert-hash", hash,
			"--node-name", node, "--root-dir", root), agentLog)
	}
	stopAgent := startAgent()

	var podCIDR netip.Prefix
	eventually(t, 90*time.Second, "the machine's Node Ready with a podCIDR, its address and flannel's annotations", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "node", node, "-o",
			`jsonpath={.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address} {.metadata.annotations.flannel\.alpha\.coreos\.com/public-ip} {.status.conditions[?(@.type=="Ready")].status}`)
		f := strings.Fields(out)
		if len(f) != 4 || f[1] != "10.240.0.121" || f[2] != "10.240.0.121" || f[3] != "True" {
			return false, out
		}
		p, err := netip.ParsePrefix(f[0])
		podCIDR = p
		return err == nil, out
	})
	if !netns.Exists("tranche-" + node) {
		t.Errorf("no namespace tranche-%s for the machine's node", node)
	}
	if out, err := exec.Command("ip", "-n", mach.ns, "-br", "addr", "show", "cbr0").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), podCIDR.Masked().Addr().Next().String()+"/") {
		t.Errorf("the machine's pod bridge: %v %s", err, out)
	}

	csrs := s.must(t, "get", "csr", "-o", `jsonpath={range .items[*]}{.spec.signerName} {.spec.username} {.status.conditions[0].type}{"\n"}{end}`)
	if !strings.Contains(csrs, "kubernetes.io/kube-apiserver-client system:node:"+node+" Approved") {
		t.Errorf("no approved pod-network CSR of the node:\n%s", csrs)
	}
	network := filepath.Join(root, "network.kubeconfig")
	// The kubeconfig names the cluster listener on the machines' LAN; the test, in the
	// host's namespace, uses its credentials through the loopback listener.
	nk := func(args ...string) (string, error) {
		cmd := exec.Command("kubectl", append([]string{"--kubeconfig", network, "--server", "https://" + s.listen}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return strings.TrimSpace(string(out) + " " + stderr.String()), err
	}
	if out, err := nk("get", "nodes", "-o", "name"); err != nil || !strings.Contains(out, "node/"+node) {
		t.Errorf("the pod network's identity lists Nodes: %v\n%s", err, out)
	}
	if out, _ := nk("auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}"); !strings.HasPrefix(out, "system:tranche:node-network:"+node+" ") {
		t.Errorf("the pod network's identity is %q", out)
	}
	for _, verb := range [][]string{{"get", "nodes"}, {"watch", "nodes"}} {
		if out, _ := nk(append([]string{"auth", "can-i"}, verb...)...); firstWord(out) != "yes" {
			t.Errorf("pod network identity: can-i %v: %s", verb, out)
		}
	}
	for _, verb := range [][]string{{"patch", "nodes"}, {"delete", "nodes"}, {"list", "pods", "-A"}, {"get", "secrets", "-n", "kube-system"},
		{"create", "pods"}, {"create", "certificatesigningrequests"}, {"get", "configmaps", "-n", "kube-system"}} {
		if out, _ := nk(append([]string{"auth", "can-i"}, verb...)...); firstWord(out) != "no" {
			t.Errorf("pod network identity: can-i %v: %s, want no", verb, out)
		}
	}

	ns := s.namespace(t)
	s.mustStdin(t, fmt.Sprintf(machinePod, "mjweb", node), "apply", "-n", ns, "-f", "-")
	eventually(t, 90*time.Second, "the pod on the machine Ready", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "-n", ns, "mjweb", "-o", `jsonpath={.status.podIP} {.status.conditions[?(@.type=="Ready")].status}`)
		ip, ready, _ := strings.Cut(out, " ")
		a, err := netip.ParseAddr(ip)
		return err == nil && podCIDR.Contains(a) && ready == "True", out
	})

	// A restarted agent finds its namespace under its name, keeps its pod and resumes
	// with the pod network's certificate it has: no second request.
	uid := s.must(t, "get", "pod", "-n", ns, "mjweb", "-o", "jsonpath={.metadata.uid}")
	stopAgent()
	startAgent()
	eventually(t, 60*time.Second, "the restarted agent running", func() (bool, string) {
		out, _ := os.ReadFile(agentLog)
		return strings.Count(string(out), `msg="node running"`) == 2, tail(string(out), 2000)
	})
	if got := s.must(t, "get", "pod", "-n", ns, "mjweb", "-o", `jsonpath={.metadata.uid} {.status.conditions[?(@.type=="Ready")].status}`); got != uid+" True" {
		t.Errorf("after the restart the pod is %q, want %s True", got, uid)
	}
	csrs = s.must(t, "get", "csr", "-o", `jsonpath={range .items[*]}{.spec.signerName} {.spec.username}{"\n"}{end}`)
	if n := strings.Count(csrs, "kubernetes.io/kube-apiserver-client system:node:"+node+"\n"); n != 1 {
		t.Errorf("%d pod-network CSRs of the node after a restart, want 1:\n%s", n, csrs)
	}
	s.must(t, "delete", "pod", "-n", ns, "mjweb", "--grace-period=1", "--wait=true", "--timeout=60s")
}

// removeMachineNamespaces kills what runs in a joined machine's node namespace nodeNS
// and in the pods' namespaces its agent recorded under root (sandboxes.json), and
// removes them: only this agent's, never another parallel test's tranche-* namespaces.
func removeMachineNamespaces(t *testing.T, nodeNS, root string) {
	names := []string{nodeNS}
	data, err := os.ReadFile(filepath.Join(root, "sandboxes.json"))
	if err != nil && !os.IsNotExist(err) {
		t.Error(err)
	}
	if len(data) > 0 {
		var records map[string]struct {
			NetNS string `json:"netns"`
		}
		if err := json.Unmarshal(data, &records); err != nil {
			t.Errorf("the agent's sandboxes.json: %v", err)
		}
		for _, r := range records {
			if strings.HasPrefix(r.NetNS, "tranche-p-") {
				names = append(names, r.NetNS)
			}
		}
	}
	for _, n := range names {
		if !netns.Exists(n) {
			continue
		}
		killNetnsProcesses(t, n)
		if err := netns.Delete(n); err != nil {
			t.Error(err)
		}
	}
}

func firstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}
