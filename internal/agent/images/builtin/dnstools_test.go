package builtin

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// fakeCluster answers like a cluster DNS: kubernetes.default.svc.cluster.local A, a
// CNAME for an ExternalName service, a PTR, NXDOMAIN for the rest; it records which
// transports the queries came over.
func fakeCluster(t *testing.T) (port string, nets chan string) {
	t.Helper()
	nets = make(chan string, 64)
	records := map[string]string{
		"kubernetes.default.svc.cluster.local. A":    "kubernetes.default.svc.cluster.local. 30 IN A 10.96.0.1",
		"ext.ns.svc.cluster.local. CNAME":            "ext.ns.svc.cluster.local. 30 IN CNAME foo.example.com.",
		"1.0.96.10.in-addr.arpa. PTR":                "1.0.96.10.in-addr.arpa. 30 IN PTR kubernetes.default.svc.cluster.local.",
		"web.ns.svc.cluster.local. SRV":              "web.ns.svc.cluster.local. 30 IN SRV 0 100 80 web.ns.svc.cluster.local.",
		"kubernetes.default.svc.cluster.local. AAAA": "",
	}
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		nets <- w.RemoteAddr().Network()
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		rr, ok := records[q.Name+" "+dns.TypeToString[q.Qtype]]
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case rr != "":
			a, err := dns.NewRR(rr)
			if err != nil {
				t.Error(err)
			}
			m.Answer = append(m.Answer, a)
		}
		w.WriteMsg(m)
	})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port = strings.TrimPrefix(pc.LocalAddr().String(), "127.0.0.1:")
	l, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	udp := &dns.Server{PacketConn: pc, Handler: handler}
	tcp := &dns.Server{Listener: l, Handler: handler}
	go udp.ActivateAndServe()
	go tcp.ActivateAndServe()
	t.Cleanup(func() { udp.Shutdown(); tcp.Shutdown() })
	return port, nets
}

// TestDig runs the command lines of Kubernetes' DNS conformance specs (dns_common.go:
// createProbeCommand and createTargetedProbeCommand) against a fake cluster DNS.
func TestDig(t *testing.T) {
	port, nets := fakeCluster(t)
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(conf, []byte("search ns.svc.cluster.local svc.cluster.local cluster.local\nnameserver 127.0.0.1\noptions ndots:5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		net    string
		code   int
		stdout string // exact; "*" prefix: a substring
	}{
		{name: "udp answer", args: []string{"+notcp", "+noall", "+answer", "+search", "kubernetes.default.svc.cluster.local", "A"}, net: "udp",
			stdout: "kubernetes.default.svc.cluster.local.\t30\tIN\tA\t10.96.0.1\n"},
		{name: "tcp answer", args: []string{"+tcp", "+noall", "+answer", "+search", "kubernetes.default.svc.cluster.local", "A"}, net: "tcp",
			stdout: "kubernetes.default.svc.cluster.local.\t30\tIN\tA\t10.96.0.1\n"},
		{name: "search list", args: []string{"+notcp", "+noall", "+answer", "+search", "kubernetes.default"}, net: "udp",
			stdout: "kubernetes.default.svc.cluster.local.\t30\tIN\tA\t10.96.0.1\n"},
		{name: "no search without +search", args: []string{"+noall", "+answer", "kubernetes.default"}, net: "udp", stdout: ""},
		{name: "short cname", args: []string{"+short", "ext.ns.svc.cluster.local", "CNAME"}, net: "udp", stdout: "foo.example.com.\n"},
		{name: "srv", args: []string{"+notcp", "+noall", "+answer", "+search", "web.ns.svc.cluster.local", "SRV"}, net: "udp",
			stdout: "web.ns.svc.cluster.local.\t30\tIN\tSRV\t0 100 80 web.ns.svc.cluster.local.\n"},
		{name: "ptr", args: []string{"+notcp", "+noall", "+answer", "+search", "1.0.96.10.in-addr.arpa.", "PTR"}, net: "udp",
			stdout: "1.0.96.10.in-addr.arpa.\t30\tIN\tPTR\tkubernetes.default.svc.cluster.local.\n"},
		{name: "reverse", args: []string{"+short", "-x", "10.96.0.1"}, net: "udp", stdout: "kubernetes.default.svc.cluster.local.\n"},
		{name: "full output", args: []string{"nope.cluster.local"}, net: "udp", stdout: "*status: NXDOMAIN"},
		{name: "bad option", args: []string{"+bogus", "a"}, code: 1},
		{name: "bad type", args: []string{"-t", "BOGUS", "a"}, code: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for len(nets) > 0 {
				<-nets
			}
			var stdout, stderr bytes.Buffer
			args := append([]string{"-p", port}, tc.args...)
			code := digMain(context.Background(), args, conf, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tc.code, stderr.String())
			}
			if want, ok := strings.CutPrefix(tc.stdout, "*"); ok && !strings.Contains(stdout.String(), want) || !ok && stdout.String() != tc.stdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tc.stdout)
			}
			if tc.net != "" {
				if got := <-nets; got != tc.net {
					t.Errorf("query over %s, want %s", got, tc.net)
				}
			}
		})
	}
	// No server answering: exit status 9, as dig's.
	closed := closedPort(t)
	var out bytes.Buffer
	if code := digMain(context.Background(), []string{"-p", closed, "+tcp", "+tries=1", "a.b"}, conf, &out, io.Discard); code != 9 {
		t.Errorf("no server: exit %d, want 9 (%s)", code, out.String())
	}
}

// TestGetentHosts: getent hosts resolves through the hosts file (the pod's /etc/hosts
// entries spec; no name that would go to the machine's DNS) and refuses other databases.
func TestGetentHosts(t *testing.T) {
	var stdout bytes.Buffer
	if code := getentMain(context.Background(), []string{"hosts", "localhost"}, &stdout, io.Discard); code != 0 || !strings.HasSuffix(stdout.String(), " localhost\n") {
		t.Errorf("getent hosts localhost: exit %d, %q", code, stdout.String())
	}
	if code := getentMain(context.Background(), []string{"passwd"}, io.Discard, io.Discard); code != 1 {
		t.Errorf("other database: exit %d, want 1", code)
	}
}
