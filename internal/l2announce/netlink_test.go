package l2announce

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/netns"
	"github.com/tranche/tranche/internal/testutil"
)

// TestNetlinkAnnounce runs the real dataplane in two test namespaces joined by a veth:
// the address taken by a answers b (ARP), b's stale neighbour entry for it moves to a's
// MAC at once (the gratuitous ARP), and a released address no longer answers.
func TestNetlinkAnnounce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	a, b := vethPair(t, "l2t")
	dp, err := OpenNetlink(a, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	vip := netip.MustParseAddr("192.168.79.200")
	// b once saw the address elsewhere.
	if out, err := exec.Command("ip", "-n", b, "neigh", "replace", vip.String(), "lladdr", "02:00:00:00:00:99", "dev", "eth0", "nud", "stale").CombinedOutput(); err != nil {
		t.Fatalf("ip neigh: %v %s", err, out)
	}
	if err := dp.Take(vip); err != nil {
		t.Fatal(err)
	}
	if err := dp.Take(vip); err != nil {
		t.Fatalf("taking a held address again: %v", err)
	}
	held, err := dp.Held()
	if err != nil || len(held) != 1 || held[0] != vip {
		t.Fatalf("held %v, %v; want [%s]", held, err, vip)
	}
	lk, err := dp.link()
	if err != nil {
		t.Fatal(err)
	}
	mac := lk.Attrs().HardwareAddr.String()
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _ := exec.Command("ip", "-n", b, "neigh", "show", vip.String(), "dev", "eth0").CombinedOutput()
		if strings.Contains(string(out), mac) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's neighbour entry for %s is %q, want a's MAC %s (gratuitous ARP)", vip, out, mac)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ln, err := netns.Listen(a, "tcp", vip.String()+":8080")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	conn, err := netns.Dial(b, "tcp", vip.String()+":8080", 5*time.Second)
	if err != nil {
		t.Fatalf("b reaching %s: %v", vip, err)
	}
	got, _ := io.ReadAll(conn)
	conn.Close()
	ln.Close()
	if string(got) != "hello" {
		t.Fatalf("read %q", got)
	}
	if err := dp.Release(vip); err != nil {
		t.Fatal(err)
	}
	if err := dp.Release(vip); err != nil {
		t.Fatalf("releasing a released address: %v", err)
	}
	if held, err := dp.Held(); err != nil || len(held) != 0 {
		t.Fatalf("held %v, %v after release", held, err)
	}
	if _, err := Label("averyverylongname"); err == nil {
		t.Error("a label over 15 bytes accepted")
	}
}

// vethPair makes two test namespaces, named after tag, joined by a veth whose ends are
// eth0 in both, up, with 192.168.79.1/24 and .2/24; they are deleted when t ends.
func vethPair(t *testing.T, tag string) (a, b string) {
	t.Helper()
	prefix := fmt.Sprintf("%s%d-", tag, os.Getpid()%100000)
	a, b = prefix+"a", prefix+"b"
	for _, ns := range []string{a, b} {
		testutil.NetnsNamed(t, ns)
	}
	la, err := netns.OpenLinks(a)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Close()
	if err := la.AddVeth("eth0", "eth0", b); err != nil {
		t.Fatal(err)
	}
	for i, ns := range []string{a, b} {
		l, err := netns.OpenLinks(ns)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := l.LoUp(); err != nil {
			t.Fatal(err)
		}
		if err := l.AddAddr("eth0", netip.MustParsePrefix(fmt.Sprintf("192.168.79.%d/24", i+1))); err != nil {
			t.Fatal(err)
		}
		if err := l.SetUp("eth0"); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// TestNetlinkAddressLifetime: an announced address the announcer no longer keeps (its
// agent was killed) leaves the uplink by itself after its lifetime; kept, it stays.
func TestNetlinkAddressLifetime(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	a, _ := vethPair(t, "l2l")
	dp, err := OpenNetlink(a, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	dp.lifetime = 2 * time.Second
	kept, dropped := netip.MustParseAddr("192.168.79.201"), netip.MustParseAddr("192.168.79.202")
	for _, ip := range []netip.Addr{kept, dropped} {
		if err := dp.Take(ip); err != nil {
			t.Fatal(err)
		}
	}
	if out, _ := exec.Command("ip", "-n", a, "addr", "show", "dev", "eth0").CombinedOutput(); !strings.Contains(string(out), "valid_lft 2sec") && !strings.Contains(string(out), "valid_lft 1sec") {
		t.Errorf("announced addresses without a 2 s lifetime:\n%s", out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := dp.Keep(kept); err != nil {
			t.Fatal(err)
		}
		held, err := dp.Held()
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(held) == fmt.Sprint([]netip.Addr{kept}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("held %v 10 s after taking both with a 2 s lifetime and keeping %s", held, kept)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
