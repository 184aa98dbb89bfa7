package networking

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// makePolicy returns a valid NetworkPolicy selecting app=db that lets pods labelled
// role=client reach TCP 5432 and lets the db pods reach DNS, changed by mutate.
func makePolicy(mutate func(*networkingv1.NetworkPolicy)) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db", CreationTimestamp: metav1.NewTime(created)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Port: new(intstr.FromInt32(5432))}},
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Port: new(intstr.FromInt32(53)), Protocol: new(corev1.ProtocolUDP)}},
				To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}},
			}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	if mutate != nil {
		mutate(np)
	}
	return np
}

func ingressPort(np *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicyPort {
	return &np.Spec.Ingress[0].Ports[0]
}

func ipBlockPeer(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

func TestValidateNetworkPolicy(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*networkingv1.NetworkPolicy)
		want   []string
	}{
		{name: "valid"},
		{name: "empty spec", mutate: func(np *networkingv1.NetworkPolicy) { np.Spec = networkingv1.NetworkPolicySpec{} }},
		{name: "named port", mutate: func(np *networkingv1.NetworkPolicy) { ingressPort(np).Port = new(intstr.FromString("postgres")) }},
		{name: "port range", mutate: func(np *networkingv1.NetworkPolicy) { ingressPort(np).EndPort = new(int32(5440)) }},
		{name: "protocol only", mutate: func(np *networkingv1.NetworkPolicy) { ingressPort(np).Port = nil }},
		{name: "ipBlock with except", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.Egress[0].To = []networkingv1.NetworkPolicyPeer{ipBlockPeer("10.0.0.0/8", "10.1.0.0/16")}
		}},
		{name: "bad podSelector label value", mutate: func(np *networkingv1.NetworkPolicy) { np.Spec.PodSelector.MatchLabels["app"] = "no good" },
			want: []string{`spec.podSelector.matchLabels: Invalid value: "no good": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`}},
		{name: "bad selector operator", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From[0].PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}
		}, want: []string{`spec.ingress[0].from[0].podSelector.matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator`}},
		{name: "unsupported protocol", mutate: func(np *networkingv1.NetworkPolicy) { ingressPort(np).Protocol = new(corev1.Protocol("ICMP")) },
			want: []string{`spec.ingress[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP"`}},
		{name: "port out of range", mutate: func(np *networkingv1.NetworkPolicy) { ingressPort(np).Port = new(intstr.FromInt32(70000)) },
			want: []string{`spec.ingress[0].ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive`}},
		{name: "bad port name", mutate: func(np *networkingv1.NetworkPolicy) { ingressPort(np).Port = new(intstr.FromString("Postgres_SQL")) },
			want: []string{`spec.ingress[0].ports[0].port: Invalid value: "Postgres_SQL": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)`}},
		{name: "endPort below port", mutate: func(np *networkingv1.NetworkPolicy) { ingressPort(np).EndPort = new(int32(5000)) },
			want: []string{"spec.ingress[0].ports[0].endPort: Invalid value: 5000: must be greater than or equal to `port`"}},
		{name: "endPort out of range", mutate: func(np *networkingv1.NetworkPolicy) { ingressPort(np).EndPort = new(int32(65536)) },
			want: []string{"spec.ingress[0].ports[0].endPort: Invalid value: 65536: must be between 1 and 65535, inclusive"}},
		{name: "endPort with named port", mutate: func(np *networkingv1.NetworkPolicy) {
			ingressPort(np).Port = new(intstr.FromString("postgres"))
			ingressPort(np).EndPort = new(int32(5440))
		}, want: []string{"spec.ingress[0].ports[0].endPort: Invalid value: 5440: may not be specified when `port` is non-numeric"}},
		{name: "endPort without port", mutate: func(np *networkingv1.NetworkPolicy) {
			ingressPort(np).Port = nil
			ingressPort(np).EndPort = new(int32(5440))
		}, want: []string{"spec.ingress[0].ports[0].endPort: Invalid value: 5440: may not be specified when `port` is not specified"}},
		{name: "empty peer", mutate: func(np *networkingv1.NetworkPolicy) { np.Spec.Egress[0].To[0] = networkingv1.NetworkPolicyPeer{} },
			want: []string{"spec.egress[0].to[0]: Required value: must specify a peer"}},
		{name: "ipBlock and selector", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From[0].IPBlock = &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}
		}, want: []string{"spec.ingress[0].from[0]: Forbidden: may not specify both ipBlock and another peer"}},
		{name: "ipBlock without cidr", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.Egress[0].To = []networkingv1.NetworkPolicyPeer{ipBlockPeer("")}
		}, want: []string{"spec.egress[0].to[0].ipBlock.cidr: Required value"}},
		{name: "ipBlock bad cidr", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.Egress[0].To = []networkingv1.NetworkPolicyPeer{ipBlockPeer("10.0.0.0/33")}
		}, want: []string{`spec.egress[0].to[0].ipBlock.cidr: Invalid value: "10.0.0.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`}},
		{name: "except outside cidr", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.Egress[0].To = []networkingv1.NetworkPolicyPeer{ipBlockPeer("10.0.0.0/16", "192.168.0.0/24")}
		}, want: []string{"spec.egress[0].to[0].ipBlock.except[0]: Invalid value: \"192.168.0.0/24\": must be a strict subset of `cidr`"}},
		{name: "except equal to cidr", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.Egress[0].To = []networkingv1.NetworkPolicyPeer{ipBlockPeer("10.0.0.0/16", "10.0.0.0/16")}
		}, want: []string{"spec.egress[0].to[0].ipBlock.except[0]: Invalid value: \"10.0.0.0/16\": must be a strict subset of `cidr`"}},
		{name: "unknown policy type", mutate: func(np *networkingv1.NetworkPolicy) { np.Spec.PolicyTypes[1] = "Both" },
			want: []string{`spec.policyTypes[1]: Unsupported value: "Both": supported values: "Ingress", "Egress"`}},
		{name: "three policy types", mutate: func(np *networkingv1.NetworkPolicy) {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
		}, want: []string{`spec.policyTypes: Invalid value: ["Ingress","Egress","Ingress"]: may not specify more than two policyTypes`}},
	}
	r := NetworkPolicyResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(r.Validate(makePolicy(tc.mutate)))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateNetworkPolicyUpdateKeepsStoredOddities(t *testing.T) {
	r := NetworkPolicyResource()
	// A CIDR with a leading zero, which strict parsing refuses, stored before.
	odd := func(np *networkingv1.NetworkPolicy) {
		np.Spec.Egress[0].To = []networkingv1.NetworkPolicyPeer{ipBlockPeer("010.0.0.0/8")}
	}
	old := makePolicy(odd)
	if errs := r.Validate(old); len(errs) == 0 {
		t.Fatal("a CIDR with a leading zero should be refused on create")
	}
	if errs := r.ValidateUpdate(makePolicy(odd), old); len(errs) != 0 {
		t.Errorf("an update keeping the stored CIDR is refused: %v", errs)
	}
	// Expression values are the part of a selector whose validation is relaxed.
	badValue := func(np *networkingv1.NetworkPolicy) {
		np.Spec.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"no good"}}}
	}
	if errs := r.ValidateUpdate(makePolicy(badValue), makePolicy(badValue)); len(errs) != 0 {
		t.Errorf("an update keeping the stored selector value is refused: %v", errs)
	}
	if errs := r.ValidateUpdate(makePolicy(badValue), makePolicy(nil)); len(errs) != 1 {
		t.Errorf("a new invalid selector value is accepted on update: %v", errs)
	}
}

func TestDefaultNetworkPolicy(t *testing.T) {
	tcp, udp := new(corev1.ProtocolTCP), new(corev1.ProtocolUDP)
	tests := []struct {
		name      string
		spec      networkingv1.NetworkPolicySpec
		wantTypes []networkingv1.PolicyType
	}{
		{name: "no rules is an ingress policy", wantTypes: []networkingv1.PolicyType{"Ingress"}},
		{name: "ingress rules", spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}},
			wantTypes: []networkingv1.PolicyType{"Ingress"}},
		{name: "egress rules add Egress", spec: networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{}}},
			wantTypes: []networkingv1.PolicyType{"Ingress", "Egress"}},
		{name: "explicit types kept", spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{"Egress"}},
			wantTypes: []networkingv1.PolicyType{"Egress"}},
	}
	r := NetworkPolicyResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			np := &networkingv1.NetworkPolicy{Spec: tc.spec}
			r.Default(np)
			if diff := cmp.Diff(tc.wantTypes, np.Spec.PolicyTypes); diff != "" {
				t.Errorf("policyTypes (-want +got):\n%s", diff)
			}
		})
	}
	np := makePolicy(func(np *networkingv1.NetworkPolicy) { np.Spec.PolicyTypes = nil })
	r.Default(np)
	if diff := cmp.Diff(tcp, ingressPort(np).Protocol); diff != "" {
		t.Errorf("ingress port protocol (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(udp, np.Spec.Egress[0].Ports[0].Protocol); diff != "" {
		t.Errorf("egress port protocol kept (-want +got):\n%s", diff)
	}
}

func TestNetworkPolicyRowAndWarnings(t *testing.T) {
	r := NetworkPolicyResource()
	now := created.Add(3 * time.Hour)
	if diff := cmp.Diff([]interface{}{"db", "app=db", "3h"}, r.Row(makePolicy(nil), now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	all := makePolicy(func(np *networkingv1.NetworkPolicy) { np.Spec.PodSelector = metav1.LabelSelector{} })
	if diff := cmp.Diff([]interface{}{"db", "<none>", "3h"}, r.Row(all, now)); diff != "" {
		t.Errorf("row of an empty selector (-want +got):\n%s", diff)
	}
	var names []string
	for _, c := range r.Columns {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Pod-Selector", "Age"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	hostBits := makePolicy(func(np *networkingv1.NetworkPolicy) {
		np.Spec.Egress[0].To = []networkingv1.NetworkPolicyPeer{ipBlockPeer("10.0.0.1/8")}
	})
	want := []string{`spec.egress[0].to[0].ipBlock.cidr: CIDR value "10.0.0.1/8" is ambiguous in this context (should be "10.0.0.0/8" or "10.0.0.1/32"?)`}
	if diff := cmp.Diff(want, r.Warnings(hostBits, nil)); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}
