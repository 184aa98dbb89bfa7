package netpol

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// examplePolicies are the policies of the golden table: default deny, a rule per peer
// kind, named port, endPort, and egress allowing DNS.
func examplePolicies() []*networkingv1.NetworkPolicy {
	return []*networkingv1.NetworkPolicy{
		makePolicy("x", "deny-all", nil),
		makePolicy("x", "allow-a", func(np *networkingv1.NetworkPolicy) {
			np.Spec.PodSelector = *sel("pod", "a")
			np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "b")}}, Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("serve-80"))}},
				{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.240.0.0/24", Except: []string{"10.240.0.12/32"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To[v1.Protocol]("TCP"), Port: ptr.To(intstr.FromInt32(8000)), EndPort: ptr.To(int32(8100))}}},
			}
		}),
		makePolicy("x", "egress-dns", func(np *networkingv1.NetworkPolicy) {
			np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
			np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("ns", "y"), PodSelector: sel("pod", "c")}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To[v1.Protocol]("UDP"), Port: ptr.To(intstr.FromInt32(53))}, tcp(intstr.FromInt32(53))}},
			}
		}),
	}
}

func newFake() *knftables.Fake { return knftables.NewFake(knftables.IPv4Family, TableName) }

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func TestGoldenFullSync(t *testing.T) {
	pods, nss := world()
	fake := newFake()
	s := NewSyncer(fake, nil, nil)
	m := Compile(Snapshot{Policies: examplePolicies(), Pods: pods, Namespaces: nss, NodeName: "node-1"})
	if err := s.Sync(context.Background(), m, true, nil); err != nil {
		t.Fatal(err)
	}
	golden(t, "full.nft", fake.Dump())
}

// txLines runs one sync and returns its transaction's lines.
func txLines(t *testing.T, s *Syncer, fake *knftables.Fake, m *Model) []string {
	t.Helper()
	fake.LastTransaction = nil
	if err := s.Sync(context.Background(), m, false, nil); err != nil {
		t.Fatal(err)
	}
	if fake.LastTransaction == nil {
		t.Fatal("no transaction")
	}
	return strings.Split(strings.TrimSpace(fake.LastTransaction.String()), "\n")
}

func TestPartialSync(t *testing.T) {
	pods, nss := world()
	pols := examplePolicies()
	fake := newFake()
	s := NewSyncer(fake, nil, nil)
	compile := func() *Model {
		return Compile(Snapshot{Policies: pols, Pods: pods, Namespaces: nss, NodeName: "node-1"})
	}
	if err := s.Sync(context.Background(), compile(), true, nil); err != nil {
		t.Fatal(err)
	}
	full := fake.Dump()

	// Nothing changed: no transaction at all.
	fake.LastTransaction = nil
	if err := s.Sync(context.Background(), compile(), false, nil); err != nil {
		t.Fatal(err)
	}
	if fake.LastTransaction != nil {
		t.Errorf("a sync without changes ran %q", fake.LastTransaction.String())
	}

	// A peer pod relabelled: element updates of the sets it is in, nothing else.
	pods[1] = pods[1].DeepCopy() // x/b
	pods[1].Labels = map[string]string{"pod": "other"}
	got := txLines(t, s, fake, compile())
	want := []string{"delete element ip tranche-netpol pol-in-x.allow-a-0-pods { 10.244.1.3 }"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("x/b relabelled (-want +got):\n%s", diff)
	}

	// One policy changed: its chain and sets only.
	pols[2] = pols[2].DeepCopy() // x/egress-dns
	pols[2].Spec.Egress[0].Ports = pols[2].Spec.Egress[0].Ports[:1]
	got = txLines(t, s, fake, compile())
	want = []string{"delete element ip tranche-netpol pol-eg-x.egress-dns-0-ports { tcp . 53 }"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("x/egress-dns changed (-want +got):\n%s", diff)
	}

	// A policy deleted: its chain, sets and counter go, after the map entry that
	// led to them.
	pols = pols[:2]
	got = txLines(t, s, fake, compile())
	// x/a is no longer isolated for egress: its map entry, chain and counter go too.
	want = []string{
		"delete element ip tranche-netpol egress-pods { 10.244.1.2 }",
		"flush chain ip tranche-netpol pod-eg-x.a",
		"flush chain ip tranche-netpol pol-eg-x.egress-dns",
		"delete chain ip tranche-netpol pod-eg-x.a",
		"delete chain ip tranche-netpol pol-eg-x.egress-dns",
		"delete set ip tranche-netpol pol-eg-x.egress-dns-0-pods",
		"delete set ip tranche-netpol pol-eg-x.egress-dns-0-ports",
		"delete counter ip tranche-netpol allow-eg-x.egress-dns-0",
		"delete counter ip tranche-netpol deny-eg-x.a",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("x/egress-dns deleted (-want +got):\n%s", diff)
	}

	// Back to the start: the partial syncs leave what a full sync writes.
	pods, _ = world()
	pols = examplePolicies()
	fake.LastTransaction = nil
	if err := s.Sync(context.Background(), compile(), false, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(full, fake.Dump()); diff != "" {
		t.Errorf("after partial syncs back to the start (-full +got):\n%s", diff)
	}
}

// failingNFT fails the transactions (and checks) with a line starting with fail.
type failingNFT struct {
	*knftables.Fake
	fail string
}

func (f *failingNFT) fails(tx *knftables.Transaction) bool {
	if f.fail == "" {
		return false
	}
	for _, l := range strings.Split(tx.String(), "\n") {
		if strings.HasPrefix(l, f.fail) {
			return true
		}
	}
	return false
}

func (f *failingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	if f.fails(tx) {
		return fmt.Errorf("Error: Could not process rule: %s", f.fail)
	}
	return f.Fake.Run(ctx, tx)
}

func (f *failingNFT) Check(ctx context.Context, tx *knftables.Transaction) error {
	if f.fails(tx) {
		return fmt.Errorf("Error: Could not process rule: %s", f.fail)
	}
	return f.Fake.Check(ctx, tx)
}

func TestFailedTransaction(t *testing.T) {
	pods, nss := world()
	pols := examplePolicies()
	nft := &failingNFT{Fake: newFake()}
	s := NewSyncer(nft, nil, nil)
	compile := func() *Model {
		return Compile(Snapshot{Policies: pols, Pods: pods, Namespaces: nss, NodeName: "node-1"})
	}
	ctx := context.Background()
	if err := s.Sync(ctx, compile(), true, nil); err != nil {
		t.Fatal(err)
	}
	// A partial sync fails: the next one is full.
	pods[1] = pods[1].DeepCopy()
	pods[1].Labels = nil
	nft.fail = "delete element"
	if err := s.Sync(ctx, compile(), false, nil); err == nil {
		t.Fatal("the failing sync succeeded")
	}
	nft.fail = ""
	nft.LastTransaction = nil
	if err := s.Sync(ctx, compile(), false, nil); err != nil {
		t.Fatal(err)
	}
	if tx := nft.LastTransaction.String(); !strings.Contains(tx, "flush chain ip tranche-netpol pod-in-x.a") || !strings.Contains(tx, "add table") {
		t.Errorf("the sync after a failure is not full:\n%s", tx)
	}

	// The kernel refuses one policy: the others are written, its pods stay isolated.
	nft.fail = "add chain ip tranche-netpol pol-eg-x.egress-dns"
	if err := s.Sync(ctx, compile(), true, nil); err != nil {
		t.Fatalf("a refused policy broke the sync: %v", err)
	}
	if diff := cmp.Diff([]string{"x/egress-dns"}, s.Refused()); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
	dump := nft.Dump()
	for _, want := range []string{"add chain ip tranche-netpol pol-in-x.allow-a", `add rule ip tranche-netpol pod-eg-x.a counter name "deny-eg-x.a" drop`} {
		if !strings.Contains(dump, want+"\n") {
			t.Errorf("table lacks %q:\n%s", want, dump)
		}
	}
	// Once it changes it is tried again.
	nft.fail = ""
	if err := s.Sync(ctx, compile(), false, []string{"x/egress-dns"}); err != nil {
		t.Fatal(err)
	}
	if len(s.Refused()) != 0 || !strings.Contains(nft.Dump(), "jump pol-eg-x.egress-dns") {
		t.Errorf("x/egress-dns not written after its change:\n%s", nft.Dump())
	}
}

// TestGroupChains checks that pods selected by the same policies share one chain of
// jumps (the table grows with pods plus policies, not their product), that a pod
// selected by one policy jumps to it directly, and that a group no pod uses any more
// is deleted after the pod chains stop jumping to it.
func TestGroupChains(t *testing.T) {
	web := map[string]string{"app": "web"}
	pods := []*v1.Pod{
		makePod("x", "w1", "node-1", "10.244.1.10", web),
		makePod("x", "w2", "node-1", "10.244.1.11", web),
	}
	nss := []*v1.Namespace{makeNS("x", nil)}
	deny := func(name string) *networkingv1.NetworkPolicy {
		return makePolicy("x", name, func(np *networkingv1.NetworkPolicy) { np.Spec.PodSelector = *sel("app", "web") })
	}
	pols := []*networkingv1.NetworkPolicy{deny("p1"), deny("p2"), deny("p3")}
	fake := newFake()
	s := NewSyncer(fake, nil, nil)
	compile := func() *Model {
		return Compile(Snapshot{Policies: pols, Pods: pods, Namespaces: nss, NodeName: "node-1"})
	}
	if err := s.Sync(context.Background(), compile(), true, nil); err != nil {
		t.Fatal(err)
	}
	group := groupChain(Ingress, []string{"jump pol-in-x.p1", "jump pol-in-x.p2", "jump pol-in-x.p3"})
	dump := fake.Dump()
	for _, want := range []string{
		"add rule ip tranche-netpol " + group + " jump pol-in-x.p3",
		"add rule ip tranche-netpol pod-in-x.w1 jump " + group,
		"add rule ip tranche-netpol pod-in-x.w2 jump " + group,
	} {
		if !strings.Contains(dump, want+"\n") {
			t.Errorf("table lacks %q:\n%s", want, dump)
		}
	}
	if n := strings.Count(dump, "add chain ip tranche-netpol grp-"); n != 1 {
		t.Errorf("%d group chains, want 1:\n%s", n, dump)
	}

	// Two policies go: both pods jump to the one left, and the group goes last.
	pols = pols[:1]
	got := txLines(t, s, fake, compile())
	want := []string{
		"flush chain ip tranche-netpol pod-in-x.w1",
		"add rule ip tranche-netpol pod-in-x.w1 ip saddr 10.244.1.10 accept",
		"add rule ip tranche-netpol pod-in-x.w1 jump pol-in-x.p1",
		`add rule ip tranche-netpol pod-in-x.w1 counter name "deny-in-x.w1" drop`,
		"flush chain ip tranche-netpol pod-in-x.w2",
		"add rule ip tranche-netpol pod-in-x.w2 ip saddr 10.244.1.11 accept",
		"add rule ip tranche-netpol pod-in-x.w2 jump pol-in-x.p1",
		`add rule ip tranche-netpol pod-in-x.w2 counter name "deny-in-x.w2" drop`,
		"flush chain ip tranche-netpol " + group,
		"flush chain ip tranche-netpol pol-in-x.p2",
		"flush chain ip tranche-netpol pol-in-x.p3",
		"delete chain ip tranche-netpol " + group,
		"delete chain ip tranche-netpol pol-in-x.p2",
		"delete chain ip tranche-netpol pol-in-x.p3",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("p2 and p3 deleted (-want +got):\n%s", diff)
	}
}
