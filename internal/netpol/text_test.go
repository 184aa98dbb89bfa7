package netpol

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/knftables"

	"github.com/tranche/tranche/internal/netns"
)

// TestGoldenFullText pins the nested script of the golden table's full sync.
func TestGoldenFullText(t *testing.T) {
	pods, nss := world()
	m := Compile(Snapshot{Policies: examplePolicies(), Pods: pods, Namespaces: nss, NodeName: "node-1"})
	var got string
	s := NewSyncer(newFake(), nil, nil)
	s.LoadFullSyncsWith(func(_ context.Context, text string) error { got = text; return nil })
	if err := s.Sync(context.Background(), m, true, nil); err != nil {
		t.Fatal(err)
	}
	golden(t, "full-nested.nft", got)
}

// nftIn runs nft args in the network namespace ns, stdin from in.
func nftIn(t *testing.T, ns, in string, args ...string) string {
	t.Helper()
	var out string
	if err := netns.Do(ns, func() error {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command("nft", args...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(in), &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("nft %s: %v: %s", strings.Join(args, " "), err, stderr.String())
		}
		out = stdout.String()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFullTextSameRuleset writes the same models into two empty network namespaces,
// through knftables' transactions in one and the nested scripts in the other, and
// compares what `nft list table` shows: a first full sync, one replacing an earlier
// run's table, and a full sync over a table the partial syncs changed (stale chains,
// sets and counters deleted, counters kept).
func TestFullTextSameRuleset(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces and nft)")
	}
	prefix := fmt.Sprintf("tnt%05d", os.Getpid()%100000)
	ref, nested := prefix+"-ref", prefix+"-nested"
	for _, ns := range []string{ref, nested} {
		if err := netns.Create(ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := netns.Delete(ns); err != nil {
				t.Error(err)
			}
		})
	}
	syncer := func(ns string, text bool) *Syncer {
		var nft knftables.Interface
		if err := netns.Do(ns, func() error {
			var err error
			nft, err = knftables.New(knftables.IPv4Family, TableName)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		s := NewSyncer(nft, nil, nil)
		if text {
			s.LoadFullSyncsWith(LoadWithNFT)
		}
		return s
	}
	sync := func(ns string, s *Syncer, m *Model, full bool) {
		t.Helper()
		if err := netns.Do(ns, func() error { return s.Sync(context.Background(), m, full, nil) }); err != nil {
			t.Fatal(err)
		}
	}
	compare := func(what string) {
		t.Helper()
		// Counter values aside: only the nested namespace saw packets.
		values := regexp.MustCompile(`packets \d+ bytes \d+`)
		want := values.ReplaceAllString(nftIn(t, ref, "", "list", "table", "ip", TableName), "packets N bytes N")
		got := values.ReplaceAllString(nftIn(t, nested, "", "list", "table", "ip", TableName), "packets N bytes N")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: nested script's table (+) differs from knftables' (-):\n%s", what, diff)
		}
	}

	pods, nss := world()
	pols := examplePolicies()
	compile := func() *Model {
		return Compile(Snapshot{Policies: pols, Pods: pods, Namespaces: nss, NodeName: "node-1"})
	}
	refS, nestedS := syncer(ref, false), syncer(nested, true)
	sync(ref, refS, compile(), true)
	sync(nested, nestedS, compile(), true)
	compare("first full sync")

	// A new run finds the table: replaced whole.
	refS, nestedS = syncer(ref, false), syncer(nested, true)
	sync(ref, refS, compile(), true)
	sync(nested, nestedS, compile(), true)
	compare("full sync replacing an earlier run's table")

	// A counter with a value (packets the node sends itself, counted by a chain of
	// an earlier version that the full sync must delete), partial syncs, then a full
	// sync that drops a policy and changes another: stale objects go, the kept
	// counter keeps its value.
	const counted = "allow-in-x.allow-a-1"
	for _, ns := range []string{ref, nested} {
		nftIn(t, ns, fmt.Sprintf("add chain ip %[1]s probe { type filter hook output priority 0 ; }\nadd rule ip %[1]s probe counter name %[2]q\n", TableName, counted), "-f", "-")
	}
	run(t, "ip", "-n", nested, "link", "set", "lo", "up")
	if c, err := netns.Dial(nested, "tcp", "127.0.0.1:9", 700*time.Millisecond); err == nil {
		c.Close()
	}
	before := nftIn(t, nested, "", "list", "counter", "ip", TableName, counted)
	if strings.Contains(before, "packets 0 ") {
		t.Fatalf("no packet counted:\n%s", before)
	}
	pods[1] = pods[1].DeepCopy()
	pods[1].Labels = map[string]string{"pod": "other"}
	sync(ref, refS, compile(), false)
	sync(nested, nestedS, compile(), false)
	pols = pols[:2]
	pols[1] = pols[1].DeepCopy()
	pols[1].Spec.Ingress = append(pols[1].Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
	sync(ref, refS, compile(), true)
	sync(nested, nestedS, compile(), true)
	compare("full sync over a changed table")
	if got := nftIn(t, nested, "", "list", "counter", "ip", TableName, counted); got != before {
		t.Errorf("the full sync changed counter %s from\n%s\nto\n%s", counted, before, got)
	}
	for _, gone := range []string{"chain probe", "pol-eg-x.egress-dns", "deny-eg-x.a"} {
		if got := nftIn(t, nested, "", "list", "table", "ip", TableName); strings.Contains(got, gone) {
			t.Errorf("stale %s left after the full sync:\n%s", gone, got)
		}
	}
}
