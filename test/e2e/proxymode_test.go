package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// inNode runs argv in the network namespace of c's node and returns its combined output.
func (c *localCluster) inNode(node string, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", c.prefix + node}, argv...)...).CombinedOutput()
	return string(out), err
}

// restart runs `tranche down` and `tranche up --detach` with extra flags on c's data
// dir, and returns what up printed.
func (c *localCluster) restart(t *testing.T, extra ...string) (string, error) {
	t.Helper()
	if out, err := exec.Command(trancheBin, "down", "--data-dir", c.dataDir).CombinedOutput(); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	upstream, err := fakeUpstreamDNS()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"up", "--detach", "--data-dir", c.dataDir, "--listen", c.listen, "--upstream-dns", upstream}, extra...)
	out, err := exec.Command(trancheBin, args...).CombinedOutput()
	return string(out), err
}

// modeState is what a node shows of the proxy modes: the answer of /proxyMode on its
// metrics port, whether iptables' nat table holds a KUBE-* chain, and whether table
// ip tranche exists.
func (c *localCluster) modeState(node string) string {
	mode, err := c.inNode(node, "curl", "-s", "--max-time", "3", "http://127.0.0.1:10249/proxyMode")
	if err != nil {
		mode = "error: " + err.Error()
	}
	nat, _ := c.inNode(node, "iptables-save", "-t", "nat")
	_, nftErr := c.inNode(node, "nft", "list", "table", "ip", "tranche")
	return fmt.Sprintf("proxyMode=%s kube-chains=%v table-tranche=%v", mode,
		regexp.MustCompile(`(?m)^:KUBE-`).MatchString(nat), nftErr == nil)
}

// waitMode waits until node's proxy runs mode and holds no rule of another mode.
func (c *localCluster) waitMode(t *testing.T, node, mode string) {
	t.Helper()
	want := fmt.Sprintf("proxyMode=%s kube-chains=%v table-tranche=%v", mode, mode == "iptables", mode == "nftables")
	eventually(t, 60*time.Second, node+": "+want, func() (bool, string) {
		got := c.modeState(node)
		return got == want, got
	})
}

// TestProxyModeChoice: a bad --proxy-mode is refused before anything starts; a new
// cluster runs nftables and says so; --proxy-mode ipvs fails at start on a kernel
// without IP_VS (this machine's) with an error naming the ip_vs module, a restart
// without the flag keeps the recorded ipvs (and fails again), and --proxy-mode nftables
// brings the cluster back.
func TestProxyModeChoice(t *testing.T) {
	out, err := exec.Command(trancheBin, "up", "--data-dir", t.TempDir(), "--proxy-mode", "userspace").CombinedOutput()
	want := `--proxy-mode: Unsupported value: "userspace": supported values: "nftables", "iptables", "ipvs"`
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("up --proxy-mode userspace: %v\n%s\nwant %s", err, out, want)
	}
	out, err = exec.Command(trancheBin, "up", "--data-dir", t.TempDir(), "--proxy-mode", "ipvs", "--ipvs-scheduler", "random").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `--ipvs-scheduler: Unsupported value: "random": supported values: "rr"`) {
		t.Errorf("up --ipvs-scheduler random: %v\n%s", err, out)
	}

	c := upOwn(t, "tpc", 1)
	c.waitMode(t, "tranche-1", "nftables")
	if got := c.lastShownMode(t); got != "nftables" {
		t.Errorf("up showed proxy mode %q, want nftables", got)
	}
	if got := recordedMode(t, c); got != "nftables" {
		t.Errorf("cluster.json records proxy mode %q, want nftables", got)
	}

	for _, extra := range [][]string{{"--proxy-mode", "ipvs"}, nil} {
		out, err := c.restart(t, extra...)
		if err == nil || !strings.Contains(out, "ip_vs") {
			t.Fatalf("up %v on a kernel without IP_VS: %v, want an error naming ip_vs:\n%s", extra, err, out)
		}
		if got := recordedMode(t, c); got != "ipvs" {
			t.Errorf("after up %v: cluster.json records proxy mode %q, want ipvs", extra, got)
		}
	}

	out2, err := c.restart(t, "--proxy-mode", "nftables")
	if err != nil {
		t.Fatalf("up --proxy-mode nftables: %v\n%s", err, out2)
	}
	c.waitMode(t, "tranche-1", "nftables")
}

// lastShownMode is the proxy mode the last `tranche up` of c printed ("proxy mode: M",
// in tranche.log under --detach).
func (c *localCluster) lastShownMode(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.dataDir, "tranche.log"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^proxy mode: (\S+)$`).FindAllStringSubmatch(string(data), -1)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1][1]
}

// recordedMode is the proxy mode c's cluster.json records.
func recordedMode(t *testing.T, c *localCluster) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.dataDir, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		ProxyMode string `json:"proxyMode"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st.ProxyMode
}

// setRecordedMode rewrites the proxy mode in c's cluster.json, keeping the rest: the
// agents that start from then on (restarted by `tranche up`'s supervisor) run mode.
func setRecordedMode(t *testing.T, c *localCluster, mode string) {
	t.Helper()
	path := filepath.Join(c.dataDir, "cluster.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	st["proxyMode"] = mode
	if data, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// killAgent kills node's agent with SIGKILL (leaving its rules in place) and waits for
// the new one `tranche up` starts.
func killAgent(t *testing.T, c *localCluster, node string) {
	t.Helper()
	pidFile := filepath.Join(c.dataDir, "nodes", node, "agent.pid")
	readPID := func() int {
		data, _ := os.ReadFile(pidFile)
		if f := strings.Fields(string(data)); len(f) > 0 {
			pid, _ := strconv.Atoi(f[0])
			return pid
		}
		return 0
	}
	old := readPID()
	if old <= 1 {
		t.Fatalf("no agent pid in %s", pidFile)
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a new agent on "+node, func() (bool, string) {
		pid := readPID()
		return pid > 1 && pid != old && syscall.Kill(pid, 0) == nil, strconv.Itoa(pid)
	})
}

// TestProxyModeIPTables runs the proxy scenarios of TestServiceProxy,
// TestTrafficDistribution and TestProxyBadInput on a 3-node cluster (zones a, b, a) in
// proxy mode iptables, checks its rules, then switches modes: one node's
// agent restarted in nftables mode removes every KUBE-* chain, and the whole cluster
// restarted with --proxy-mode nftables runs nftables only.
func TestProxyModeIPTables(t *testing.T) {
	c := upOwn(t, "tpi", 3, "--proxy-mode", "iptables", "--zones", "a,b")
	for _, node := range []string{"tranche-1", "tranche-2", "tranche-3"} {
		c.waitMode(t, node, "iptables")
	}
	ns := serviceProxyChecks(t, c)
	t.Run("a NodePort on the host reaches the pod through the iptables rules", func(t *testing.T) {
		// keep-source (externalTrafficPolicy Local, pod solo-2) has a random nodePort,
		// which no other cluster on this machine publishes on 127.0.0.1.
		port := c.srv.must(t, "get", "svc", "keep-source", "-n", ns, "-o", "jsonpath={.spec.ports[0].nodePort}")
		eventually(t, 30*time.Second, "127.0.0.1:"+port+" answering from the host", func() (bool, string) {
			out, code := curlHost("http://127.0.0.1:" + port + "/hostname")
			return code == 0 && strings.HasSuffix(strings.TrimSpace(out), "solo-2"), out
		})
	})
	t.Run("traffic distribution", func(t *testing.T) { trafficDistributionChecks(t, c) })
	t.Run("bad input", func(t *testing.T) { proxyBadInputChecks(t, c) })

	t.Run("iptables-save shows the Service's chains", func(t *testing.T) {
		nat, err := c.inNode("tranche-1", "iptables-save", "-t", "nat")
		if err != nil {
			t.Fatalf("iptables-save: %v\n%s", err, nat)
		}
		svcRule := regexp.MustCompile(`(?m)^-A KUBE-SERVICES .*--comment "?` + regexp.QuoteMeta(ns+"/api-svc") + ` cluster IP"? .*-j (KUBE-SVC-[A-Z0-9]+)$`)
		m := svcRule.FindStringSubmatch(nat)
		if !strings.Contains(nat, ":KUBE-SERVICES ") || m == nil || !strings.Contains(nat, ":"+m[1]+" ") {
			t.Fatalf("iptables-save -t nat lacks KUBE-SERVICES, or the rule jumping to api-svc's KUBE-SVC chain, or that chain:\n%s", nat)
		}
	})

	t.Run("an agent restarted in nftables mode removes the iptables rules", func(t *testing.T) {
		setRecordedMode(t, c, "nftables")
		killAgent(t, c, "tranche-1")
		c.waitMode(t, "tranche-1", "nftables")
		c.waitMode(t, "tranche-2", "iptables") // untouched
	})

	t.Run("a restart with --proxy-mode nftables runs nftables only", func(t *testing.T) {
		setRecordedMode(t, c, "iptables")
		out, err := c.restart(t, "--proxy-mode", "nftables")
		if err != nil {
			t.Fatalf("up --proxy-mode nftables: %v\n%s", err, out)
		}
		if got := c.lastShownMode(t); got != "nftables" {
			t.Errorf("up showed proxy mode %q, want nftables", got)
		}
		for _, node := range []string{"tranche-1", "tranche-2", "tranche-3"} {
			c.waitMode(t, node, "nftables")
		}
		ip := c.srv.must(t, "get", "svc", "api-svc", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
		eventually(t, 90*time.Second, "api-svc answering from node tranche-1", func() (bool, string) {
			body, err := fetch(c.prefix+"tranche-1", "http://"+ip+"/")
			return err == nil && strings.HasPrefix(body, "api-"), fmt.Sprint(body, err)
		})
	})
}
