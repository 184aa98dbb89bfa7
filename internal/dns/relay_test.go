package dns

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

// TestRelay: messages pass unchanged over UDP and TCP to the first upstream that
// answers.
func TestRelay(t *testing.T) {
	up := newFakeUpstream(t, "api.example.com. 60 IN A 192.0.2.10")
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.LocalAddr().String()
	dead.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	r := &Relay{Upstreams: []string{deadAddr, up.addr}}
	go func() { done <- r.Serve(ctx, pc, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	r2 := &Relay{Upstreams: []string{deadAddr}}
	pc2, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r2.Serve(ctx, pc2, ln2) }()
	resp, _, err := (&dns.Client{}).Exchange(query(t, "api.example.com. A", 0), pc2.LocalAddr().String())
	if err != nil {
		t.Fatalf("no upstream answers: want SERVFAIL at once, got %v", err)
	}
	diff(t, "no upstream", "SERVFAIL ra", resp)
	for _, tc := range []struct{ net, addr string }{{"udp", pc.LocalAddr().String()}, {"tcp", ln.Addr().String()}} {
		c := &dns.Client{Net: tc.net}
		resp, _, err := c.Exchange(query(t, "api.example.com. A", 0), tc.addr)
		if err != nil {
			t.Fatalf("%s: %v", tc.net, err)
		}
		diff(t, tc.net, "NOERROR ra\nANSWER\napi.example.com. 60 IN A 192.0.2.10", resp)
	}
}

func TestResolvConfUpstreams(t *testing.T) {
	p := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(p, []byte("# comment\nsearch example.com\nnameserver 127.0.0.53\nnameserver fe80::1%eth0\nnameserver bogus\noptions edns0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ResolvConfUpstreams(p)
	if err != nil || !slices.Equal(got, []string{"127.0.0.53:53", "[fe80::1%eth0]:53"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if err := os.WriteFile(p, []byte("search x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ResolvConfUpstreams(p); err == nil {
		t.Fatal("a resolv.conf without nameserver is accepted")
	}
}
