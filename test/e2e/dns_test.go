package e2e

import (
	"fmt"
	"net"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tranche/tranche/internal/netns"
)

// fakeUpstreamDNS is the resolver the local cluster's DNS relay forwards to (tranche up
// --upstream-dns), on loopback in the test process, so no test ever reaches the host's
// resolvers. It knows api.example.com and answers NXDOMAIN for everything else.
var fakeUpstreamDNS = sync.OnceValues(func() (string, error) {
	// The kernel picks a free UDP port, which another process may hold for TCP: try
	// again with another then.
	var pc net.PacketConn
	var ln net.Listener
	var err error
	for range 20 {
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			return "", err
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		return "", fmt.Errorf("no loopback port free for both UDP and TCP: %w", err)
	}
	records := map[string]string{
		"api.example.com. A":    "api.example.com. 60 IN A 192.0.2.10",
		"api.example.com. AAAA": "api.example.com. 60 IN AAAA 2001:db8::10",
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		q := r.Question[0]
		if line, ok := records[strings.ToLower(q.Name)+" "+dns.TypeToString[q.Qtype]]; ok {
			rr, _ := dns.NewRR(line)
			m.Answer = []dns.RR{rr}
		} else {
			soa, _ := dns.NewRR("example. 60 IN SOA ns.example. h.example. 1 2 3 4 60")
			m.Ns = []dns.RR{soa}
			if !strings.HasPrefix(strings.ToLower(q.Name), "api.example.com.") {
				m.Rcode = dns.RcodeNameError
			}
		}
		_ = w.WriteMsg(m)
	})
	go func() { _ = (&dns.Server{PacketConn: pc, Handler: h}).ActivateAndServe() }()
	go func() { _ = (&dns.Server{Listener: ln, Handler: h}).ActivateAndServe() }()
	return pc.LocalAddr().String(), nil
})

const dnsObjects = `apiVersion: v1
kind: Service
metadata: {name: api-svc}
spec:
  selector: {app: api}
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.k8s.io/e2e-test-images/agnhost:2.52
        args: ["netexec", "--http-port=8080"]
        readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: ext}
spec:
  type: ExternalName
  externalName: api.example.com
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  nodeName: %[1]s
  containers:
  - {name: c, image: busybox, command: ["sleep", "3600"]}
---
apiVersion: v1
kind: Pod
metadata: {name: client-far}
spec:
  nodeName: %[2]s
  containers:
  - {name: c, image: busybox, command: ["sleep", "3600"]}
---
apiVersion: v1
kind: Pod
metadata: {name: client-own-dnsconfig}
spec:
  nodeName: %[1]s
  dnsConfig:
    options: [{name: ndots, value: "5"}]
  containers:
  - {name: c, image: busybox, command: ["sleep", "3600"]}
`

// TestClusterDNS: from a busybox pod of `tranche up`, with the resolv.conf the agent
// wrote, the records seeds 001 and 003 rely on resolve through kube-dns at 10.96.0.10.
func TestClusterDNS(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	// The clients run on a node with a DNS replica, where a query may reach the replica
	// beside it (routed through the node, so it keeps the pod's address that autopath
	// needs), except client-far, on a node without one.
	dnsNodes := strings.Fields(s.must(t, "get", "pods", "-n", "kube-system", "-l", "k8s-app=kube-dns", "-o", "jsonpath={.items[*].spec.nodeName}"))
	nearNode, farNode := "", ""
	for _, n := range strings.Fields(s.must(t, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}")) {
		if slices.Contains(dnsNodes, n) {
			nearNode = n
		} else {
			farNode = n
		}
	}
	if nearNode == "" || farNode == "" {
		t.Fatalf("want a node with a DNS replica and one without (replicas on %q)", dnsNodes)
	}
	if _, errOut, err := s.kubectl(t, fmt.Sprintf(apiLikePod, "api-0")+"---\n"+fmt.Sprintf(dnsObjects, nearNode, farNode), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	s.must(t, "create", "namespace", "signalements")
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "namespace", "signalements", "--wait=false") })
	if _, errOut, err := s.kubectl(t, "", "apply", "-f", "testdata/001-signalements-svc.yaml"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	for _, p := range []string{"api-0", "web-0", "web-1", "client", "client-far", "client-own-dnsconfig"} {
		c.waitReady(t, ns, p)
	}
	apiIP := s.must(t, "get", "svc", "api-svc", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
	sigIP := s.must(t, "get", "svc", "signalements", "-n", "signalements", "-o", "jsonpath={.spec.clusterIP}")
	podIP := map[string]string{}
	for _, p := range []string{"api-0", "web-0", "web-1"} {
		podIP[p] = s.must(t, "get", "pod", p, "-n", ns, "-o", "jsonpath={.status.podIP}")
	}
	client := c.podNS(t, ns, "client")
	inPod := func(args ...string) string {
		t.Helper()
		return execInPod(t, s, ns, "client", args...)
	}

	t.Run("resolv.conf is seed 001's", func(t *testing.T) {
		want := "search " + ns + ".svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
		// The file alone: what kubectl itself logs goes to its stderr.
		got, errOut, err := s.kubectl(t, "", "exec", "client", "-n", ns, "--", "cat", "/etc/resolv.conf")
		if err != nil || got != want {
			t.Fatalf("resolv.conf (err %v, stderr %q):\n%s\nwant:\n%s", err, errOut, got, want)
		}
	})
	t.Run("short name gives the ClusterIP, not a pod address", func(t *testing.T) {
		eventually(t, 20*time.Second, "nslookup api-svc", func() (bool, string) {
			out := inPod("busybox", "nslookup", "api-svc")
			return slices.Equal(addresses(out), []string{apiIP}), out
		})
	})
	t.Run("namespace-qualified name from another namespace; the short name does not resolve", func(t *testing.T) {
		if _, got, trace := stubWalk(t, client, ns, "signalements.signalements"); !slices.Equal(got, []string{sigIP}) {
			t.Fatalf("signalements.signalements from namespace %s: %v, want %s\n%s", ns, got, sigIP, trace)
		}
		if _, got, trace := stubWalk(t, client, ns, "signalements"); len(got) != 0 {
			t.Fatalf("signalements from namespace %s resolved: %v\n%s", ns, got, trace)
		}
		if out := inPod("busybox", "nslookup", "signalements"); len(addresses(out)) != 0 {
			t.Fatalf("nslookup signalements from namespace %s resolved:\n%s", ns, out)
		}
	})
	t.Run("SRV of a named port", func(t *testing.T) {
		out := inPod("busybox", "nslookup", "-type=SRV", "_http._tcp.api-svc."+ns+".svc.cluster.local")
		if !strings.Contains(out, "0 100 80 api-svc."+ns+".svc.cluster.local") {
			t.Fatalf("SRV _http._tcp.api-svc: want port 80:\n%s", out)
		}
	})
	t.Run("headless Service gives the ready pods; StatefulSet pods by name", func(t *testing.T) {
		want := []string{podIP["web-0"], podIP["web-1"]}
		slices.Sort(want)
		if out := inPod("busybox", "nslookup", "web"); !slices.Equal(addresses(out), want) {
			t.Fatalf("nslookup web: want %v\n%s", want, out)
		}
		if _, got, trace := stubWalk(t, client, ns, "web-1.web"); !slices.Equal(got, []string{podIP["web-1"]}) {
			t.Fatalf("web-1.web: %v, want %s\n%s", got, podIP["web-1"], trace)
		}
	})
	t.Run("ExternalName is a CNAME", func(t *testing.T) {
		out := inPod("busybox", "nslookup", "-type=A", "ext."+ns+".svc.cluster.local.")
		if !strings.Contains(out, "canonical name = api.example.com") || !slices.Contains(addresses(out), "192.0.2.10") {
			t.Fatalf("nslookup ext: want CNAME api.example.com and its address from the upstream:\n%s", out)
		}
	})
	t.Run("PTR of a ClusterIP", func(t *testing.T) {
		out := inPod("busybox", "nslookup", apiIP)
		if !strings.Contains(out, "name = api-svc."+ns+".svc.cluster.local") {
			t.Fatalf("nslookup %s:\n%s", apiIP, out)
		}
	})
	t.Run("parallel A and AAAA from one socket both answered (conntrack race)", func(t *testing.T) {
		// glibc sends A and AAAA at once from one socket; where both packets race to
		// create the conntrack entry and get different DNAT choices, one can be dropped
		// and the resolver stalls 5 s. 200 such pairs through 10.96.0.10 must all come back.
		lost := 0
		for i := range 200 {
			conn, err := netns.Dial(client, "udp", "10.96.0.10:53", 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			dc := &dns.Conn{Conn: conn}
			a, aaaa := new(dns.Msg), new(dns.Msg)
			a.SetQuestion("api-svc."+ns+".svc.cluster.local.", dns.TypeA)
			aaaa.SetQuestion("api-svc."+ns+".svc.cluster.local.", dns.TypeAAAA)
			a.Id, aaaa.Id = uint16(2*i+1), uint16(2*i+2)
			if dc.WriteMsg(a) != nil || dc.WriteMsg(aaaa) != nil {
				t.Fatal("write")
			}
			_ = conn.SetReadDeadline(time.Now().Add(time.Second))
			for range 2 {
				if _, err := dc.ReadMsg(); err != nil {
					lost++
					break
				}
			}
			conn.Close()
		}
		if lost > 0 {
			t.Fatalf("%d of 200 A/AAAA pairs lost an answer (a resolver would stall 5 s each time)", lost)
		}
	})
	t.Run("ndots:5 walk for an external name: queries before and after acceleration", func(t *testing.T) {
		// The walk a stub resolver does (search domains in order, A and AAAA for each,
		// stop at the first answer), sent from inside each pod's network namespace.
		plain, _, plainTrace := stubWalk(t, c.podNS(t, ns, "client-own-dnsconfig"), ns, "api.example.com")
		if plain != 8 {
			t.Fatalf("queries without acceleration: %d, want 8\n%s", plain, plainTrace)
		}
		// Each query is a new flow that the proxy sends to any replica. Six walks from
		// beside a replica send all their first two queries elsewhere with probability
		// at most 4^-6, so a source address lost on the way to the replica beside the
		// client would show.
		for _, cl := range []struct {
			pod   string
			walks int
		}{{"client", 6}, {"client-far", 2}} {
			from := c.podNS(t, ns, cl.pod)
			for range cl.walks {
				fast, got, trace := stubWalk(t, from, ns, "api.example.com")
				if !slices.Equal(got, []string{"192.0.2.10", "2001:db8::10"}) {
					t.Fatalf("api.example.com from %s: %v, want 192.0.2.10 and 2001:db8::10\n%s", cl.pod, got, trace)
				}
				if fast != 2 {
					t.Fatalf("queries from %s with acceleration: %d, want 2\n%s", cl.pod, fast, trace)
				}
			}
		}
		t.Logf("queries for api.example.com with ndots:5: %d from a pod with its own dnsConfig, 2 with acceleration beside a DNS replica (%s) and away from one (%s)", plain, nearNode, farNode)
	})
}

// The main goroutine keeps the main thread: internal/netns switches namespaces on
// locked threads that the runtime then ends, but the main thread cannot end, so a
// switch that ran there would leave this test binary inside a pod's network namespace
// for good (found in `ip netns pids`, and killed with the pod's processes).
func init() { runtime.LockOSThread() }

// execInPod runs a command in a pod's (first) container with kubectl exec, so with the
// container's own programs (the image's busybox applets, not the host's) and the pod's
// /etc/resolv.conf, and returns what it wrote on stdout then stderr.
func execInPod(t *testing.T, s *server, ns, pod string, args ...string) string {
	t.Helper()
	out, errOut, _ := s.kubectl(t, "", append([]string{"exec", pod, "-n", ns, "--"}, args...)...)
	return out + errOut
}

var answerAddr = regexp.MustCompile(`(?m)^Address: (\S+)$`)

// addresses are the distinct answer addresses busybox nslookup printed (its server
// line is "Address:\t..." with a tab and is left out), sorted.
func addresses(out string) []string {
	var got []string
	for _, m := range answerAddr.FindAllStringSubmatch(out, -1) {
		if !slices.Contains(got, m[1]) {
			got = append(got, m[1])
		}
	}
	slices.Sort(got)
	return got
}

// stubWalk resolves name as a resolver with seed 001's resolv.conf does (glibc's
// walk: each search domain in order, then the name itself, A and AAAA for each, stop
// at the first answer), from the pod's network namespace to 10.96.0.10. It returns
// how many queries it sent, the addresses it got and what each query got. (busybox nslookup, which applies
// the search list only to names without dots, cannot show this.)
func stubWalk(t *testing.T, podNS, ns, name string) (int, []string, string) {
	t.Helper()
	var trace []string
	search := []string{ns + ".svc.cluster.local.", "svc.cluster.local.", "cluster.local.", ""}
	sent := 0
	for _, s := range search {
		var addrs []string
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
			sent++
			conn, err := netns.Dial(podNS, "udp", "10.96.0.10:53", 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
			dc := &dns.Conn{Conn: conn}
			q := new(dns.Msg)
			q.SetQuestion(name+"."+s, qt)
			if err := dc.WriteMsg(q); err != nil {
				t.Fatal(err)
			}
			resp, err := dc.ReadMsg()
			conn.Close()
			if err != nil {
				t.Fatalf("%s %s from %s: %v", q.Question[0].Name, dns.TypeToString[qt], podNS, err)
			}
			trace = append(trace, fmt.Sprintf("%s %s: %s %v", q.Question[0].Name, dns.TypeToString[qt], dns.RcodeToString[resp.Rcode], resp.Answer))
			for _, rr := range resp.Answer {
				switch a := rr.(type) {
				case *dns.A:
					addrs = append(addrs, a.A.String())
				case *dns.AAAA:
					addrs = append(addrs, a.AAAA.String())
				}
			}
		}
		if len(addrs) > 0 {
			slices.Sort(addrs)
			return sent, addrs, strings.Join(trace, "\n")
		}
	}
	return sent, nil, strings.Join(trace, "\n")
}
