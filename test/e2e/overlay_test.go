package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const machinePod = `apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  labels: {app: %[1]s}
spec:
  nodeName: %[2]s
` +
	webContainer +
	`---
apiVersion: v1
kind: Service
metadata:
  name: %[1]s
spec:
  type: NodePort
  selector: {app: %[1]s}
  ports:
  - port: 80
    targetPort: 8080
`

// TestMachinesOverlay runs two agents on simulated machines (namespaces on the
// underlay LAN of a one-node `tranche up` cluster, whose API server they reach at its
// cluster listener) with the default VXLAN backend: each publishes flannel's
// annotations, routes the other's pod subnet through flannel.1 with ARP and FDB
// entries, gives its pods the MTU less 50, and pods on the two machines reach each
// other by pod IP, through a ClusterIP Service and a NodePort on the other machine's
// address; a restarted agent writes nothing; deleting a machine's Node removes its
// route, ARP and FDB entries from the other.
func TestMachinesOverlay(t *testing.T) {
	machinesOverlay(t, "ov", "vxlan")
}

// TestMachinesHostGW is TestMachinesOverlay with --backend host-gw: plain routes via the
// other machine's LAN address, no vxlan device, pods keep the link's MTU.
func TestMachinesHostGW(t *testing.T) {
	machinesOverlay(t, "ovh", "host-gw")
}

func machinesOverlay(t *testing.T, tag, backend string) {
	c := upOwn(t, tag, 1)
	s := c.srv
	l := underlayLAN(c)
	type spec struct {
		name, addr, podCIDR string
	}
	specs := []spec{{"m1", "10.240.0.101", "10.244.11.0/24"}, {"m2", "10.240.0.102", "10.244.12.0/24"}}
	ms := map[string]*machine{}
	stops := map[string]func(){}
	for _, sp := range specs {
		m := l.addMachine(t, sp.name, c.prefix+sp.name, netip.MustParseAddr(sp.addr))
		ms[sp.name] = m
		stops[sp.name] = m.startAgent(t, c, netip.MustParsePrefix(sp.podCIDR), backend)
	}
	eventually(t, 90*time.Second, "m1 and m2 Ready with flannel's annotations", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "nodes", "m1", "m2", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status} {.metadata.annotations.flannel\.alpha\.coreos\.com/backend-type} {.metadata.annotations.flannel\.alpha\.coreos\.com/public-ip}{"\n"}{end}`)
		want := fmt.Sprintf("m1 True %[1]s 10.240.0.101\nm2 True %[1]s 10.240.0.102\n", backend)
		return out == want, out
	})
	vtep := func(node string) string {
		if backend != "vxlan" {
			return "no VTEP"
		}
		data := s.must(t, "get", "node", node, "-o", `jsonpath={.metadata.annotations.flannel\.alpha\.coreos\.com/backend-data}`)
		i := strings.Index(data, `"VtepMAC":"`)
		if i < 0 {
			t.Fatalf("node %s backend-data %q has no VtepMAC", node, data)
		}
		return strings.TrimSuffix(data[i+len(`"VtepMAC":"`):], `"}`)
	}
	m2MAC := vtep("m2")
	ip := func(ns string, args ...string) string {
		out, _ := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
		return string(out)
	}
	fdb := func(ns string) string {
		out, _ := exec.Command("ip", "netns", "exec", ns, "bridge", "fdb", "show", "dev", "flannel.1").CombinedOutput()
		return string(out)
	}
	m1 := ms["m1"].ns
	podMTU := "mtu 1500"
	if backend == "vxlan" {
		podMTU = "mtu 1450"
		eventually(t, 30*time.Second, "m1 routes m2's pod subnet over VXLAN", func() (bool, string) {
			got := ip(m1, "route") + ip(m1, "neigh", "show", "dev", "flannel.1") + fdb(m1) + ip(m1, "-d", "link", "show", "flannel.1")
			ok := strings.Contains(got, "10.244.12.0/24 via 10.244.12.0 dev flannel.1 proto 84 onlink") &&
				strings.Contains(got, "10.244.12.0 lladdr "+m2MAC+" PERMANENT") &&
				strings.Contains(got, m2MAC+" dst 10.240.0.102 self permanent") &&
				strings.Contains(got, "mtu 1450") && strings.Contains(got, "vxlan id 1 local 10.240.0.101 dev eth0") &&
				strings.Contains(got, "dstport 8472")
			return ok, got
		})
	} else {
		eventually(t, 30*time.Second, "m1 routes m2's pod subnet via m2's address", func() (bool, string) {
			got := ip(m1, "route") + ip(m1, "link")
			return strings.Contains(got, "10.244.12.0/24 via 10.240.0.102 dev eth0 proto 84") && !strings.Contains(got, "flannel.1"), got
		})
	}

	ns := s.namespace(t)
	t.Cleanup(func() {
		// Forced: cleanups run last-registered first, so m2's agent (stopped below) and
		// m1's restarted one (registered after this) are gone by now and nothing would
		// confirm a graceful deletion. (That is what looked like a restarted agent taking
		// 30 s; TestGracefulDeletionAfterAgentRestart checks the graceful path.) What is
		// left running is killed with the machines' namespaces and by tranche down.
		s.kubectl(t, "", "delete", "pod", "web-1", "web-2", "-n", ns, "--force", "--grace-period=0")
	})
	for _, p := range []struct{ name, node string }{{"web-1", "m1"}, {"web-2", "m2"}} {
		if _, errOut, err := s.kubectl(t, fmt.Sprintf(machinePod, p.name, p.node), "apply", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("apply: %v %s", err, errOut)
		}
	}
	c.waitReady(t, ns, "web-1")
	c.waitReady(t, ns, "web-2")
	podIP := func(pod string) string {
		return s.must(t, "get", "pod", pod, "-n", ns, "-o", "jsonpath={.status.podIP}")
	}
	web1, web2 := podIP("web-1"), podIP("web-2")
	if !strings.HasPrefix(web1, "10.244.11.") || !strings.HasPrefix(web2, "10.244.12.") {
		t.Fatalf("pod IPs %s, %s: want them from m1's and m2's subnets", web1, web2)
	}
	pns1, pns2 := c.podNS(t, ns, "web-1"), c.podNS(t, ns, "web-2")
	if got := ip(pns1, "link", "show", "eth0"); !strings.Contains(got, podMTU) {
		t.Errorf("web-1's eth0 does not have the %s backend's %s:\n%s", backend, podMTU, got)
	}
	for _, tc := range []struct{ what, from, url, want string }{
		{"web-1 on m1 reaches web-2 on m2 by pod IP", pns1, "http://" + web2 + ":8080/hostname", "web-2"},
		{"web-2 on m2 reaches web-1 on m1 by pod IP", pns2, "http://" + web1 + ":8080/hostname", "web-1"},
		{"web-1 reaches web-2 through its ClusterIP", pns1, "http://" + s.must(t, "get", "svc", "web-2", "-n", ns, "-o", "jsonpath={.spec.clusterIP}") + "/hostname", "web-2"},
		{"web-2 reaches web-1 through its ClusterIP", pns2, "http://" + s.must(t, "get", "svc", "web-1", "-n", ns, "-o", "jsonpath={.spec.clusterIP}") + "/hostname", "web-1"},
	} {
		eventually(t, 30*time.Second, tc.what, func() (bool, string) {
			got, err := httpGetFrom(tc.from, tc.url)
			return err == nil && got == tc.want, fmt.Sprintf("%q %v", got, err)
		})
	}
	if backend == "vxlan" {
		// The VXLAN packets that carried those requests were not tracked on either
		// machine (the overlay's notrack rules); the pods' own connections were.
		for _, m := range []string{m1, ms["m2"].ns} {
			out, _ := exec.Command("ip", "netns", "exec", m, "conntrack", "-L", "-p", "udp").Output()
			if strings.Contains(string(out), "dport=8472") {
				t.Errorf("machine namespace %s tracks VXLAN packets:\n%s", m, out)
			}
			out, _ = exec.Command("ip", "netns", "exec", m, "conntrack", "-L", "-p", "tcp", "--dport", "8080").Output()
			if !strings.Contains(string(out), "dport=8080") {
				t.Errorf("machine namespace %s tracks no connection between the pods (conntrack -L):\n%s", m, out)
			}
		}
	}
	// web-2's NodePort answers on m1's address too, from the LAN (the underlay
	// namespace): m1 forwards to m2 across the machines.
	nodePort := s.must(t, "get", "svc", "web-2", "-n", ns, "-o", "jsonpath={.spec.ports[0].nodePort}")
	eventually(t, 30*time.Second, "web-2's NodePort on m1's address", func() (bool, string) {
		got, err := httpGetFrom(l.ns, "http://10.240.0.101:"+nodePort+"/hostname")
		return err == nil && got == "web-2", fmt.Sprintf("%q %v", got, err)
	})
	// A request larger than the MTU crosses the tunnel whole.
	big := strings.Repeat("x", 20000)
	eventually(t, 10*time.Second, "a 20 kB echo across machines", func() (bool, string) {
		got, err := httpGetFrom(pns1, "http://"+web2+":8080/echo?msg="+big)
		return err == nil && got == big, fmt.Sprintf("%d bytes %v", len(got), err)
	})

	// m1's agent restarts: it finds its device and entries as they should be and writes
	// nothing, and its pod keeps reaching m2's.
	logPath := filepath.Join(c.dataDir, "nodes", "m1", "agent.log")
	count := func(msg string) int {
		b, _ := os.ReadFile(logPath)
		return strings.Count(string(b), `msg="`+msg+`"`)
	}
	writes := count("overlay sync")
	stops["m1"]()
	stops["m1"] = ms["m1"].startAgent(t, c, netip.MustParsePrefix(specs[0].podCIDR), backend)
	eventually(t, 60*time.Second, "m1's restarted overlay running", func() (bool, string) {
		n := count("overlay running")
		return n == 2, fmt.Sprintf("%d starts", n)
	})
	eventually(t, 30*time.Second, "web-1 reaching web-2 after m1's agent restarted", func() (bool, string) {
		got, err := httpGetFrom(pns1, "http://"+web2+":8080/hostname")
		return err == nil && got == "web-2", fmt.Sprintf("%q %v", got, err)
	})
	if n := count("overlay sync"); n != writes {
		t.Errorf("m1's restarted overlay wrote to the kernel %d times, want none (all was in place)", n-writes)
	}

	// m2 leaves: its agent stops and its Node is deleted; m1 forgets it.
	stops["m2"]()
	s.must(t, "delete", "node", "m2")
	eventually(t, 30*time.Second, "m2's route (and ARP and FDB entries) gone from m1", func() (bool, string) {
		got := ip(m1, "route") + ip(m1, "neigh") + fdb(m1)
		return !strings.Contains(got, "10.244.12.0") && !strings.Contains(got, m2MAC), got
	})
}
