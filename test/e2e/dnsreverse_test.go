package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tranche/tranche/internal/netns"
)

const reverseClient = `apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  containers:
  - {name: c, image: busybox, command: ["sleep", "3600"]}
`

// TestDNSReverse: from a pod, the reverse names of the service and pod ranges are the
// cluster DNS's own: a ClusterIP's PTR, NXDOMAIN with the reverse zone's SOA for an
// address nobody holds (never sent to the upstream, which cannot know it), while the
// reverse name of an address outside the cluster still goes upstream.
func TestDNSReverse(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	if _, errOut, err := s.kubectl(t, reverseClient, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitReady(t, ns, "client")
	client := c.podNS(t, ns, "client")

	// Addresses at the far ends of the default ranges (10.96.0.0/12, 10.244.0.0/16),
	// checked to be free: ClusterIPs and node pod subnets are taken from the low end.
	taken := strings.Fields(s.must(t, "get", "services", "-A", "-o", "jsonpath={.items[*].spec.clusterIP}") + " " +
		s.must(t, "get", "pods", "-A", "-o", "jsonpath={.items[*].status.podIP}"))
	freeSvc, freePod := "10.111.255.254", "10.244.255.254"
	for _, a := range []string{freeSvc, freePod} {
		if slices.Contains(taken, a) {
			t.Fatalf("%s is in use (%v)", a, taken)
		}
	}

	cases := []struct {
		name, addr string
		rcode      int
		aa         bool
		soa        string // owner of the SOA in the authority section
		ptr        string
	}{
		{"the DNS Service's ClusterIP", "10.96.0.10", dns.RcodeSuccess, true, "", "kube-dns.kube-system.svc.cluster.local."},
		{"a free ClusterIP", freeSvc, dns.RcodeNameError, true, "111.10.in-addr.arpa.", ""},
		{"a free pod address", freePod, dns.RcodeNameError, true, "244.10.in-addr.arpa.", ""},
		// The test's fake upstream (dns_test.go) answers NXDOMAIN under example.
		{"an address outside the cluster goes upstream", "192.0.2.1", dns.RcodeNameError, false, "example.", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name, err := dns.ReverseAddr(tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, 20*time.Second, "PTR "+name, func() (bool, string) {
				resp, err := queryFromPod(client, name, dns.TypePTR)
				if err != nil {
					return false, err.Error()
				}
				soa, ptr := "", ""
				for _, rr := range resp.Ns {
					if x, ok := rr.(*dns.SOA); ok {
						soa = x.Hdr.Name
					}
				}
				for _, rr := range resp.Answer {
					if x, ok := rr.(*dns.PTR); ok {
						ptr = x.Ptr
					}
				}
				return resp.Rcode == tc.rcode && resp.Authoritative == tc.aa && soa == tc.soa && ptr == tc.ptr, resp.String()
			})
		})
	}
	t.Run("busybox nslookup of the DNS Service's address", func(t *testing.T) {
		if out := execInPod(t, s, ns, "client", "busybox", "nslookup", "10.96.0.10"); !strings.Contains(out, "name = kube-dns.kube-system.svc.cluster.local") {
			t.Fatalf("nslookup 10.96.0.10:\n%s", out)
		}
	})
}

// queryFromPod asks 10.96.0.10 one question over UDP from the pod's network namespace.
func queryFromPod(podNS, name string, qtype uint16) (*dns.Msg, error) {
	conn, err := netns.Dial(podNS, "udp", "10.96.0.10:53", 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	dc := &dns.Conn{Conn: conn}
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	if err := dc.WriteMsg(q); err != nil {
		return nil, err
	}
	return dc.ReadMsg()
}
