package netpol

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// incWorld is a snapshot kept by key, changed one object at a time both in itself
// and in an Incremental, whose model must equal Compile's of the snapshot.
type incWorld struct {
	pols map[string]*networkingv1.NetworkPolicy
	pods map[string]*v1.Pod
	nss  map[string]*v1.Namespace
	inc  *Incremental
}

func (w *incWorld) snapshot() Snapshot {
	s := Snapshot{NodeName: "node-1"}
	for _, k := range slices.Sorted(func(y func(string) bool) {
		for k := range w.pols {
			if !y(k) {
				return
			}
		}
	}) {
		s.Policies = append(s.Policies, w.pols[k])
	}
	for _, p := range w.pods {
		s.Pods = append(s.Pods, p)
	}
	for _, ns := range w.nss {
		s.Namespaces = append(s.Namespaces, ns)
	}
	return s
}

func (w *incWorld) check(t *testing.T, what string) {
	t.Helper()
	got, want := w.inc.Model(), Compile(w.snapshot())
	if diff := cmp.Diff(want, got, cmpIP); diff != "" {
		t.Errorf("%s: incremental model (+) differs from Compile's (-):\n%s", what, diff)
	}
}

// TestIncrementalEqualsCompile changes policies, pods and namespaces one at a time
// and compares the Incremental's model with a whole compilation after each change.
func TestIncrementalEqualsCompile(t *testing.T) {
	pods, nss := world()
	w := &incWorld{pols: map[string]*networkingv1.NetworkPolicy{}, pods: map[string]*v1.Pod{}, nss: map[string]*v1.Namespace{}}
	pols := append(examplePolicies(),
		makePolicy("y", "from-ns-x", func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", "red")}}}}
		}),
		makePolicy("x", "egress-named-block", func(np *networkingv1.NetworkPolicy) {
			np.Spec.PodSelector = *sel("pod", "a")
			np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
			np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.244.0.0/16"}}},
				Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("serve-80"))}}}
		}),
		makePolicy("x", "bad", func(np *networkingv1.NetworkPolicy) {
			np.Spec.PodSelector = *sel("pod", "a")
			np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To[v1.Protocol]("ICMP")}}}}
		}))
	for _, p := range pods {
		w.pods[p.Namespace+"/"+p.Name] = p
	}
	for _, ns := range nss {
		w.nss[ns.Name] = ns
	}
	for _, np := range pols {
		w.pols[np.Namespace+"/"+np.Name] = np
	}
	w.inc = NewIncremental(w.snapshot())
	w.check(t, "start")

	setPod := func(key string, mut func(*v1.Pod)) {
		var p *v1.Pod
		if mut != nil {
			p = w.pods[key]
			if p == nil {
				ns, name, _ := strings.Cut(key, "/")
				p = makePod(ns, name, "node-1", "", nil)
			}
			p = p.DeepCopy()
			mut(p)
			w.pods[key] = p
		} else {
			delete(w.pods, key)
		}
		w.inc.SetPod(key, p)
	}
	setPolicy := func(key string, np *networkingv1.NetworkPolicy) {
		if np == nil {
			delete(w.pols, key)
		} else {
			w.pols[key] = np
		}
		w.inc.SetPolicy(key, np)
	}
	setNS := func(name string, lbls map[string]string) {
		ns := makeNS(name, lbls)
		w.nss[name] = ns
		w.inc.SetNamespace(name, ns)
	}

	steps := []struct {
		name string
		do   func()
	}{
		{"peer relabelled", func() { setPod("x/b", func(p *v1.Pod) { p.Labels = map[string]string{"pod": "other"} }) }},
		{"selected pod relabelled out", func() { setPod("x/a", func(p *v1.Pod) { p.Labels = map[string]string{"pod": "gone"} }) }},
		{"selected pod relabelled back", func() { setPod("x/a", func(p *v1.Pod) { p.Labels = map[string]string{"pod": "a"} }) }},
		{"new pod on the node", func() {
			setPod("x/d", func(p *v1.Pod) { p.Labels, p.Status.PodIP = map[string]string{"pod": "b"}, "10.244.1.9" })
		}},
		{"pod address changed", func() { setPod("x/d", func(p *v1.Pod) { p.Status.PodIP = "10.244.1.10" }) }},
		{"named port added", func() {
			setPod("z/c", func(p *v1.Pod) {
				p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "serve-80", ContainerPort: 8080}}
			})
		}},
		{"pod terminated", func() { setPod("x/d", func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded }) }},
		{"pod deleted", func() { setPod("y/c", nil) }},
		{"namespace labelled into a namespaceSelector", func() { setNS("z", map[string]string{"ns": "z", "team": "red"}) }},
		{"namespace deleted", func() {
			delete(w.nss, "z")
			w.inc.SetNamespace("z", nil)
		}},
		{"policy changed", func() {
			np := w.pols["x/allow-a"].DeepCopy()
			np.Spec.Ingress = np.Spec.Ingress[:1]
			setPolicy("x/allow-a", np)
		}},
		{"policy selects no pod of the node", func() {
			np := w.pols["x/deny-all"].DeepCopy()
			np.Spec.PodSelector = *sel("pod", "none")
			setPolicy("x/deny-all", np)
		}},
		{"policy deleted", func() { setPolicy("x/egress-dns", nil) }},
		{"policy created", func() { setPolicy("x/egress-dns", examplePolicies()[2]) }},
	}
	for _, st := range steps {
		st.do()
		w.check(t, st.name)
	}
}

// manyPolicies is a node with n policies in 10 namespaces, each selecting the
// namespace's 10 server pods on node-1 and allowing ingress from its clients (on
// node-2, label role=client-(i%20)) and egress to the pods of namespaces labelled
// team=i%5.
func manyPolicies(n int) *incWorld {
	w := &incWorld{pols: map[string]*networkingv1.NetworkPolicy{}, pods: map[string]*v1.Pod{}, nss: map[string]*v1.Namespace{}}
	ip := 0
	for ns := 0; ns < 10; ns++ {
		name := fmt.Sprintf("ns-%d", ns)
		w.nss[name] = makeNS(name, map[string]string{"team": fmt.Sprint(ns % 5)})
		for p := 0; p < 30; p++ {
			ip++
			node, lbls := "node-1", map[string]string{"app": "srv"}
			if p >= 10 {
				node, lbls = "node-2", map[string]string{"role": fmt.Sprintf("client-%d", p%20)}
			}
			pod := makePod(name, fmt.Sprintf("pod-%d", p), node, fmt.Sprintf("10.244.%d.%d", ip/250, ip%250+1), lbls)
			w.pods[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	for i := 0; i < n; i++ {
		np := makePolicy(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("policy-%d", i), func(np *networkingv1.NetworkPolicy) {
			np.Spec.PodSelector = *sel("app", "srv")
			np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
			np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("role", fmt.Sprintf("client-%d", i%20))}},
				Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromInt32(int32(80 + i%50)))}}}
			np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", fmt.Sprint(i%5)), PodSelector: sel("role", "client-0")}}}}
		})
		w.pols[np.Namespace+"/"+np.Name] = np
	}
	w.inc = NewIncremental(w.snapshot())
	return w
}

// TestPartialSyncWork counts the work of partial syncs among 1,000 policies: one
// policy changed is one policy compiled and rendered; a peer pod relabelled compiles
// only the policies whose peers it enters or leaves; a namespace relabelled only the
// policies whose namespaceSelectors match it before or after. Each transaction holds
// only the changed elements and chains, and the table ends as a full sync writes it.
func TestPartialSyncWork(t *testing.T) {
	w := manyPolicies(1000)
	fake := newFake()
	s := NewSyncer(fake, nil, nil)
	if err := s.Sync(context.Background(), w.inc.Model(), true, nil); err != nil {
		t.Fatal(err)
	}
	step := func(what string, change func(), wantCompiles, wantRendered int, wantTx []string) {
		t.Helper()
		compiles, rendered := w.inc.compiles, s.rendered
		change()
		got := txLines(t, s, fake, w.inc.Model())
		if n := w.inc.compiles - compiles; n != wantCompiles {
			t.Errorf("%s: %d policies compiled, want %d", what, n, wantCompiles)
		}
		if n := s.rendered - rendered; n != wantRendered {
			t.Errorf("%s: %d policies and pods rendered, want %d", what, n, wantRendered)
		}
		if diff := cmp.Diff(wantTx, got); diff != "" {
			t.Errorf("%s: transaction (-want +got):\n%s", what, diff)
		}
		w.check(t, what)
	}

	step("one policy's port changed", func() {
		np := w.pols["ns-3/policy-3"].DeepCopy()
		np.Spec.Ingress[0].Ports = []networkingv1.NetworkPolicyPort{tcp(intstr.FromInt32(8080))}
		w.pols["ns-3/policy-3"] = np
		w.inc.SetPolicy("ns-3/policy-3", np)
	}, 1, 1, []string{
		"add element ip tranche-netpol pol-in-ns-3.policy-3-0-ports { tcp . 8080 }",
		"delete element ip tranche-netpol pol-in-ns-3.policy-3-0-ports { tcp . 83 }",
	})

	// elements lists the element changes of address ip in the sets of direction d of
	// the policies i for which add(i) or del(i) hold: added first, then deleted, each
	// sorted by set, as partialTx writes them.
	elements := func(d, ip string, add, del func(i int) bool) []string {
		var adds, dels []string
		for i := 0; i < 1000; i++ {
			set := fmt.Sprintf("pol-%s-ns-%d.policy-%d-0-pods", d, i%10, i)
			if add(i) {
				adds = append(adds, fmt.Sprintf("add element ip tranche-netpol %s { %s }", set, ip))
			}
			if del(i) {
				dels = append(dels, fmt.Sprintf("delete element ip tranche-netpol %s { %s }", set, ip))
			}
		}
		slices.Sort(adds)
		slices.Sort(dels)
		return append(adds, dels...)
	}

	// ns-4/pod-14 (role client-14) is a peer of ns-4's policies i%20 == 14; as
	// client-4 it is one of those with i%20 == 4: 50 policies each.
	ip := w.pods["ns-4/pod-14"].Status.PodIP
	step("peer pod relabelled", func() {
		p := w.pods["ns-4/pod-14"].DeepCopy()
		p.Labels = map[string]string{"role": "client-4"}
		w.pods["ns-4/pod-14"] = p
		w.inc.SetPod("ns-4/pod-14", p)
	}, 100, 100, elements("in", ip, func(i int) bool { return i%20 == 4 }, func(i int) bool { return i%20 == 14 }))

	// ns-7's client-0 (pod-20) is an egress peer of the policies i%5 == 2 (team 2);
	// with team 4 of those i%5 == 4: 200 each.
	ip = w.pods["ns-7/pod-20"].Status.PodIP
	step("namespace relabelled", func() {
		w.nss["ns-7"] = makeNS("ns-7", map[string]string{"team": "4"})
		w.inc.SetNamespace("ns-7", w.nss["ns-7"])
	}, 400, 400, elements("eg", ip, func(i int) bool { return i%5 == 4 }, func(i int) bool { return i%5 == 2 }))

	// A server pod of the node relabelled out of its namespace's 100 policies: the
	// policies are compiled again, but only the pod's own objects change.
	step("selected pod relabelled out", func() {
		p := w.pods["ns-1/pod-0"].DeepCopy()
		p.Labels = nil
		w.pods["ns-1/pod-0"] = p
		w.inc.SetPod("ns-1/pod-0", p)
	}, 100, 0, []string{
		"delete element ip tranche-netpol ingress-pods { 10.244.0.32 }",
		"delete element ip tranche-netpol egress-pods { 10.244.0.32 }",
		"flush chain ip tranche-netpol pod-eg-ns-1.pod-0",
		"flush chain ip tranche-netpol pod-in-ns-1.pod-0",
		"delete chain ip tranche-netpol pod-eg-ns-1.pod-0",
		"delete chain ip tranche-netpol pod-in-ns-1.pod-0",
		"delete counter ip tranche-netpol deny-eg-ns-1.pod-0",
		"delete counter ip tranche-netpol deny-in-ns-1.pod-0",
	})

	// The table the partial syncs left is the table a full sync writes (elements in
	// another order).
	want := newFake()
	if err := NewSyncer(want, nil, nil).Sync(context.Background(), Compile(w.snapshot()), true, nil); err != nil {
		t.Fatal(err)
	}
	sorted := func(dump string) []string {
		lines := strings.Split(dump, "\n")
		slices.Sort(lines)
		return lines
	}
	if diff := cmp.Diff(sorted(want.Dump()), sorted(fake.Dump())); diff != "" {
		t.Errorf("after the partial syncs (-full sync +partial syncs):\n%s", diff)
	}
}
