package loopback

import (
	"net"
	"net/netip"
	"testing"
)

// TestFreePort: the address is on loopback, in 20000-29999, and can be bound.
func TestFreePort(t *testing.T) {
	addr, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().IsLoopback() || ap.Port() < 20000 || ap.Port() > 29999 {
		t.Fatalf("FreePort = %q (%v), want 127.0.0.1 with a port in 20000-29999", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("binding %s: %v", addr, err)
	}
	ln.Close()
}
