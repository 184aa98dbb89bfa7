package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tranche/tranche/internal/netns"
)

// linkCutGrace is the --node-monitor-grace-period the link-cut tests give their
// servers: three times the agent's 10 s Lease renewal, so that a healthy node of a
// loaded machine never looks silent, and short enough for a test.
const linkCutGrace = "30s"

// linkCutPods are the pods testLinkCut runs: web-cut-evicted (which tolerates the
// unreachable taint for 5 s) and web-cut-kept (the default 300 s) on the machine whose
// link is cut, web-peer on its peer, all behind the Service web; web-peer alone is
// behind the Service peer.
const linkCutPods = `apiVersion: v1
kind: Pod
metadata:
  name: web-cut-evicted
  labels: {app: web}
spec:
  nodeName: %[1]s
  terminationGracePeriodSeconds: 5
  tolerations:
  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 5}
` +
	webContainer +
	`---
apiVersion: v1
kind: Pod
metadata:
  name: web-cut-kept
  labels: {app: web}
spec:
  nodeName: %[1]s
  terminationGracePeriodSeconds: 5
` +
	webContainer +
	`---
apiVersion: v1
kind: Pod
metadata:
  name: web-peer
  labels: {app: web, role: peer}
spec:
  nodeName: %[2]s
  terminationGracePeriodSeconds: 5
` +
	webContainer +
	`---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
    targetPort: 8080
---
apiVersion: v1
kind: Service
metadata:
  name: peer
spec:
  selector: {role: peer}
  ports:
  - port: 80
    targetPort: 8080
`

// TestLinkCut cuts the link of one of two machines running agents (VXLAN) beside a
// one-node `tranche up` cluster whose grace period is linkCutGrace, and checks what
// Kubernetes does (testLinkCut).
func TestLinkCut(t *testing.T) {
	t.Parallel()
	linkCut(t, "lc", "vxlan", 21)
}

// TestLinkCutHostGW is TestLinkCut with --backend host-gw, whose routes through the
// uplink the kernel flushes when the link goes down: the overlay writes them again as
// soon as it returns.
func TestLinkCutHostGW(t *testing.T) {
	t.Parallel()
	linkCut(t, "lch", "host-gw", 23)
}

// linkCut runs testLinkCut on machines m1 and m2 with backend; the machines get the
// pod subnets 10.244.<subnet>.0/24 and the next, and the LAN addresses 10.240.0.<100+subnet>
// and the next.
func linkCut(t *testing.T, tag, backend string, subnet byte) {
	c := upOwn(t, tag, 1, "--node-monitor-grace-period="+linkCutGrace)
	l := underlayLAN(c)
	base := 100 + subnet
	m1 := l.addMachine(t, "m1", c.prefix+"m1", netip.AddrFrom4([4]byte{10, 240, 0, base}))
	m2 := l.addMachine(t, "m2", c.prefix+"m2", netip.AddrFrom4([4]byte{10, 240, 0, base + 1}))
	m1.startAgent(t, c, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, subnet, 0}), 24), backend)
	m2.startAgent(t, c, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, subnet + 1, 0}), 24), backend)
	waitNodesReady(t, c.srv, 90*time.Second, "m1", "m2")
	dnsOnMachines(t, c.srv, "m1", "m2")
	testLinkCut(t, c.srv, m2, m1)
}

// testLinkCut cuts the link of the machine cut (its eth0 goes down, in its own
// namespace) and brings it back, checking Kubernetes' behaviour on s, whose node
// lifecycle controller must run with --node-monitor-grace-period=linkCutGrace (or
// shorter). cut and peer are machines running agents whose Nodes are named after the
// machines and are Ready, with an overlay between them; nothing may be scheduled on
// cut or peer but what this creates. It runs the pods of linkCutPods and the Service
// web in a namespace of its own, and expects:
//   - before the cut: web-cut-kept (on cut) resolves the Service peer by name through
//     the cluster DNS and reaches web-peer (on peer);
//   - while cut is away: its Node Ready=Unknown ("Kubelet stopped posting node
//     status."), tainted node.kubernetes.io/unreachable NoExecute and NoSchedule, its
//     pods Ready=False and not ready in web's EndpointSlices (web-peer stays ready),
//     web-cut-evicted deleted once its 5 s toleration ran out (it stays Terminating:
//     nobody on cut hears of it) and web-cut-kept not deleted;
//   - once it is back, without any process on cut restarting: the Node Ready=True and
//     untainted, web-cut-evicted gone, web-cut-kept Ready and ready in the slices
//     again, each machine routing the other's pod CIDR, and peer reaching
//     web-cut-kept by pod IP.
func testLinkCut(t *testing.T, s kubectlRunner, cut, peer *machine) {
	t.Helper()
	ns := s.namespace(t)
	t.Cleanup(func() {
		// Before the agents stop, which the machines' cleanups do.
		s.kubectl(t, "", "delete", "pod", "--all", "-n", ns, "--force", "--grace-period=0")
	})
	if _, errOut, err := s.kubectl(t, fmt.Sprintf(linkCutPods, cut.name, peer.name), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	podReady := func(pod string) string {
		out, _, _ := s.kubectl(t, "", "get", "pod", pod, "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out
	}
	for _, pod := range []string{"web-cut-evicted", "web-cut-kept", "web-peer"} {
		eventually(t, 60*time.Second, pod+" Ready", func() (bool, string) {
			got := podReady(pod)
			return got == "True", got
		})
	}
	// endpoints is web's endpoints as "pod=ready" lines, sorted.
	endpoints := func() string {
		out, _, _ := s.kubectl(t, "", "get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=web", "-o",
			`jsonpath={range .items[*].endpoints[*]}{.targetRef.name}={.conditions.ready}{"\n"}{end}`)
		lines := strings.Fields(out)
		slices.Sort(lines)
		return strings.Join(lines, " ")
	}
	allReady := "web-cut-evicted=true web-cut-kept=true web-peer=true"
	eventually(t, 30*time.Second, "web's three endpoints ready", func() (bool, string) {
		got := endpoints()
		return got == allReady, got
	})
	keptIP := s.must(t, "get", "pod", "web-cut-kept", "-n", ns, "-o", "jsonpath={.status.podIP}")
	reach := func() (bool, string) {
		got, err := httpGetFrom(peer.ns, "http://"+net.JoinHostPort(keptIP, "8080")+"/hostname")
		return err == nil && got == "web-cut-kept", fmt.Sprintf("%q %v", got, err)
	}
	eventually(t, 30*time.Second, peer.name+" reaching web-cut-kept before the cut", reach)
	// Cluster DNS across machines: web-cut-kept resolves the Service peer, whose pod
	// runs on the other machine, by its short and its full name, and reaches it.
	for _, host := range []string{"peer", "peer." + ns + ".svc.cluster.local"} {
		url := "http://" + net.JoinHostPort(keptIP, "8080") + "/dial?protocol=http&request=hostname&port=80&tries=1&host=" + host
		eventually(t, 30*time.Second, "web-cut-kept on "+cut.name+" reaching "+host+" on "+peer.name, func() (bool, string) {
			got, err := httpGetFrom(peer.ns, url)
			return err == nil && strings.Contains(got, `"responses":["web-peer"]`), fmt.Sprintf("%q %v", got, err)
		})
	}
	pids := netnsPIDs(t, cut.ns)

	nodeState := func() string {
		out, _, _ := s.kubectl(t, "", "get", "node", cut.name, "-o",
			`jsonpath={.status.conditions[?(@.type=="Ready")].status}|{.status.conditions[?(@.type=="Ready")].message}|{range .spec.taints[*]}{.key}:{.effect} {end}`)
		return out
	}
	setLink(t, cut, "down")
	restored := false
	defer func() {
		if !restored {
			setLink(t, cut, "up")
		}
	}()
	cutAt := time.Now()
	eventually(t, 90*time.Second, cut.name+" Unknown and tainted unreachable", func() (bool, string) {
		got := nodeState()
		return strings.HasPrefix(got, "Unknown|Kubelet stopped posting node status.|") &&
			strings.Contains(got, "node.kubernetes.io/unreachable:NoExecute") &&
			strings.Contains(got, "node.kubernetes.io/unreachable:NoSchedule"), got
	})
	t.Logf("%s Unknown %v after the cut", cut.name, time.Since(cutAt).Round(time.Second))
	eventually(t, 30*time.Second, "the cut machine's pods not Ready and not ready in web's slices", func() (bool, string) {
		got := podReady("web-cut-kept") + " " + endpoints()
		return strings.HasPrefix(got, "False ") && strings.Contains(got, "web-cut-kept=false") &&
			!strings.Contains(got, "web-cut-evicted=true") && strings.Contains(got, "web-peer=true"), got
	})
	eventually(t, 30*time.Second, "web-cut-evicted deleted after its 5 s toleration", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "web-cut-evicted", "-n", ns, "-o",
			`jsonpath={.metadata.deletionTimestamp}|{.status.conditions[?(@.type=="DisruptionTarget")].reason}`)
		return strings.HasSuffix(out, "|DeletionByTaintManager") && !strings.HasPrefix(out, "|"), out
	})
	if got := s.must(t, "get", "pod", "web-cut-kept", "-n", ns, "-o", "jsonpath={.metadata.deletionTimestamp}"); got != "" {
		t.Errorf("web-cut-kept, tolerating the taint for 300 s, was deleted at %s", got)
	}

	setLink(t, cut, "up")
	restored = true
	backAt := time.Now()
	eventually(t, 60*time.Second, cut.name+" Ready and untainted", func() (bool, string) {
		got := nodeState()
		return got == "True|"+readyMessage(got)+"|", got
	})
	t.Logf("%s Ready %v after the link returned", cut.name, time.Since(backAt).Round(time.Second))
	eventually(t, 60*time.Second, "web-cut-evicted gone", func() (bool, string) {
		out, errOut, _ := s.kubectl(t, "", "get", "pod", "web-cut-evicted", "-n", ns)
		return strings.Contains(errOut, "NotFound"), out + errOut
	})
	eventually(t, 30*time.Second, "web-cut-kept Ready and ready in web's slices again", func() (bool, string) {
		got := podReady("web-cut-kept") + " " + endpoints()
		return got == "True web-cut-kept=true web-peer=true", got
	})
	for _, m := range []struct{ from, to *machine }{{cut, peer}, {peer, cut}} {
		cidr := s.must(t, "get", "node", m.to.name, "-o", "jsonpath={.spec.podCIDR}")
		eventually(t, 30*time.Second, m.from.name+" routing "+m.to.name+"'s pod CIDR", func() (bool, string) {
			out, _ := exec.Command("ip", "-n", m.from.ns, "route", "show", cidr).CombinedOutput()
			return strings.HasPrefix(string(out), cidr+" via "), string(out)
		})
	}
	eventually(t, 30*time.Second, peer.name+" reaching web-cut-kept after the link returned", reach)
	for _, pid := range pids {
		if unix.Kill(pid, 0) != nil {
			t.Errorf("process %d on %s ended while its link was cut (nothing may restart)", pid, cut.name)
		}
	}
}

// kubectlRunner is what testLinkCut needs of a server: *server (a `tranche up`
// cluster's) or, through machineKubectl, a server running on a machine.
type kubectlRunner interface {
	kubectl(t testing.TB, stdin string, args ...string) (string, string, error)
	must(t testing.TB, args ...string) string
	namespace(t testing.TB) string
}

// dnsOnMachines moves the cluster DNS pods of s onto the machines (Nodes) named, as
// on a cluster made of machines only: every other Node is cordoned and the DNS
// Deployment restarted. (The nodes of a `tranche up` cluster are not on the machines'
// overlay, so machines' pods cannot reach pods there.)
func dnsOnMachines(t *testing.T, s *server, machines ...string) {
	t.Helper()
	for _, n := range strings.Fields(s.must(t, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}")) {
		if !slices.Contains(machines, n) {
			s.must(t, "cordon", n)
		}
	}
	s.must(t, "rollout", "restart", "deployment/tranche-dns", "-n", "kube-system")
	t.Cleanup(func() {
		if t.Failed() {
			out, errOut, _ := s.kubectl(t, "", "logs", "-n", "kube-system", "-l", "k8s-app=kube-dns", "--tail=20", "--prefix")
			desc, _, _ := s.kubectl(t, "", "describe", "pods", "-n", "kube-system", "-l", "k8s-app=kube-dns")
			t.Logf("DNS pods' logs:\n%s%s\n%s", out, errOut, tail(desc, 3000))
		}
	})
	eventually(t, 90*time.Second, "the DNS pods Ready on the machines only", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pods", "-n", "kube-system", "-l", "k8s-app=kube-dns", "-o",
			`jsonpath={range .items[*]}{.spec.nodeName} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}`)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		for _, l := range lines {
			node, rest, _ := strings.Cut(strings.TrimSpace(l), " ")
			if !slices.Contains(machines, node) || rest != "True" {
				return false, out
			}
		}
		return len(lines) > 0, out
	})
}

// readyMessage returns the Ready message in a nodeState line, whatever the agent says
// when Ready.
func readyMessage(state string) string {
	parts := strings.Split(state, "|")
	if len(parts) < 2 {
		return ""
	}
	return parts[1]
}

// setLink sets the machine's eth0 up or down, in its own namespace.
func setLink(t *testing.T, m *machine, state string) {
	t.Helper()
	if out, err := exec.Command("ip", "-n", m.ns, "link", "set", "eth0", state).CombinedOutput(); err != nil {
		t.Fatalf("machine %s: eth0 %s: %v %s", m.name, state, err, out)
	}
}

// netnsPIDs lists the processes whose network namespace is ns.
func netnsPIDs(t testing.TB, ns string) []int {
	t.Helper()
	var want unix.Stat_t
	if err := unix.Stat(netns.Path(ns), &want); err != nil {
		t.Fatal(err)
	}
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st) == nil && st.Ino == want.Ino && st.Dev == want.Dev {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		t.Fatalf("no process runs in %s", ns)
	}
	return pids
}

// httpGetFrom GETs url from the network namespace ns and returns the body.
func httpGetFrom(ns, url string) (string, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			return netns.Dial(ns, network, addr, 2*time.Second)
		}}}
	resp, err := hc.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
