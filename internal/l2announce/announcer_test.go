package l2announce

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
)

type fakeDP struct {
	held  map[netip.Addr]bool
	ops   []string
	taken []netip.Addr
	kept  []string
}

func (f *fakeDP) Held() ([]netip.Addr, error) {
	var out []netip.Addr
	for a := range f.held {
		out = append(out, a)
	}
	return out, nil
}
func (f *fakeDP) Take(a netip.Addr) error {
	f.held[a] = true
	f.ops = append(f.ops, "take "+a.String())
	return nil
}
func (f *fakeDP) Keep(a netip.Addr) error {
	f.kept = append(f.kept, a.String())
	return nil
}
func (f *fakeDP) Announce(a netip.Addr) error {
	f.ops = append(f.ops, "announce "+a.String())
	return nil
}
func (f *fakeDP) Release(a netip.Addr) error {
	delete(f.held, a)
	f.ops = append(f.ops, "release "+a.String())
	return nil
}

// TestSync: a sync takes what is new, releases what is no longer chosen, keeps alive
// (and does nothing else to) what it holds when nothing changed, and announces what it
// keeps again when the candidates changed.
func TestSync(t *testing.T) {
	a, b, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	f := &fakeDP{held: map[netip.Addr]bool{a: true, b: true}}
	an := New(Config{NodeName: "m1", Dataplane: f})
	if err := an.Sync(map[netip.Addr]string{b: "default/b", c: "default/c"}, []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(f.ops)
	if fmt.Sprint(f.ops) != "[announce 10.0.0.2 release 10.0.0.1 take 10.0.0.3]" {
		t.Errorf("ops %v", f.ops)
	}
	if fmt.Sprint(f.kept) != "[10.0.0.2]" {
		t.Errorf("kept %v, want the held address still chosen", f.kept)
	}
	f.ops, f.kept = nil, nil
	if err := an.Sync(map[netip.Addr]string{b: "default/b", c: "default/c"}, []string{"m1"}); err != nil || len(f.ops) != 0 {
		t.Errorf("second sync: %v %v", f.ops, err)
	}
	slices.Sort(f.kept)
	if fmt.Sprint(f.kept) != "[10.0.0.2 10.0.0.3]" {
		t.Errorf("second sync kept %v, want both held addresses", f.kept)
	}
	if err := an.Sync(map[netip.Addr]string{b: "default/b", c: "default/c"}, []string{"m1", "m2"}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(f.ops)
	if fmt.Sprint(f.ops) != "[announce 10.0.0.2 announce 10.0.0.3]" {
		t.Errorf("candidates changed: ops %v, want both kept addresses announced again", f.ops)
	}
	if err := an.Sync(nil, nil); err != nil || len(f.held) != 0 {
		t.Errorf("release all: held %v, %v", f.held, err)
	}
}

// TestOutOfContact: while InContact says no, a sync releases every held address and
// takes none, whatever the node is chosen for; once it says yes again, the chosen
// addresses are taken (announced) again.
func TestOutOfContact(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	f := &fakeDP{held: map[netip.Addr]bool{a: true}}
	in := true
	an := New(Config{NodeName: "m1", Dataplane: f, InContact: func() bool { return in }})
	want := map[netip.Addr]string{a: "default/a", b: "default/b"}
	cands := []string{"m1", "m2"}
	if err := an.Sync(an.unlessCut(want), cands); err != nil || !f.held[a] || !f.held[b] {
		t.Fatalf("in contact: held %v, %v", f.held, err)
	}
	in = false
	f.ops = nil
	for range 2 {
		if err := an.Sync(an.unlessCut(want), cands); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(f.ops)
	if len(f.held) != 0 || fmt.Sprint(f.ops) != "[release 10.0.0.1 release 10.0.0.2]" {
		t.Errorf("out of contact: held %v, ops %v, want both released, nothing taken", f.held, f.ops)
	}
	in = true
	f.ops = nil
	if err := an.Sync(an.unlessCut(want), cands); err != nil {
		t.Fatal(err)
	}
	slices.Sort(f.ops)
	if fmt.Sprint(f.ops) != "[take 10.0.0.1 take 10.0.0.2]" {
		t.Errorf("back in contact: ops %v, want both taken again", f.ops)
	}
	// Without InContact, the desired addresses pass unchanged.
	if got := New(Config{Dataplane: f}).unlessCut(want); len(got) != 2 {
		t.Errorf("without InContact: %v", got)
	}
}

// TestARPFrame: a gratuitous ARP names the address as sender and target, from the
// uplink's MAC, broadcast.
func TestARPFrame(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	f := ARPFrame(mac, netip.MustParseAddr("10.240.0.241"), 1)
	want := "ffffffffffff020000000001080600010800060400010200000000010af000f10000000000000af000f1"
	if got := fmt.Sprintf("%x", f); got != want {
		t.Errorf("request\n got %s\nwant %s", got, want)
	}
	r := ARPFrame(mac, netip.MustParseAddr("10.240.0.241"), 2)
	if got := fmt.Sprintf("%x", r[20:22]) + fmt.Sprintf("%x", r[32:38]); got != "0002ffffffffffff" {
		t.Errorf("reply op and target MAC %s", got)
	}
}
