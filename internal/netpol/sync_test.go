package netpol

import (
	"context"
	"flag"
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
