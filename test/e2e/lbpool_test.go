package e2e

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/clusternet"
	"github.com/tranche/tranche/internal/l2announce"
)

const lbPoolWeb = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  nodeName: m2
  terminationGracePeriodSeconds: 0
  containers:
  - name: web
    image: registry.k8s.io/e2e-test-images/agnhost:2.52
    args: ["netexec", "--http-port=8080"]
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  type: LoadBalancer
  loadBalancerIP: %s
  selector: {app: web}
  ports:
  - port: 8081
    targetPort: 8080
`

// holds reports whether the machine m holds addr on its uplink.
func holds(t *testing.T, m *machine, addr string) bool {
	out, err := exec.Command("ip", "-n", m.ns, "-4", "-o", "addr", "show", "dev", "eth0").CombinedOutput()
	if err != nil {
		t.Fatalf("ip addr on %s: %v %s", m.name, err, out)
	}
	return strings.Contains(string(out), " "+addr+"/32 ")
}

// TestLoadBalancerPoolL2: with a pool on the machines' LAN, exactly one Ready machine
// announces a LoadBalancer address (holds it on eth0, answering ARP, as MetalLB's layer
// 2 mode), so a third machine on the LAN that is no node reaches the Service's pod on m2
// through it; the announcing node's agent stopped, the other machine takes the address
// over (gratuitous ARP) and it answers again; the Service turned NodePort or deleted, no
// machine holds it. Before that, m1 is cut off the API server while it stays on the LAN:
// it releases the address before m2 takes it, and takes it back when the contact returns.
// The announcer is m1 (the Service's address is picked so that the choice falls on it), so
// stopping it leaves the pod running on m2.
func TestLoadBalancerPoolL2(t *testing.T) {
	t.Parallel()
	c := upOwn(t, "lbp", 1, "--loadbalancer-pool=10.240.0.240/29", "--node-monitor-grace-period=40s")
	s := c.srv
	l := underlayLAN(c)
	m1 := l.addMachine(t, "m1", c.prefix+"m1", netip.MustParseAddr("10.240.0.131"))
	m2 := l.addMachine(t, "m2", c.prefix+"m2", netip.MustParseAddr("10.240.0.132"))
	client := l.addMachine(t, "client", c.prefix+"client", netip.MustParseAddr("10.240.0.139"))
	stopM1 := m1.startAgent(t, c, netip.MustParsePrefix("10.244.41.0/24"), "vxlan")
	m2.startAgent(t, c, netip.MustParsePrefix("10.244.42.0/24"), "vxlan")
	ns := s.namespace(t)
	// The cluster's ingress Service takes the pool's first address; web asks for one
	// that the choice gives to m1.
	addr := ""
	for i := 242; addr == ""; i++ {
		if a := netip.AddrFrom4([4]byte{10, 240, 0, byte(i)}); l2announce.Choose(a, []string{"m1", "m2"}) == "m1" {
			addr = a.String()
		}
	}
	t.Cleanup(func() { s.kubectl(t, "", "delete", "pod", "web", "-n", ns, "--force", "--grace-period=0") })
	eventually(t, 90*time.Second, "m1 and m2 Ready", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "nodes", "m1", "m2", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		return out == "m1 True\nm2 True\n", out
	})
	if _, errOut, err := s.kubectl(t, fmt.Sprintf(lbPoolWeb, addr), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitReady(t, ns, "web")
	eventually(t, 30*time.Second, "the client machine reaching web at "+addr+":8081", func() (bool, string) {
		got, err := httpGetFrom(client.ns, "http://"+addr+":8081/hostname")
		return err == nil && got == "web", fmt.Sprintf("%q %v", got, err)
	})
	// A node that has not yet seen the other's overlay annotation announces alone for a
	// moment; the choice then settles on m1.
	eventually(t, 30*time.Second, addr+" held by m1 alone", func() (bool, string) {
		h1, h2 := holds(t, m1, addr), holds(t, m2, addr)
		return h1 && !h2, fmt.Sprintf("m1 %v, m2 %v", h1, h2)
	})
	// m1 cut off the API server but not the LAN: its caches still say it is chosen, but
	// it releases the address once it has missed two lease renewals, before the cluster
	// takes it for gone (grace period 40 s) and m2 announces: never both at once.
	restore := cutFromAPI(t, m1)
	cut := time.Now()
	var m1Released, m2Took time.Duration
	for m2Took == 0 {
		h1, h2 := holds(t, m1, addr), holds(t, m2, addr)
		if h1 && h2 {
			t.Fatalf("%s held by m1 and m2 at once, %s after m1 was cut off the API server", addr, time.Since(cut).Round(100*time.Millisecond))
		}
		if !h1 && m1Released == 0 {
			m1Released = time.Since(cut)
		}
		if h2 {
			m2Took = time.Since(cut)
		}
		if time.Since(cut) > 90*time.Second {
			t.Fatalf("90 s after m1 was cut off the API server: m1 holds %s %v, m2 %v", addr, h1, h2)
		}
		time.Sleep(200 * time.Millisecond)
	}
	eventually(t, 30*time.Second, "the client machine reaching web at "+addr+":8081 through m2 while m1 is cut off", func() (bool, string) {
		got, err := httpGetFrom(client.ns, "http://"+addr+":8081/hostname")
		return err == nil && got == "web" && holds(t, m2, addr) && !holds(t, m1, addr), fmt.Sprintf("%q %v", got, err)
	})
	t.Logf("m1 cut off the API server: it released %s after %s, m2 took it after %s (grace period 40s)", addr,
		m1Released.Round(100*time.Millisecond), m2Took.Round(100*time.Millisecond))
	// Back in contact, m1 is Ready and chosen again: it takes the address back.
	restore()
	eventually(t, 90*time.Second, addr+" held by m1 alone after its contact with the API server returned", func() (bool, string) {
		h1, h2 := holds(t, m1, addr), holds(t, m2, addr)
		return h1 && !h2, fmt.Sprintf("m1 %v, m2 %v", h1, h2)
	})

	// m1's agent stops (releasing the address); once m1 is no longer Ready, m2 announces.
	start := time.Now()
	stopM1()
	eventually(t, 90*time.Second, "the client machine reaching web at "+addr+":8081 through m2", func() (bool, string) {
		got, err := httpGetFrom(client.ns, "http://"+addr+":8081/hostname")
		return err == nil && got == "web" && holds(t, m2, addr), fmt.Sprintf("%q %v", got, err)
	})
	t.Logf("failover: m1's agent stopped -> %s answering through m2 after %s (grace period 40s)", addr, time.Since(start).Round(100*time.Millisecond))
	if holds(t, m1, addr) {
		t.Errorf("m1 still holds %s after its agent stopped", addr)
	}
	// The Service turned NodePort: m2 releases the address; LoadBalancer again: m2
	// announces it again; deleted: nobody holds it.
	s.must(t, "patch", "svc", "web", "-n", ns, "--type=merge", "-p", `{"spec":{"type":"NodePort"}}`)
	eventually(t, 30*time.Second, "no machine holding "+addr+" of a NodePort Service", func() (bool, string) {
		return !holds(t, m1, addr) && !holds(t, m2, addr), ""
	})
	s.must(t, "patch", "svc", "web", "-n", ns, "--type=merge", "-p", `{"spec":{"type":"LoadBalancer"}}`)
	eventually(t, 30*time.Second, "m2 holding "+addr+" again", func() (bool, string) {
		return holds(t, m2, addr), ""
	})
	s.must(t, "delete", "svc", "web", "-n", ns)
	eventually(t, 30*time.Second, "no machine holding "+addr, func() (bool, string) {
		return !holds(t, m1, addr) && !holds(t, m2, addr), ""
	})
}

// cutFromAPI drops, in m's own namespace, m's packets to the API server of a cluster
// whose agents m runs (clusternet.DefaultAPIAddress:6443), leaving it on the LAN; the
// function it returns lets them through again (also run when t ends).
func cutFromAPI(t *testing.T, m *machine) (restore func()) {
	t.Helper()
	const table = "e2e-api-cut"
	nft := func(script string) error {
		cmd := exec.Command("ip", "netns", "exec", m.ns, "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("nft in %s: %v %s", m.ns, err, out)
		}
		return nil
	}
	if err := nft(fmt.Sprintf("add table ip %s\nadd chain ip %s out { type filter hook output priority 0 ; }\nadd rule ip %s out ip daddr %s tcp dport 6443 drop\n",
		table, table, table, clusternet.DefaultAPIAddress)); err != nil {
		t.Fatal(err)
	}
	done := false
	restore = func() {
		if !done {
			done = true
			if err := nft("delete table ip " + table + "\n"); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(restore)
	return restore
}
