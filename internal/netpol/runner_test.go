package netpol

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/knftables"
)

func TestTrackerDropsNoOps(t *testing.T) {
	pod := makePod("x", "a", "node-1", "10.244.1.2", map[string]string{"pod": "a"})
	np := makePolicy("x", "p", func(np *networkingv1.NetworkPolicy) { np.Spec.PodSelector = *sel("pod", "a") })
	ns := makeNS("x", nil)
	cases := []struct {
		name    string
		record  func(tr *tracker)
		wakes   bool
		changed string // the keys drained: policies, then "pod KEY", then "ns NAME"
	}{
		{"pod condition changed", func(tr *tracker) {
			cur := pod.DeepCopy()
			cur.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
			tr.pod(pod, cur)
		}, false, ""},
		{"pod relabelled", func(tr *tracker) {
			cur := pod.DeepCopy()
			cur.Labels["pod"] = "b"
			tr.pod(pod, cur)
		}, true, "pod x/a"},
		{"pod got its address", func(tr *tracker) {
			old := pod.DeepCopy()
			old.Status.PodIP = ""
			tr.pod(old, pod)
		}, true, "pod x/a"},
		{"pod terminated", func(tr *tracker) {
			cur := pod.DeepCopy()
			cur.Status.Phase = v1.PodSucceeded
			tr.pod(pod, cur)
		}, true, "pod x/a"},
		{"named port added", func(tr *tracker) {
			cur := pod.DeepCopy()
			cur.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 80}}
			tr.pod(pod, cur)
		}, true, "pod x/a"},
		{"namespace annotated", func(tr *tracker) {
			cur := ns.DeepCopy()
			cur.Annotations = map[string]string{"a": "b"}
			tr.namespace(ns, cur)
		}, false, ""},
		{"namespace relabelled", func(tr *tracker) {
			cur := ns.DeepCopy()
			cur.Labels["team"] = "blue"
			tr.namespace(ns, cur)
		}, true, "ns x"},
		{"policy labelled", func(tr *tracker) {
			cur := np.DeepCopy()
			cur.Labels = map[string]string{"a": "b"}
			tr.policy(np, cur)
		}, false, ""},
		{"policy spec changed", func(tr *tracker) {
			cur := np.DeepCopy()
			cur.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
			tr.policy(np, cur)
		}, true, "x/p"},
		{"policy deleted", func(tr *tracker) { tr.policy(np, nil) }, true, "x/p"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			tc.record(tr)
			woke := len(tr.wake) == 1
			changed, seen := tr.drain()
			if woke != tc.wakes || (len(seen) > 0) != tc.wakes {
				t.Errorf("woke = %v with %d changes, want %v", woke, len(seen), tc.wakes)
			}
			got := changed.policies
			for _, k := range changed.pods {
				got = append(got, "pod "+k)
			}
			for _, k := range changed.namespaces {
				got = append(got, "ns "+k)
			}
			if got := strings.Join(got, ","); got != tc.changed {
				t.Errorf("changed = %q, want %q", got, tc.changed)
			}
		})
	}
}

// TestRunner runs the whole runner over a fake API and a fake table: a policy
// created through the API isolates the node's pod, a namespace relabelled and a pod
// deleted change a namespaceSelector's set, and deleting the policies empties the
// table again.
func TestRunner(t *testing.T) {
	pods, nss := world()
	client := fake.NewSimpleClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ns := range nss {
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	r, err := NewRunner(RunnerConfig{NodeName: "node-1", Client: client, NFT: nft, MinSyncPeriod: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	waitTable := func(what string, ok func(dump string) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r.syncer.mu.Lock()
			dump := ""
			if nft.Table != nil {
				dump = nft.Dump()
			}
			r.syncer.mu.Unlock()
			if ok(dump) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: table never got there:\n%s", what, dump)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitTable("first sync", func(d string) bool { return strings.Contains(d, "add chain ip tranche-netpol forward-ingress") })
	np := makePolicy("x", "deny", nil)
	if _, err := client.NetworkingV1().NetworkPolicies("x").Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTable("policy created", func(d string) bool {
		return strings.Contains(d, "add element ip tranche-netpol ingress-pods { 10.244.1.2 : goto pod-in-x.a }")
	})
	// Partial syncs of a namespace and a pod changed, fed from the listers.
	fromRed := makePolicy("x", "from-red", func(np *networkingv1.NetworkPolicy) {
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", "red")}}}}
	})
	if _, err := client.NetworkingV1().NetworkPolicies("x").Create(ctx, fromRed, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTable("policy from-red created", func(d string) bool { return strings.Contains(d, "add chain ip tranche-netpol pol-in-x.from-red") })
	y := makeNS("y", map[string]string{"ns": "y", "team": "red"})
	if _, err := client.CoreV1().Namespaces().Update(ctx, y, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTable("namespace y labelled team=red", func(d string) bool {
		return strings.Contains(d, "add element ip tranche-netpol pol-in-x.from-red-0-pods { 10.244.2.3 }")
	})
	if err := client.CoreV1().Pods("y").Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTable("pod y/b deleted", func(d string) bool {
		return !strings.Contains(d, "10.244.2.3") && strings.Contains(d, "add element ip tranche-netpol pol-in-x.from-red-0-pods { 10.244.2.2 }")
	})
	for _, name := range []string{"deny", "from-red"} {
		if err := client.NetworkingV1().NetworkPolicies("x").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitTable("policies deleted", func(d string) bool {
		return !strings.Contains(d, "pod-in-x.a") && strings.Contains(d, "forward-ingress")
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestRunnerNeedsNFT: without an nftables interface NewRunner fails instead of writing
// into the namespace it runs in (a unit test's is the host's).
func TestRunnerNeedsNFT(t *testing.T) {
	_, err := NewRunner(RunnerConfig{NodeName: "node-1", Client: fake.NewSimpleClientset()})
	if err == nil || !strings.Contains(err.Error(), "no nftables interface") {
		t.Fatalf("NewRunner without NFT: %v, want an error naming it", err)
	}
}
