package netpol

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/bench/benchcluster"
	"github.com/tranche/tranche/internal/netns"
)

// serverImage runs the servers: the agnhost image's netexec, which logs no requests.
const serverImage = "registry.k8s.io/e2e-test-images/agnhost:2.53"

// env is a started cluster with an admin client and the benchmark's namespace.
type env struct {
	c      *benchcluster.Cluster
	client kubernetes.Interface
	ctx    context.Context
	ns     string
}

// start brings up a cluster of n nodes (tag in its namespace prefix) and creates ns.
func start(b *testing.B, tag string, n int, ns string) *env {
	b.Helper()
	bin := benchcluster.NeedRoot(b, "bench/netpol")
	c := benchcluster.Start(b, bin, tag, n)
	client := c.Client(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	b.Cleanup(cancel)
	e := &env{c: c, client: client, ctx: ctx, ns: ns}
	e.namespace(b, ns)
	return e
}

// namespace creates a namespace labelled ns=<name>.
func (e *env) namespace(b *testing.B, name string) {
	b.Helper()
	if _, err := e.client.CoreV1().Namespaces().Create(e.ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{"ns": name}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// pod creates a pod on node: a netexec server on 8080 when server is set, else a
// client that sleeps; it waits until the pod is Ready and returns it.
func (e *env) pod(b *testing.B, name, node string, labels map[string]string, server bool) *v1.Pod {
	b.Helper()
	ctr := v1.Container{Name: "c", Image: "busybox", Command: []string{"sleep", "3600"}}
	if server {
		ctr = v1.Container{Name: "s", Image: serverImage, Args: []string{"netexec", "--http-port=8080", "--udp-port=-1"}}
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: new(int64), Containers: []v1.Container{ctr}},
	}
	if _, err := e.client.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		got, err := e.client.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err == nil && got.Status.PodIP != "" {
			for _, cond := range got.Status.Conditions {
				if cond.Type == v1.PodReady && cond.Status == v1.ConditionTrue {
					return got
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatalf("pod %s/%s not Ready after a minute", e.ns, name)
	return nil
}

// podNS is the network namespace of a pod on the host (the agent names it
// <prefix>p-<uid[:12]>).
func (e *env) podNS(p *v1.Pod) string {
	return e.c.Prefix + "p-" + strings.ReplaceAll(string(p.UID), "-", "")[:12]
}

// ingressFrom is a policy in ns selecting podLabels whose one ingress rule admits pods
// with fromLabels on TCP port (no rule at all when fromLabels is nil: deny all ingress).
func ingressFrom(ns, name string, podLabels, fromLabels map[string]string, port int32) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: podLabels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if fromLabels != nil {
		tcp, p := v1.ProtocolTCP, intstr.FromInt32(port)
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: fromLabels}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}},
		}}
	}
	return np
}

// createPolicy creates np and fails b when the API refuses it.
func (e *env) createPolicy(b *testing.B, np *networkingv1.NetworkPolicy) {
	b.Helper()
	if _, err := e.client.NetworkingV1().NetworkPolicies(np.Namespace).Create(e.ctx, np, metav1.CreateOptions{}); err != nil {
		b.Fatalf("creating NetworkPolicy %s/%s: %v", np.Namespace, np.Name, err)
	}
}

// reaches says whether a TCP connection from the network namespace nsName to addr is
// accepted within timeout.
func reaches(nsName, addr string, timeout time.Duration) bool {
	conn, err := netns.Dial(nsName, "tcp4", addr, timeout)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// waitReach polls until a connection from nsName to addr is accepted (want) or dropped
// (!want), for up to a minute.
func waitReach(b *testing.B, nsName, addr string, want bool) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if reaches(nsName, addr, 300*time.Millisecond) == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("a connection from %s to %s: still %s after a minute", nsName, addr, map[bool]string{true: "dropped", false: "accepted"}[want])
}

// envInt is the integer in the environment variable name, else def.
func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// hostPort joins a pod IP and a port.
func hostPort(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }
