package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

const machinesLBWeb = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  nodeName: %s
` +
	webContainer +
	`---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  type: LoadBalancer
  selector: {app: web}
  ports:
  - port: 8081
    targetPort: 8080
`

// TestMachinesLoadBalancer: with --loadbalancer-pool nodes, a LoadBalancer Service on
// two machines (the ones labelled svccontroller.k3s.cattle.io/enablelb=true, as k3s's
// ServiceLB) gets both machines' addresses, and a third machine on the LAN, running
// nothing of the cluster, reaches the Service's pod (on m2) through either address,
// m1 forwarding across the overlay; a machine leaving Ready leaves the status.
func TestMachinesLoadBalancer(t *testing.T) {
	t.Parallel()
	c := upOwn(t, "mlb", 1, "--loadbalancer-pool=nodes", "--node-monitor-grace-period="+linkCutGrace)
	s := c.srv
	l := underlayLAN(c)
	m1 := l.addMachine(t, "m1", c.prefix+"m1", netip.MustParseAddr("10.240.0.121"))
	m2 := l.addMachine(t, "m2", c.prefix+"m2", netip.MustParseAddr("10.240.0.122"))
	client := l.addMachine(t, "client", c.prefix+"client", netip.MustParseAddr("10.240.0.129"))
	stopM1 := m1.startAgent(t, c, netip.MustParsePrefix("10.244.31.0/24"), "vxlan")
	m2.startAgent(t, c, netip.MustParsePrefix("10.244.32.0/24"), "vxlan")
	waitNodesReady(t, s, 90*time.Second, "m1", "m2")
	// The `tranche up` node is not on the machines' overlay: only the machines serve.
	s.must(t, "label", "node", "m1", "m2", "svccontroller.k3s.cattle.io/enablelb=true")
	ns := s.namespace(t)
	t.Cleanup(func() { s.kubectl(t, "", "delete", "pod", "web", "-n", ns, "--force", "--grace-period=0") })
	if _, errOut, err := s.kubectl(t, fmt.Sprintf(machinesLBWeb, "m2"), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitReady(t, ns, "web")
	// The cluster's ingress Service holds ports 80 and 443 on the nodes (as Traefik's on
	// k3s), hence web's 8081.
	ingress := func() string {
		out, _, _ := s.kubectl(t, "", "get", "svc", "web", "-n", ns, "-o",
			`jsonpath={range .status.loadBalancer.ingress[*]}{.ip}/{.ipMode} {end}`)
		return out
	}
	eventually(t, 30*time.Second, "web's status listing both machines' addresses", func() (bool, string) {
		got := ingress()
		return got == "10.240.0.121/VIP 10.240.0.122/VIP ", got
	})
	for _, addr := range []string{"10.240.0.121", "10.240.0.122"} {
		eventually(t, 30*time.Second, "the client machine reaching web at "+addr+":8081", func() (bool, string) {
			got, err := httpGetFrom(client.ns, "http://"+addr+":8081/hostname")
			return err == nil && got == "web", fmt.Sprintf("%q %v", got, err)
		})
	}
	// m1's agent stops: once its Node is Unknown, its address leaves the status.
	stopM1()
	eventually(t, 60*time.Second, "web's status listing m2's address alone", func() (bool, string) {
		got := ingress()
		return got == "10.240.0.122/VIP ", got
	})
}
