package dns

import (
	"context"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func makeService(ns, name string, mut func(*v1.Service)) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP}}
	if mut != nil {
		mut(s)
	}
	if s.Spec.ClusterIP != "" && len(s.Spec.ClusterIPs) == 0 {
		s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
	}
	return s
}

func makeSlice(ns, svc, name string, mut func(*discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	if mut != nil {
		mut(s)
	}
	return s
}

// ep is an endpoint at ip, ready or not, with an optional hostname.
func ep(ip string, ready bool, hostname string) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
	if hostname != "" {
		e.Hostname = ptr.To(hostname)
	}
	return e
}

func slicePort(name string, proto v1.Protocol, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(proto), Port: ptr.To(port)}
}

func makePod(ns, name, ip string, mut func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:   v1.PodSpec{DNSPolicy: v1.DNSClusterFirst},
		Status: v1.PodStatus{PodIP: ip, PodIPs: []v1.PodIP{{IP: ip}}}}
	if mut != nil {
		mut(p)
	}
	return p
}

func makeNamespace(name string) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// fakeCluster is the cluster most tests answer from: seed 001's and 003's objects
// plus the kinds of Service the specification names.
func fakeCluster(t testing.TB) *Fake {
	t.Helper()
	f := NewFake()
	objs := []any{
		makeNamespace("default"), makeNamespace("kube-system"), makeNamespace("demo"),
		makeNamespace("signalements"), makeNamespace("production"), makeNamespace("empty"),
		makeService("default", "kubernetes", func(s *v1.Service) {
			s.Spec.ClusterIP = "10.96.0.1"
			s.Spec.Ports = []v1.ServicePort{{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}}
		}),
		makeService("kube-system", "kube-dns", func(s *v1.Service) {
			s.Spec.ClusterIP = "10.96.0.10"
			s.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP}}
		}),
		makeService("signalements", "signalements", func(s *v1.Service) {
			s.Spec.ClusterIP = "10.96.0.50"
			s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}
		}),
		makeService("demo", "api-svc", func(s *v1.Service) {
			s.Spec.ClusterIP = "10.96.0.20"
			s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}, {Port: 9090, Protocol: v1.ProtocolTCP}}
		}),
		makeService("demo", "dual", func(s *v1.Service) {
			s.Spec.ClusterIP = "10.96.0.21"
			s.Spec.ClusterIPs = []string{"10.96.0.21", "fd00:10:96::21"}
		}),
		makeSlice("demo", "api-svc", "api-svc-x1", func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = []discoveryv1.Endpoint{ep("10.244.1.5", true, "")}
			s.Ports = []discoveryv1.EndpointPort{slicePort("http", v1.ProtocolTCP, 8080)}
		}),
		makeService("demo", "web", func(s *v1.Service) {
			s.Spec.ClusterIP = v1.ClusterIPNone
			s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}
		}),
		makeSlice("demo", "web", "web-a", func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = []discoveryv1.Endpoint{ep("10.244.1.10", true, "web-0"), ep("10.244.2.11", true, "web-1"), ep("10.244.3.12", false, "web-2")}
			s.Ports = []discoveryv1.EndpointPort{slicePort("http", v1.ProtocolTCP, 8080)}
		}),
		makeService("demo", "peers", func(s *v1.Service) {
			s.Spec.ClusterIP = v1.ClusterIPNone
			s.Spec.PublishNotReadyAddresses = true
		}),
		makeSlice("demo", "peers", "peers-a", func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = []discoveryv1.Endpoint{ep("10.244.1.20", true, ""), ep("10.244.2.21", false, "")}
		}),
		makeService("demo", "nobody", func(s *v1.Service) { s.Spec.ClusterIP = v1.ClusterIPNone }),
		makeSlice("demo", "nobody", "nobody-a", func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = []discoveryv1.Endpoint{ep("10.244.1.30", false, "")}
		}),
		makeService("production", "bdd-externe", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeExternalName
			s.Spec.ExternalName = "ma-base-de-donnees.mon-fournisseur-cloud.com"
		}),
		makeService("demo", "alias", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeExternalName
			s.Spec.ExternalName = "api-svc.demo.svc.cluster.local"
		}),
		makePod("demo", "client", "10.244.1.9", nil),
		makePod("demo", "custom", "10.244.1.8", func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("1")}}}
		}),
		makePod("signalements", "sig-0", "10.244.2.9", nil),
		// A finished pod whose address the running demo/client now holds.
		makePod("other", "done", "10.244.1.9", func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded }),
	}
	if err := f.Add(objs...); err != nil {
		t.Fatal(err)
	}
	return f
}

func newTestHandler(t testing.TB, c Cache, cfg Config) *Handler {
	t.Helper()
	if cfg.Zone == "" {
		cfg.Zone = "cluster.local"
	}
	if cfg.Serial == 0 {
		cfg.Serial = 1
	}
	h, err := NewHandler(cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// query builds a question "name TYPE" (class IN), with EDNS when size > 0.
func query(t testing.TB, q string, size uint16) *dns.Msg {
	t.Helper()
	name, typ, ok := strings.Cut(q, " ")
	if !ok {
		t.Fatalf("query %q: want NAME TYPE", q)
	}
	qt, ok := dns.StringToType[typ]
	if !ok {
		t.Fatalf("query %q: unknown type", q)
	}
	m := new(dns.Msg)
	m.SetQuestion(name, qt)
	if size > 0 {
		m.SetEdns0(size, false)
	}
	return m
}

var spaces = regexp.MustCompile(`\s+`)

// render writes a response as its status line and its sections' records, one per
// line in zone-file syntax with single spaces, sorted within each section (the order
// of records in a set carries no meaning).
func render(m *dns.Msg) string {
	var b strings.Builder
	b.WriteString(dns.RcodeToString[m.Rcode])
	for _, f := range []struct {
		on   bool
		name string
	}{{m.Authoritative, "aa"}, {m.Truncated, "tc"}, {m.RecursionAvailable, "ra"}} {
		if f.on {
			b.WriteString(" " + f.name)
		}
	}
	b.WriteString("\n")
	for _, sec := range []struct {
		name string
		rrs  []dns.RR
	}{{"ANSWER", m.Answer}, {"AUTHORITY", m.Ns}, {"ADDITIONAL", m.Extra}} {
		var lines []string
		for _, rr := range sec.rrs {
			if rr.Header().Rrtype == dns.TypeOPT {
				continue
			}
			lines = append(lines, spaces.ReplaceAllString(rr.String(), " "))
		}
		if len(lines) == 0 {
			continue
		}
		slices.Sort(lines)
		b.WriteString(sec.name + "\n" + strings.Join(lines, "\n") + "\n")
	}
	return b.String()
}

// want normalises an expected response written in a test (indentation, blank lines).
func want(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(spaces.ReplaceAllString(l, " ")); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

func ask(t testing.TB, h *Handler, q string, from string, udp bool, size uint16) *dns.Msg {
	t.Helper()
	var addr netip.Addr
	if from != "" {
		addr = netip.MustParseAddr(from)
	}
	req := query(t, q, size)
	resp := h.Respond(context.Background(), req, addr, udp)
	if resp == nil {
		t.Fatalf("%s: no answer", q)
	}
	if _, err := resp.Pack(); err != nil {
		t.Fatalf("%s: answer does not pack: %v", q, err)
	}
	if resp.Id != req.Id {
		t.Fatalf("%s: answer id %d, asked %d", q, resp.Id, req.Id)
	}
	return resp
}

func diff(t *testing.T, q, wantText string, got *dns.Msg) {
	t.Helper()
	if d := cmp.Diff(want(wantText), render(got)); d != "" {
		t.Errorf("%s (-want +got):\n%s", q, d)
	}
}

// serve runs h on loopback UDP and TCP sockets until the test ends.
func serve(t testing.TB, h *Handler) (udp, tcp string) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = Serve(ctx, h, pc, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return pc.LocalAddr().String(), ln.Addr().String()
}

// dnsConn is a raw UDP connection to addr with a read deadline.
func dnsConn(addr string) (*dns.Conn, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return &dns.Conn{Conn: c}, nil
}
