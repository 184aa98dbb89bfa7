package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/tranche/tranche/internal/netns"
)

// The NetworkPolicy matrix, in the shape of upstream's (test/e2e/network/netpol):
// namespaces x, y, z, each with pods a, b, c that serve TCP 80, TCP 81 and UDP 80
// with agnhost porter, and every pod probing every other with agnhost connect. A case
// is a set of policies and the truth table it must produce; loopback (a pod to itself)
// is left out, as upstream ignores it.

// npPort is one of the matrix's served ports.
type npPort struct {
	proto string // tcp, udp
	port  int
}

func (p npPort) String() string { return p.proto + "/" + strconv.Itoa(p.port) }

var (
	npNamespaces = []string{"x", "y", "z"}
	npPodNames   = []string{"a", "b", "c"}
	tcp80        = npPort{"tcp", 80}
	tcp81        = npPort{"tcp", 81}
	udp80        = npPort{"udp", 80}
	npPorts      = []npPort{tcp80, tcp81, udp80}
)

// npPeer is one matrix pod.
type npPeer struct {
	ns, pod string
	ip      string
	netns   string // the pod's network namespace on the host
}

func (p npPeer) String() string { return p.ns + "/" + p.pod }

// npWant says whether from may reach to on port.
type npWant func(from, to npPeer, port npPort) bool

func npAllAllowed(npPeer, npPeer, npPort) bool { return true }

// npProbe is one connection attempt of the matrix.
type npProbe struct {
	from, to int // indexes in npMatrix.peers
	port     npPort
}

// npMatrix runs probes between the matrix pods from their network namespaces.
type npMatrix struct {
	c       *localCluster
	peers   []npPeer
	agnhost string // a link named agnhost to the tranche binary (it runs agnhost by argv[0])
}

// npMatrixManifest is the namespaces (labelled ns=<name>), pods and the Service of the
// matrix, the pods alternating between nodes. Ports are named as upstream's matrix
// names them (serve-80-tcp ...) for the named-port case; porter answers with the pod's
// own name so that a probe through a Service tells which pod it reached. y/b and y/c
// carry svc=web, the selector of Service y/web.
func npMatrixManifest(nodes []string) string {
	var b strings.Builder
	i := 0
	for _, ns := range npNamespaces {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %q\n  labels: {ns: %q}\n---\n", ns, ns)
		for _, pod := range npPodNames {
			extra := ""
			if ns == "y" && pod != "a" {
				extra = ", svc: web"
			}
			fmt.Fprintf(&b, `apiVersion: v1
kind: Pod
metadata:
  name: %[2]s
  namespace: "%[1]s"
  labels: {pod: %[2]s%[3]s}
spec:
  nodeName: %[4]s
  terminationGracePeriodSeconds: 1
  containers:
  - name: agnhost
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    command: ["/agnhost", "porter"]
    env:
    - {name: SERVE_TCP_PORT_80, value: %[1]s/%[2]s}
    - {name: SERVE_TCP_PORT_81, value: %[1]s/%[2]s}
    - {name: SERVE_UDP_PORT_80, value: %[1]s/%[2]s}
    ports:
    - {name: serve-80-tcp, containerPort: 80, protocol: TCP}
    - {name: serve-81-tcp, containerPort: 81, protocol: TCP}
    - {name: serve-80-udp, containerPort: 80, protocol: UDP}
    readinessProbe:
      tcpSocket: {port: 80}
      periodSeconds: 1
      failureThreshold: 1
---
`, ns, pod, extra, nodes[i%len(nodes)])
			i++
		}
	}
	b.WriteString(`apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: "y"
spec:
  selector: {svc: web}
  ports:
  - {name: http, port: 80, targetPort: 80, protocol: TCP}
`)
	return b.String()
}

// startMatrix creates the matrix on c and waits for its pods to be Ready.
func startMatrix(t *testing.T, c *localCluster) *npMatrix {
	t.Helper()
	s := c.srv
	nodes := strings.Fields(s.must(t, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"))
	if len(nodes) < 2 {
		t.Fatalf("the matrix wants 2 nodes, the cluster has %v", nodes)
	}
	if out, errOut, err := s.kubectl(t, npMatrixManifest(nodes), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply the matrix: %v\n%s%s", err, out, errOut)
	}
	dir := t.TempDir()
	m := &npMatrix{c: c, agnhost: filepath.Join(dir, "agnhost")}
	if err := os.Symlink(trancheBin, m.agnhost); err != nil {
		t.Fatal(err)
	}
	for _, ns := range npNamespaces {
		for _, pod := range npPodNames {
			c.waitReady(t, ns, pod)
			m.peers = append(m.peers, npPeer{ns: ns, pod: pod,
				ip:    s.must(t, "get", "pod", pod, "-n", ns, "-o", "jsonpath={.status.podIP}"),
				netns: c.podNS(t, ns, pod)})
		}
	}
	return m
}

// peer returns the matrix pod ns/pod.
func (m *npMatrix) peer(name string) npPeer {
	for _, p := range m.peers {
		if p.String() == name {
			return p
		}
	}
	panic("no matrix pod " + name)
}

// inPod runs a shell script in the network namespace of p (host programs, the pod's
// address) and returns its output.
func (m *npMatrix) inPod(p npPeer, script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", p.netns, "sh", "-c", script).CombinedOutput()
	return string(out), err
}

// probe runs probes, all at once, each from its source pod's network namespace as
// agnhost connect --timeout 1s does it: a TCP connection established, or for UDP a
// "hostname" datagram answered (porter echoes its value), within the second. (One
// agnhost process per probe costs ~10 s of the 2 cores per matrix and starves the
// UDP probes' second; a socket opened in the pod's namespace by this process is the
// same packet on the wire.) It returns whether each connected.
func (m *npMatrix) probe(probes []npProbe) []bool {
	got := make([]bool, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = npConnect(m.peers[p.from].netns, p.port.proto, net.JoinHostPort(m.peers[p.to].ip, strconv.Itoa(p.port.port)))
		}()
	}
	wg.Wait()
	return got
}

// npConnect is one probe from the network namespace podNS.
func npConnect(podNS, proto, addr string) bool {
	conn, err := netns.Dial(podNS, proto, addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	if proto == "tcp" {
		return true
	}
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("hostname\n")); err != nil {
		return false
	}
	n, err := conn.Read(make([]byte, 1024))
	return err == nil && n > 0
}

// allProbes is the whole matrix: every pod to every other on every port.
func (m *npMatrix) allProbes() []npProbe {
	var probes []npProbe
	for from := range m.peers {
		for to := range m.peers {
			if from == to {
				continue
			}
			for _, port := range npPorts {
				probes = append(probes, npProbe{from, to, port})
			}
		}
	}
	return probes
}

// expect probes the whole matrix until it matches want, for up to 30 s (policies
// take a moment to reach every node), and fails printing the expected and observed
// truth tables of each port when it does not. It returns the probes want denies.
func (m *npMatrix) expect(t *testing.T, what string, want npWant) []npProbe {
	t.Helper()
	probes := m.allProbes()
	return m.expectOn(t, what, probes, want)
}

// expectOn is expect on the given probes only.
func (m *npMatrix) expectOn(t *testing.T, what string, probes []npProbe, want npWant) []npProbe {
	t.Helper()
	wanted := make([]bool, len(probes))
	var denied []npProbe
	for i, p := range probes {
		wanted[i] = want(m.peers[p.from], m.peers[p.to], p.port)
		if !wanted[i] {
			denied = append(denied, p)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		start := time.Now()
		got := m.probe(probes)
		t.Logf("%s: %d probes in %v", what, len(probes), time.Since(start).Round(time.Millisecond))
		wrong := 0
		for i := range probes {
			if got[i] != wanted[i] {
				wrong++
			}
		}
		if wrong == 0 {
			return denied
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d probes differ from the truth table (. allowed, X denied, ? not probed)\n%s",
				what, wrong, len(probes), m.tables(probes, wanted, got))
		}
	}
}

// tables prints, for each port, the expected and the observed truth tables side by
// side, upstream's grid: rows are sources, columns destinations.
func (m *npMatrix) tables(probes []npProbe, wanted, got []bool) string {
	var b strings.Builder
	for _, port := range npPorts {
		exp, obs := map[[2]int]bool{}, map[[2]int]bool{}
		for i, p := range probes {
			if p.port == port {
				exp[[2]int{p.from, p.to}], obs[[2]int{p.from, p.to}] = wanted[i], got[i]
			}
		}
		if len(exp) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
		fmt.Fprintf(tw, "%s expected", port)
		for range m.peers {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, "\t|\tobserved\n-")
		header := ""
		for _, p := range m.peers {
			header += "\t" + p.String()
		}
		fmt.Fprintf(tw, "%s\t|\t-%s\n", header, header)
		for from, fp := range m.peers {
			row := func(vals map[[2]int]bool) string {
				s := fp.String()
				for to := range m.peers {
					v, ok := vals[[2]int{from, to}]
					switch {
					case !ok:
						s += "\t?"
					case v:
						s += "\t."
					default:
						s += "\tX"
					}
				}
				return s
			}
			fmt.Fprintf(tw, "%s\t|\t%s\n", row(exp), row(obs))
		}
		tw.Flush()
		b.WriteString("\n")
	}
	return b.String()
}

// reset deletes every policy and waits until the probes the last case denied connect
// again: deleting a policy reopens what it closed.
func (m *npMatrix) reset(t *testing.T, denied []npProbe) {
	t.Helper()
	m.c.srv.must(t, "delete", "networkpolicies", "--all", "--all-namespaces", "--wait=false")
	if len(denied) > 0 {
		m.expectOn(t, "after deleting the policies", denied, npAllAllowed)
	}
}

// agnhostConnect runs upstream's probe, agnhost connect, from from's network
// namespace to to on port.
func (m *npMatrix) agnhostConnect(from, to npPeer, port npPort) (string, error) {
	return m.inPod(from, fmt.Sprintf("%s connect %s:%d --timeout 1s --protocol %s", m.agnhost, to.ip, port.port, port.proto))
}

// lookup resolves kubernetes.default through the cluster DNS from p and returns the
// answer (dig's short form) or the error.
func (m *npMatrix) lookup(p npPeer) (string, error) {
	out, err := m.inPod(p, "dig +short +time=1 +tries=2 @10.96.0.10 kubernetes.default.svc.cluster.local")
	return strings.TrimSpace(out), err
}

// npIn says whether p is in one of the namespace/pod names given ("x" a namespace,
// "x/a" a pod).
func npIn(p npPeer, names ...string) bool {
	for _, n := range names {
		if n == p.ns || n == p.String() {
			return true
		}
	}
	return false
}

// TestNetworkPolicyMatrix: upstream's policy matrix on a 2-node cluster: each case
// applies its policies, waits until every probe of the matrix gives the case's truth
// table, then deletes them and waits until what they denied is allowed again.
func TestNetworkPolicyMatrix(t *testing.T) {
	c := upOwn(t, "tnp", 2)
	m := startMatrix(t, c)
	s := c.srv
	applyPolicies := func(t *testing.T, manifest string) {
		t.Helper()
		if out, errOut, err := s.kubectl(t, manifest, "apply", "-f", "-"); err != nil {
			t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
		}
	}

	cases := []struct {
		name string
		run  func(t *testing.T) []npProbe // returns the probes it left denied
	}{
		{"no policy: everything allowed", func(t *testing.T) []npProbe {
			if out, err := m.agnhostConnect(m.peer("x/a"), m.peer("y/b"), tcp80); err != nil {
				t.Errorf("agnhost connect x/a -> y/b without a policy: %v %s", err, out)
			}
			return m.expect(t, "no policy", npAllAllowed)
		}},
		{"default deny ingress; the readiness probe keeps the pods Ready", func(t *testing.T) []npProbe {
			applied := time.Now()
			applyPolicies(t, npPolicy("x", "deny-ingress", `podSelector: {}
  policyTypes: [Ingress]`))
			denied := m.expect(t, "default deny ingress in x", func(_, to npPeer, _ npPort) bool { return !npIn(to, "x") })
			// The pods' readiness probes (1 s period, 1 failure) come from their
			// nodes: while the policy keeps holding for three rounds of a denied
			// probe (a second each), they must keep x's pods Ready, never flipping
			// since the policy was applied.
			for range 3 {
				m.expectOn(t, "default deny ingress still holding", denied[:1], npAllDenied)
			}
			for _, pod := range npPodNames {
				out := s.must(t, "get", "pod", pod, "-n", "x", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastTransitionTime}`)
				status, at, _ := strings.Cut(out, " ")
				when, err := time.Parse(time.RFC3339, at)
				if status != "True" || err != nil || when.After(applied) {
					t.Errorf("x/%s under default deny ingress: Ready %s since %s (policy applied at %s)", pod, status, at, applied.UTC().Format(time.RFC3339))
				}
			}
			return denied
		}},
		{"default deny egress", func(t *testing.T) []npProbe {
			applyPolicies(t, npPolicy("x", "deny-egress", `podSelector: {}
  policyTypes: [Egress]`))
			denied := m.expect(t, "default deny egress in x", func(from, _ npPeer, _ npPort) bool { return !npIn(from, "x") })
			if out, err := m.lookup(m.peer("x/a")); err == nil && out == "10.96.0.1" {
				t.Errorf("x/a resolved a name under default deny egress: %s", out)
			}
			return denied
		}},
		{"allow DNS egress only: a lookup works, a connection does not", func(t *testing.T) []npProbe {
			applyPolicies(t, npPolicy("x", "dns-only", `podSelector: {}
  policyTypes: [Egress]
  egress:
  - ports:
    - {protocol: UDP, port: 53}
    - {protocol: TCP, port: 53}`))
			denied := m.expect(t, "DNS-only egress in x", func(from, _ npPeer, _ npPort) bool { return !npIn(from, "x") })
			if out, err := m.agnhostConnect(m.peer("x/a"), m.peer("y/b"), tcp80); err == nil {
				t.Errorf("agnhost connect x/a -> y/b under DNS-only egress succeeded: %s", out)
			}
			var out string
			eventually(t, 10*time.Second, "x/a resolves kubernetes.default", func() (bool, string) {
				var err error
				out, err = m.lookup(m.peer("x/a"))
				return err == nil && out == "10.96.0.1", fmt.Sprintf("%v %q", err, out)
			})
			return denied
		}},
		{"allow from a namespace", func(t *testing.T) []npProbe {
			applyPolicies(t, npPolicy("x", "from-y", `podSelector: {matchLabels: {pod: a}}
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {ns: "y"}}`))
			return m.expect(t, "x/a from namespace y only", func(from, to npPeer, _ npPort) bool {
				return to.String() != "x/a" || npIn(from, "y")
			})
		}},
		{"allow from a pod in a namespace, selectors in one peer", func(t *testing.T) []npProbe {
			applyPolicies(t, npPolicy("x", "from-y-b", `podSelector: {matchLabels: {pod: a}}
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {ns: "y"}}
      podSelector: {matchLabels: {pod: b}}`))
			return m.expect(t, "x/a from y/b only", func(from, to npPeer, _ npPort) bool {
				return to.String() != "x/a" || npIn(from, "y/b")
			})
		}},
		{"allow from a namespace or a pod, selectors as two peers", func(t *testing.T) []npProbe {
			applyPolicies(t, npPolicy("x", "from-y-or-b", `podSelector: {matchLabels: {pod: a}}
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {ns: "y"}}
    - podSelector: {matchLabels: {pod: b}}`))
			// The lone podSelector picks pods of the policy's own namespace: x/b.
			return m.expect(t, "x/a from y/* and x/b", func(from, to npPeer, _ npPort) bool {
				return to.String() != "x/a" || npIn(from, "y", "x/b")
			})
		}},
		{"ipBlock with except", func(t *testing.T) []npProbe {
			applyPolicies(t, npPolicy("x", "ipblock", fmt.Sprintf(`podSelector: {matchLabels: {pod: a}}
  ingress:
  - from:
    - ipBlock: {cidr: 10.244.0.0/16, except: [%s/32]}`, m.peer("y/b").ip)))
			return m.expect(t, "x/a from the pod CIDR except y/b", func(from, to npPeer, _ npPort) bool {
				return to.String() != "x/a" || !npIn(from, "y/b")
			})
		}},
		{"named port", func(t *testing.T) []npProbe {
			applyPolicies(t, npPolicy("x", "named-port", `podSelector: {matchLabels: {pod: a}}
  ingress:
  - ports:
    - {port: serve-81-tcp}`))
			return m.expect(t, "x/a on serve-81-tcp only", func(_, to npPeer, port npPort) bool {
				return to.String() != "x/a" || port == tcp81
			})
		}},
		{"endPort range", func(t *testing.T) []npProbe {
			applyPolicies(t, npPolicy("x", "end-port", `podSelector: {matchLabels: {pod: a}}
  ingress:
  - ports:
    - {protocol: TCP, port: 79, endPort: 80}`))
			return m.expect(t, "x/a on TCP 79-80 only", func(_, to npPeer, port npPort) bool {
				return to.String() != "x/a" || port == tcp80
			})
		}},
		{"policies added together", func(t *testing.T) []npProbe {
			applyPolicies(t, npPolicy("x", "from-z", `podSelector: {matchLabels: {pod: a}}
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {ns: "z"}}`)+"---\n"+npPolicy("x", "from-x-b-on-81", `podSelector: {matchLabels: {pod: a}}
  ingress:
  - from:
    - podSelector: {matchLabels: {pod: b}}
    ports:
    - {protocol: TCP, port: 81}`))
			return m.expect(t, "x/a from z/*, and from x/b on TCP 81", func(from, to npPeer, port npPort) bool {
				return to.String() != "x/a" || npIn(from, "z") || (npIn(from, "x/b") && port == tcp81)
			})
		}},
		{"a pod relabelled moves in and out", func(t *testing.T) []npProbe {
			applyPolicies(t, npPolicy("x", "from-clients", `podSelector: {matchLabels: {pod: a}}
  ingress:
  - from:
    - namespaceSelector: {}
      podSelector: {matchLabels: {role: client}}`))
			m.expect(t, "x/a from no client yet", func(_, to npPeer, _ npPort) bool { return to.String() != "x/a" })
			s.must(t, "label", "pod", "c", "-n", "z", "role=client")
			t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "label", "pod", "c", "-n", "z", "role-") })
			m.expect(t, "x/a from z/c once labelled", func(from, to npPeer, _ npPort) bool {
				return to.String() != "x/a" || npIn(from, "z/c")
			})
			s.must(t, "label", "pod", "c", "-n", "z", "role-")
			return m.expect(t, "x/a from no client after the label is removed", func(_, to npPeer, _ npPort) bool { return to.String() != "x/a" })
		}},
		{"a ClusterIP connection is judged by the pod it reaches", func(t *testing.T) []npProbe {
			applyPolicies(t, npPolicy("y", "deny-b", `podSelector: {matchLabels: {pod: b}}
  policyTypes: [Ingress]`)+"---\n"+npPolicy("y", "allow-c", `podSelector: {matchLabels: {pod: c}}
  ingress:
  - {}`))
			denied := m.expect(t, "y/b closed, y/c open", func(_, to npPeer, _ npPort) bool { return to.String() != "y/b" })
			cip := s.must(t, "get", "service", "web", "-n", "y", "-o", "jsonpath={.spec.clusterIP}")
			var script strings.Builder
			for range 20 {
				fmt.Fprintf(&script, "(r=$(curl -s --max-time 1 http://%s/) && echo \"$r\" || echo FAILED) &\n", cip)
			}
			script.WriteString("wait\n")
			out, _ := m.inPod(m.peer("x/a"), script.String())
			answers := strings.Fields(out)
			reached, failed := 0, 0
			for _, a := range answers {
				switch a {
				case "y/c":
					reached++
				case "FAILED":
					failed++
				default:
					t.Errorf("a connection through %s reached %q: only y/c may answer", cip, a)
				}
			}
			// 20 connections spread at random over the two pods: y/b's share
			// fails (one in 2^20 runs gives it none), y/c's succeeds.
			if reached == 0 || failed == 0 || reached+failed != 20 {
				t.Errorf("20 connections through %s: %d reached y/c, %d failed; want some of each:\n%s", cip, reached, failed, out)
			}
			return denied
		}},
		{"the bitnami nginx chart's policy does what its comments say", func(t *testing.T) []npProbe {
			if out, errOut, err := s.kubectl(t, "", "apply", "-n", "y", "-f", "testdata/netpol-bitnami-nginx.yaml"); err != nil {
				t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
			}
			s.must(t, "label", "pod", "a", "-n", "y", "app.kubernetes.io/name=nginx", "app.kubernetes.io/instance=web")
			s.must(t, "label", "pod", "b", "-n", "y", "web-nginx-client=true")
			s.must(t, "label", "pod", "c", "-n", "z", "web-nginx-client=true")
			t.Cleanup(func() {
				_, _, _ = s.kubectl(t, "", "label", "pod", "a", "-n", "y", "app.kubernetes.io/name-", "app.kubernetes.io/instance-")
				_, _, _ = s.kubectl(t, "", "label", "pod", "b", "-n", "y", "web-nginx-client-")
				_, _, _ = s.kubectl(t, "", "label", "pod", "c", "-n", "z", "web-nginx-client-")
			})
			// y/a stands for the nginx pod: clients labelled web-nginx-client of its
			// own namespace reach its http port only (z/c's label does not count
			// from another namespace); it reaches nothing but DNS.
			denied := m.expect(t, "y/a behind the bitnami policy", func(from, to npPeer, port npPort) bool {
				if from.String() == "y/a" {
					return false
				}
				return to.String() != "y/a" || (from.String() == "y/b" && port == tcp80)
			})
			eventually(t, 10*time.Second, "y/a resolves kubernetes.default", func() (bool, string) {
				out, err := m.lookup(m.peer("y/a"))
				return err == nil && out == "10.96.0.1", fmt.Sprintf("%v %q", err, out)
			})
			return denied
		}},
	}
	for _, tc := range cases {
		var denied []npProbe
		ran := false
		if ok := t.Run(tc.name, func(t *testing.T) { ran = true; denied = tc.run(t) }); !ran {
			continue // left out by -run
		} else if !ok {
			denied = m.allProbes() // the case failed before saying: check everything
		}
		m.reset(t, denied)
	}
}

func npAllDenied(npPeer, npPeer, npPort) bool { return false }

// npPolicy is a NetworkPolicy manifest with the given spec lines (indented by two).
func npPolicy(ns, name, spec string) string {
	return fmt.Sprintf("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: %s\n  namespace: %q\nspec:\n  %s\n", name, ns, spec)
}
