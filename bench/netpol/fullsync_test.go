package netpol

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/knftables"

	"github.com/tranche/tranche/internal/netns"
	enginepkg "github.com/tranche/tranche/internal/netpol"
	"github.com/tranche/tranche/internal/testutil"
)

// fullSyncGoal is issue 19's bound on a full sync against `nft -f` of the same table.
const fullSyncGoal = 1.5

// BenchmarkFullSync compiles NETPOL_FULLSYNC_POLICIES policies (default 1,000), each
// selecting NETPOL_FULLSYNC_PODS pods of this node (default 100), and writes them with
// one full sync into an empty network namespace through the engine (a nested nft
// script, as the agent writes it), then loads the very table it produced (`nft list table`) with `nft -f`
// into another empty namespace: the ratio of the two is the engine's overhead over the
// kernel's own cost; then the partial syncs of one policy changed and one peer pod
// relabelled, through an Incremental as the agent makes them. Root only; run it with
// -benchtime 1x.
func BenchmarkFullSync(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("the full-sync benchmark needs root: it creates network namespaces and runs nft")
	}
	policies := fullSyncEnv(b, "NETPOL_FULLSYNC_POLICIES", 1000)
	podsPer := fullSyncEnv(b, "NETPOL_FULLSYNC_PODS", 100)
	snap := fullSyncSnapshot(policies, podsPer)

	prefix := fmt.Sprintf("bfs%d-", os.Getpid())
	ours, load := testutil.NetnsNamed(b, prefix+"engine"), testutil.NetnsNamed(b, prefix+"load")

	start := time.Now()
	m := enginepkg.Compile(snap)
	compile := time.Since(start)
	var nft knftables.Interface
	fullSyncIn(b, ours, func() error {
		var err error
		nft, err = knftables.New(knftables.IPv4Family, enginepkg.TableName)
		return err
	})
	s := enginepkg.NewSyncer(nft, nil, nil)
	s.LoadFullSyncsWith(enginepkg.LoadWithNFT) // as the agent's runner does
	var sync time.Duration
	cpu0, self0 := childCPU(), selfCPU()
	fullSyncIn(b, ours, func() error {
		start := time.Now()
		err := s.Sync(context.Background(), m, true, nil)
		sync = time.Since(start)
		return err
	})
	syncCPU, syncSelf := childCPU()-cpu0, selfCPU()-self0

	var dump bytes.Buffer
	fullSyncNFT(b, ours, nil, &dump, "list", "table", "ip", enginepkg.TableName)
	rules := strings.Count(dump.String(), "\n")
	cpu0 = childCPU()
	start = time.Now()
	fullSyncNFT(b, load, bytes.NewReader(dump.Bytes()), nil, "-f", "-")
	loadTime := time.Since(start)
	loadCPU := childCPU() - cpu0

	// Beside it, the partial syncs of one change to that table, as the agent's runner
	// makes them: the change recorded in an Incremental (which compiles again what it
	// touches), then a sync that renders and writes what changed.
	inc := enginepkg.NewIncremental(snap)
	fullSyncIn(b, ours, func() error { return s.Sync(context.Background(), inc.Model(), true, nil) })
	partial := func(change func()) (update, write time.Duration) {
		start := time.Now()
		change()
		m := inc.Model()
		update = time.Since(start)
		fullSyncIn(b, ours, func() error {
			start := time.Now()
			err := s.Sync(context.Background(), m, false, nil)
			write = time.Since(start)
			return err
		})
		return update, write
	}
	policyUpdate, policyWrite := partial(func() {
		np := snap.Policies[0].DeepCopy()
		port := intstr.FromInt32(79)
		np.Spec.Ingress[0].Ports[0].Port = &port
		inc.SetPolicy(np.Namespace+"/"+np.Name, np)
	})
	podUpdate, podWrite := partial(func() {
		p := snap.Pods[len(snap.Pods)-1].DeepCopy() // a client, peer of every 20th policy
		p.Labels = map[string]string{"role": "nobody"}
		inc.SetPod(p.Namespace+"/"+p.Name, p)
	})

	b.ReportMetric(sync.Seconds(), "sync-s")
	b.ReportMetric(sync.Seconds()/loadTime.Seconds(), "x-nft-load")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "policies×pods\tcompile\tour full sync\tnft -f of its table (limit)\tratio (goal <= %.1f)\tsync nft CPU\tsync Go CPU\tnft -f CPU\ttable lines\t\n", fullSyncGoal)
	fmt.Fprintf(tw, "%d×%d\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%d\t\n", policies, podsPer, compile.Round(time.Millisecond), sync.Round(time.Millisecond),
		loadTime.Round(time.Millisecond), sync.Seconds()/loadTime.Seconds(), syncCPU.Round(time.Millisecond), syncSelf.Round(time.Millisecond), loadCPU.Round(time.Millisecond), rules)
	tw.Flush()
	fmt.Printf("partial sync after one policy changed: %s (update of the model %s, sync %s); after one peer pod relabelled: %s (update %s, sync %s)\n",
		(policyUpdate + policyWrite).Round(time.Millisecond), policyUpdate.Round(time.Microsecond), policyWrite.Round(time.Millisecond),
		(podUpdate + podWrite).Round(time.Millisecond), podUpdate.Round(time.Microsecond), podWrite.Round(time.Millisecond))
}

// fullSyncSnapshot is node-0's view: policies spread over namespaces of podsPer local
// pods each (every policy selects all of its namespace's pods), each policy with an
// ingress rule from 5 client pods (elsewhere) on one port and an egress rule to an
// ipBlock with an except on a port range, so that every shape of rule is present.
func fullSyncSnapshot(policies, podsPer int) enginepkg.Snapshot {
	nsCount := max(1, policies/100)
	var snap enginepkg.Snapshot
	snap.NodeName = "node-0"
	ip := 0
	nextIP := func() string {
		ip++
		return fmt.Sprintf("10.%d.%d.%d", 128+ip/65536, (ip/256)%256, ip%256)
	}
	for n := 0; n < nsCount; n++ {
		ns := fmt.Sprintf("ns-%d", n)
		snap.Namespaces = append(snap.Namespaces, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"kubernetes.io/metadata.name": ns}}})
		for p := 0; p < podsPer; p++ {
			snap.Pods = append(snap.Pods, fullSyncPod(ns, fmt.Sprintf("srv-%d", p), "node-0", nextIP(), map[string]string{"app": "srv"}))
		}
		for c := 0; c < 100; c++ {
			snap.Pods = append(snap.Pods, fullSyncPod(ns, fmt.Sprintf("cli-%d", c), "node-1", nextIP(), map[string]string{"role": fmt.Sprintf("client-%d", c%20)}))
		}
	}
	tcp := v1.ProtocolTCP
	for i := 0; i < policies; i++ {
		port, from, to := intstr.FromInt32(int32(80+i%50)), intstr.FromInt32(int32(8000+i%100)), int32(8100+i%100)
		snap.Policies = append(snap.Policies, &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%nsCount), Name: fmt.Sprintf("policy-%d", i)},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "srv"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": fmt.Sprintf("client-%d", i%20)}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
				}},
				Egress: []networkingv1.NetworkPolicyEgressRule{{
					To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: fmt.Sprintf("172.%d.0.0/16", 16+i%16), Except: []string{fmt.Sprintf("172.%d.%d.0/24", 16+i%16, i%256)}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &from, EndPort: &to}},
				}},
			},
		})
	}
	return snap
}

func fullSyncPod(ns, name, node, ip string, labels map[string]string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:   v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: ip}}
}

func fullSyncEnv(b *testing.B, name string, def int) int {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

func fullSyncIn(b *testing.B, ns string, fn func() error) {
	b.Helper()
	if err := netns.Do(ns, fn); err != nil {
		b.Fatal(err)
	}
}

// fullSyncNFT runs nft args in ns.
func fullSyncNFT(b *testing.B, ns string, stdin *bytes.Reader, stdout *bytes.Buffer, args ...string) {
	b.Helper()
	fullSyncIn(b, ns, func() error {
		var errb bytes.Buffer
		cmd := exec.Command("nft", args...)
		if stdin != nil {
			cmd.Stdin = stdin
		}
		if stdout != nil {
			cmd.Stdout = stdout
		}
		cmd.Stderr = &errb
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("nft %s: %v: %.2000s", strings.Join(args, " "), err, errb.String())
		}
		return nil
	})
}

// selfCPU is the CPU time of this process (all its threads, the benchmark's own
// work included: only differences around one step mean something).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// childCPU is the CPU time of the process's waited-for children (the nft commands).
func childCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
