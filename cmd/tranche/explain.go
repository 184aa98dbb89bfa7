package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/netpol"
)

// exitDenied is tranche explain access's exit code for a denied connection; errors exit 1
// as with every other command.
const exitDenied = 2

func explainCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Explain what the cluster's objects decide",
	}
	cmd.AddCommand(explainAccessCmd())
	return cmd
}

func explainAccessCmd() *cobra.Command {
	var kubeconfig, kubeContext, namespace string
	cmd := &cobra.Command{
		Use:   "access FROM TO:PORT[/PROTO]",
		Short: "Say whether the NetworkPolicies allow a connection, and which policy and rule decide it",
		Long: "Decide one new connection from FROM to TO on PORT (TCP unless /UDP or /SCTP is given) with the\n" +
			"NetworkPolicies, pods and namespaces the API holds now, as the agents' rules decide it: the\n" +
			"source's egress policies and the destination's ingress policies must both allow it.\n\n" +
			"FROM and TO are a pod as NAMESPACE/NAME or NAME (namespace from -n, else the kubeconfig's),\n" +
			"or an IP address (IPv6 in brackets before the port: [fd00::1]:80). PORT is a number, or a\n" +
			"named container port of the destination pod. An address that is a pod's IP stands for that\n" +
			"pod; pods on the host network are outside NetworkPolicies. A Service's ClusterIP is judged\n" +
			"at each of its ready endpoints with the endpoint's target port, as the nodes judge it after\n" +
			"the proxy's DNAT: allowed only when every endpoint allows it.\n\n" +
			"Exit status: 0 allowed, 2 denied, 1 when the question cannot be answered (bad input,\n" +
			"unknown pod, API unreachable).",
		Example: "  tranche explain access x/a y/b:80\n  tranche explain access -n shop web db:5432/TCP\n  tranche explain access 10.0.0.7 web:http\n  tranche explain access x/a 10.96.0.10:53/UDP",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
			if namespace == "" {
				ns, _, err := cc.Namespace()
				if err != nil {
					return fmt.Errorf("reading the kubeconfig's namespace: %w", err)
				}
				namespace = ns
			}
			rc, err := cc.ClientConfig()
			if err != nil {
				return fmt.Errorf("loading the kubeconfig: %w", err)
			}
			client, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return err
			}
			allowed, err := explainAccess(cmd.Context(), client, namespace, args[0], args[1], cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if !allowed {
				os.Exit(exitDenied)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig to read the API with (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&kubeContext, "context", "", "kubeconfig context to use (default: the current one)")
	f.StringVarP(&namespace, "namespace", "n", "", "namespace of a pod given by name alone (default: the context's, else default)")
	return cmd
}

// accessQuery is a parsed FROM and TO:PORT[/PROTO].
type accessQuery struct {
	from, to netpol.Peer
	// port is the number, or "" with portName set for a named port.
	port     int32
	portName string
	protocol v1.Protocol
}

// parseAccess parses the two arguments; pod names default to namespace ns.
func parseAccess(ns, fromArg, toArg string) (accessQuery, error) {
	var q accessQuery
	var err error
	if q.from, err = parsePeer(ns, fromArg); err != nil {
		return q, fmt.Errorf("FROM %q: %w", fromArg, err)
	}
	i := strings.LastIndex(toArg, ":")
	if i < 0 {
		return q, fmt.Errorf("TO %q: want TO:PORT[/PROTO], e.g. web:80 or web:53/UDP", toArg)
	}
	host, portArg := toArg[:i], toArg[i+1:]
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if q.to, err = parsePeer(ns, host); err != nil {
		return q, fmt.Errorf("TO %q: %w", toArg, err)
	}
	q.protocol = v1.ProtocolTCP
	if p, proto, ok := strings.Cut(portArg, "/"); ok {
		portArg = p
		q.protocol = v1.Protocol(strings.ToUpper(proto))
		if q.protocol != v1.ProtocolTCP && q.protocol != v1.ProtocolUDP && q.protocol != v1.ProtocolSCTP {
			return q, fmt.Errorf("TO %q: protocol %q: want TCP, UDP or SCTP", toArg, proto)
		}
	}
	if n, err := strconv.Atoi(portArg); err == nil {
		if msgs := validation.IsValidPortNum(n); len(msgs) > 0 {
			return q, fmt.Errorf("TO %q: port %d: %s", toArg, n, msgs[0])
		}
		q.port = int32(n)
		return q, nil
	}
	if msgs := validation.IsValidPortName(portArg); len(msgs) > 0 {
		return q, fmt.Errorf("TO %q: port %q is neither a number nor a port name: %s", toArg, portArg, strings.Join(msgs, "; "))
	}
	if q.to.Pod == "" {
		return q, fmt.Errorf("TO %q: a named port (%q) needs a pod to look it up in, not an IP address", toArg, portArg)
	}
	q.portName = portArg
	return q, nil
}

// parsePeer reads an IP address, NAMESPACE/NAME or NAME (in ns).
func parsePeer(ns, s string) (netpol.Peer, error) {
	if ip, err := netip.ParseAddr(s); err == nil {
		return netpol.Peer{IP: ip.Unmap()}, nil
	}
	name := s
	if n, p, ok := strings.Cut(s, "/"); ok {
		ns, name = n, p
	}
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return netpol.Peer{}, fmt.Errorf("namespace %q: %s", ns, msgs[0])
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return netpol.Peer{}, fmt.Errorf("not an IP address, and not a pod name: %s", msgs[0])
	}
	return netpol.Peer{Namespace: ns, Pod: name}, nil
}

// explainAccess answers the question through the API, writes the explanation to out and
// reports whether the connection is allowed.
func explainAccess(ctx context.Context, client kubernetes.Interface, ns, fromArg, toArg string, out io.Writer) (bool, error) {
	q, err := parseAccess(ns, fromArg, toArg)
	if err != nil {
		return false, err
	}
	var fromPod, toPod *v1.Pod
	for _, end := range []struct {
		what string
		peer netpol.Peer
		pod  **v1.Pod
	}{{"FROM", q.from, &fromPod}, {"TO", q.to, &toPod}} {
		if end.peer.Pod == "" {
			continue
		}
		p, err := client.CoreV1().Pods(end.peer.Namespace).Get(ctx, end.peer.Pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, fmt.Errorf("%s: pod %q not found in namespace %q", end.what, end.peer.Pod, end.peer.Namespace)
		}
		if err != nil {
			return false, fmt.Errorf("%s: reading pod %s/%s: %w", end.what, end.peer.Namespace, end.peer.Pod, err)
		}
		if p.Status.PodIP == "" {
			return false, fmt.Errorf("%s: pod %s/%s has no IP address yet (not running on a node)", end.what, p.Namespace, p.Name)
		}
		*end.pod = p
	}
	if q.portName != "" {
		if q.port = namedPort(toPod, q.portName, q.protocol); q.port == 0 {
			return false, fmt.Errorf("TO %q: pod %s/%s has no %s container port named %q", toArg, toPod.Namespace, toPod.Name, q.protocol, q.portName)
		}
	}
	in := netpol.ExplainInput{Port: q.port, Protocol: q.protocol}
	if in.Policies, in.Pods, in.Namespaces, err = listState(ctx, client); err != nil {
		return false, err
	}
	// An address that is a pod's is that pod: its policies apply whichever way it is named.
	if q.from.Pod == "" {
		q.from, fromPod = podByIP(in.Pods, q.from)
	}
	if q.to.Pod == "" {
		q.to, toPod = podByIP(in.Pods, q.to)
	}
	if q.to.Pod == "" {
		// A Service's address: the node's proxy sends the connection to one of its
		// endpoints, and the policies judge the pod it reaches (after the DNAT).
		svc, targets, err := serviceTargets(ctx, client, in.Pods, q.to.IP, q.port, q.protocol)
		if err != nil {
			return false, err
		}
		if svc != nil {
			return explainService(out, q, in, svc, targets, fromPod)
		}
	}
	in.From, in.To = q.from, q.to
	d, err := netpol.Explain(in)
	if err != nil {
		return false, err
	}
	writeDecision(out, q, d, hostNetwork(fromPod), hostNetwork(toPod))
	return d.Allowed, nil
}

// serviceTarget is one endpoint pod of a Service port and the port it listens on.
type serviceTarget struct {
	pod  *v1.Pod
	port int32
}

// serviceTargets finds the Service whose ClusterIP is ip with a port port/proto, and
// the pods its ready or serving endpoints name, with their target port. It returns a
// nil Service when ip is no Service's.
func serviceTargets(ctx context.Context, client kubernetes.Interface, pods []*v1.Pod, ip netip.Addr, port int32, proto v1.Protocol) (*v1.Service, []serviceTarget, error) {
	svcs, err := client.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing Services: %w", err)
	}
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		if !slices.ContainsFunc(svc.Spec.ClusterIPs, func(s string) bool { a, err := netip.ParseAddr(s); return err == nil && a == ip }) {
			continue
		}
		var sp *v1.ServicePort
		for j := range svc.Spec.Ports {
			if p := &svc.Spec.Ports[j]; p.Port == port && p.Protocol == proto {
				sp = p
			}
		}
		if sp == nil {
			return nil, nil, fmt.Errorf("TO %s:%d/%s: Service %s/%s has no %s port %d", ip, port, proto, svc.Namespace, svc.Name, proto, port)
		}
		list, err := client.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
		if err != nil {
			return nil, nil, fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		var out []serviceTarget
		for _, es := range list.Items {
			var target int32
			for _, p := range es.Ports {
				if ptr.Deref(p.Name, "") == sp.Name && ptr.Deref(p.Protocol, v1.ProtocolTCP) == proto && p.Port != nil {
					target = *p.Port
				}
			}
			if target == 0 {
				continue
			}
			for _, ep := range es.Endpoints {
				if !ptr.Deref(ep.Conditions.Ready, false) && !ptr.Deref(ep.Conditions.Serving, false) {
					continue
				}
				if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
					continue
				}
				for _, p := range pods {
					if p.Namespace == ep.TargetRef.Namespace && p.Name == ep.TargetRef.Name {
						out = append(out, serviceTarget{pod: p, port: target})
					}
				}
			}
		}
		sort.Slice(out, func(a, b int) bool {
			return out[a].pod.Namespace+"/"+out[a].pod.Name < out[b].pod.Namespace+"/"+out[b].pod.Name
		})
		return svc, out, nil
	}
	return nil, nil, nil
}

// explainService decides the connection for each endpoint pod the Service may send it
// to, as the kernel does after the proxy's DNAT. It is allowed only when every endpoint
// allows it (else some connections fail, depending on the endpoint chosen).
func explainService(out io.Writer, q accessQuery, in netpol.ExplainInput, svc *v1.Service, targets []serviceTarget, fromPod *v1.Pod) (bool, error) {
	fmt.Fprintf(out, "%s -> %s:%d/%s is Service %s/%s: judged at the endpoint each connection reaches (after the proxy's DNAT)\n",
		peerName(q.from), q.to.IP, q.port, q.protocol, svc.Namespace, svc.Name)
	if len(targets) == 0 {
		fmt.Fprintln(out, "  no ready endpoint: the connection is refused by the proxy, not by a policy")
		return false, nil
	}
	allowed := true
	for _, t := range targets {
		tq := q
		tq.to, tq.port = netpol.Peer{Namespace: t.pod.Namespace, Pod: t.pod.Name}, t.port
		in.From, in.To, in.Port = q.from, tq.to, t.port
		d, err := netpol.Explain(in)
		if err != nil {
			return false, err
		}
		allowed = allowed && d.Allowed
		var b strings.Builder
		writeDecision(&b, tq, d, hostNetwork(fromPod), hostNetwork(t.pod))
		for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			fmt.Fprintln(out, "  "+line)
		}
	}
	return allowed, nil
}

func hostNetwork(p *v1.Pod) bool { return p != nil && p.Spec.HostNetwork }

// podByIP returns the pod (not on the host network, not terminated) whose address is
// peer's IP, or peer unchanged.
func podByIP(pods []*v1.Pod, peer netpol.Peer) (netpol.Peer, *v1.Pod) {
	for _, p := range pods {
		if p.Spec.HostNetwork || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		for _, ip := range p.Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil && a.Unmap() == peer.IP {
				return netpol.Peer{Namespace: p.Namespace, Pod: p.Name, IP: peer.IP}, p
			}
		}
	}
	return peer, nil
}

// namedPort finds a container port of pod by name and protocol; 0 when there is none.
func namedPort(pod *v1.Pod, name string, proto v1.Protocol) int32 {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			pp := p.Protocol
			if pp == "" {
				pp = v1.ProtocolTCP
			}
			if p.Name == name && pp == proto {
				return p.ContainerPort
			}
		}
	}
	return 0
}

// listState reads every NetworkPolicy, pod and namespace: peers may be selected in any
// namespace.
func listState(ctx context.Context, client kubernetes.Interface) ([]*networkingv1.NetworkPolicy, []*v1.Pod, []*v1.Namespace, error) {
	nps, err := client.NetworkingV1().NetworkPolicies(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("listing NetworkPolicies: %w", err)
	}
	pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	nss, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("listing namespaces: %w", err)
	}
	var policies []*networkingv1.NetworkPolicy
	for i := range nps.Items {
		policies = append(policies, &nps.Items[i])
	}
	var podList []*v1.Pod
	for i := range pods.Items {
		podList = append(podList, &pods.Items[i])
	}
	var namespaces []*v1.Namespace
	for i := range nss.Items {
		namespaces = append(namespaces, &nss.Items[i])
	}
	return policies, podList, namespaces, nil
}

func peerName(p netpol.Peer) string {
	if p.Pod == "" {
		return p.IP.String()
	}
	return p.Namespace + "/" + p.Pod
}

// peerLabel is peerName with the address a pod was given by, if it was.
func peerLabel(p netpol.Peer) string {
	if p.Pod != "" && p.IP.IsValid() {
		return peerName(p) + " at " + p.IP.String()
	}
	return peerName(p)
}

// writeDecision prints the verdict, then one line per direction saying which policies
// isolate the pod and which rule, if any, lets the connection through.
func writeDecision(out io.Writer, q accessQuery, d netpol.Decision, fromHost, toHost bool) {
	verdict := "DENIED"
	if d.Allowed {
		verdict = "ALLOWED"
	}
	to := peerName(q.to)
	if q.to.Pod == "" && q.to.IP.Is6() {
		to = "[" + to + "]"
	}
	fmt.Fprintf(out, "%s -> %s:%d/%s: %s\n", peerName(q.from), to, q.port, q.protocol, verdict)
	fmt.Fprintf(out, "  egress  (%s): %s\n", peerLabel(q.from), explainVerdict(q.from, fromHost, "egress", d.Egress))
	fmt.Fprintf(out, "  ingress (%s): %s\n", peerLabel(q.to), explainVerdict(q.to, toHost, "ingress", d.Ingress))
}

func explainVerdict(p netpol.Peer, hostNetwork bool, dir string, v netpol.Verdict) string {
	switch {
	case p.Pod == "":
		return "not a pod, so no policy applies: allowed"
	case hostNetwork:
		return "on the host network, where NetworkPolicies do not apply: allowed"
	case v.OwnNode:
		return "the other end is the pod's own node, whose traffic with its pods no policy filters: allowed"
	case !v.Isolated:
		return fmt.Sprintf("not isolated (no policy selects it for %s): allowed", dir)
	case v.Allowed:
		return fmt.Sprintf("isolated by %s; allowed by %s %s", strings.Join(v.Selecting, ", "), v.Policy, v.Rule)
	default:
		return fmt.Sprintf("isolated by %s; no rule allows it: denied", strings.Join(v.Selecting, ", "))
	}
}
