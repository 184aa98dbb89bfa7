package overlay

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

// watchedFake is a Fake that also tells of links coming up, as Netlink does.
type watchedFake struct {
	*Fake
	ups chan string
}

func (w watchedFake) LinkUps(done <-chan struct{}) (<-chan string, error) { return w.ups, nil }

// TestRunSyncsWhenTheUplinkReturns: the kernel flushes host-gw's routes through an
// uplink that goes down; when the uplink comes up again the overlay writes them at
// once, not at the next resync (an hour here). Another link coming up changes nothing.
func TestRunSyncsWhenTheUplinkReturns(t *testing.T) {
	me := makeNode("a", "10.244.0.0/24", "192.168.50.10", nil)
	b := hostGWNode("b", "10.244.1.0/24", "192.168.50.11")
	client := fake.NewClientset(me, b)
	dp := watchedFake{Fake: newFake(), ups: make(chan string)}
	o, err := Prepare(Config{Backend: BackendHostGW, NodeName: "a", PublicIP: netip.MustParseAddr("192.168.50.10"),
		PodCIDR: netip.MustParsePrefix("10.244.0.0/24"), Dataplane: dp, Client: client, Resync: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- o.Run(ctx) }()
	defer func() {
		cancel()
		close(dp.ups)
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	routes := func() int { s, _ := dp.State(); return len(s.Routes) }
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("the route to b", func() bool { return routes() == 1 })
	flush := func() {
		dp.mu.Lock()
		dp.Current.Routes = nil
		dp.mu.Unlock()
	}
	send := func(name string) {
		t.Helper()
		select {
		case dp.ups <- name:
		case <-time.After(10 * time.Second):
			t.Fatalf("the overlay does not read the link news (%s up)", name)
		}
	}
	flush()
	send("veth0")
	send("veth0") // the second send returns once the first was handled
	if n := routes(); n != 0 {
		t.Fatalf("%d routes after another link came up, want none written", n)
	}
	send("eth0")
	wait("the route to b again once eth0 came up", func() bool { return routes() == 1 })
}
