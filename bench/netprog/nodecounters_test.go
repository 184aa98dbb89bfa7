package netprog

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche/tranche/internal/netns"
	"github.com/tranche/tranche/internal/testutil"
)

// TestNodeCounters reads a node's series from 127.0.0.1:10249 inside a namespace of its
// own (where nothing of the host's answers), as the machines benchmark does.
func TestNodeCounters(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a network namespace)")
	}
	ns := testutil.Netns(t, "node")
	links, err := netns.OpenLinks(ns)
	if err != nil {
		t.Fatal(err)
	}
	err = links.LoUp()
	links.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NodeCounters(ns, NodeSeries); err == nil {
		t.Error("NodeCounters with nothing listening: no error")
	}
	l, err := netns.Listen(ns, "tcp4", "127.0.0.1:10249")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# HELP x\nkubeproxy_sync_proxy_rules_duration_seconds_count 400\nkubeproxy_sync_proxy_rules_duration_seconds_sum 1.5\nother 7\n")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	got, err := NodeCounters(ns, NodeSeries)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"kubeproxy_sync_proxy_rules_duration_seconds_count": 400, "kubeproxy_sync_proxy_rules_duration_seconds_sum": 1.5}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NodeCounters (-want +got):\n%s", diff)
	}
}
