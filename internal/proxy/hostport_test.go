package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/knftables"
)

func hostPortPod(name, ip string, mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c"}}},
		Status:     v1.PodStatus{Phase: v1.PodRunning, PodIP: ip},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func withPort(hostIP string, proto v1.Protocol, hostPort, containerPort int32) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports,
			v1.ContainerPort{HostIP: hostIP, Protocol: proto, HostPort: hostPort, ContainerPort: containerPort})
	}
}

// TestHostPortRules: the conformance spec "HostPort validates that there is no conflict
// between pods with same hostPort but different hostIP and protocol" (127.0.0.1/TCP,
// node IP/TCP and node IP/UDP on one port) and the pods that get no mapping.
func TestHostPortRules(t *testing.T) {
	pods := []*v1.Pod{
		hostPortPod("pod1", "10.244.1.5", withPort("127.0.0.1", v1.ProtocolTCP, 54323, 8080)),
		hostPortPod("pod2", "10.244.1.6", withPort("10.240.0.10", v1.ProtocolTCP, 54323, 8080)),
		hostPortPod("pod3", "10.244.1.7", withPort("10.240.0.10", v1.ProtocolUDP, 54323, 8080)),
		hostPortPod("any", "10.244.1.8", withPort("", "", 8000, 80)),
		hostPortPod("zeros", "10.244.1.9", withPort("0.0.0.0", v1.ProtocolTCP, 8001, 80)),
		hostPortPod("no-hostport", "10.244.1.10", withPort("", v1.ProtocolTCP, 0, 80)),
		hostPortPod("no-ip", "", withPort("", v1.ProtocolTCP, 9000, 80)),
		hostPortPod("hostnet", "10.240.0.10", func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			withPort("", v1.ProtocolTCP, 9001, 9001)(p)
		}),
		hostPortPod("done", "10.244.1.11", func(p *v1.Pod) {
			p.Status.Phase = v1.PodSucceeded
			withPort("", v1.ProtocolTCP, 9002, 80)(p)
		}),
		hostPortPod("v6", "fd00::5", withPort("", v1.ProtocolTCP, 9003, 80)),
	}
	fake := knftables.NewFake(knftables.IPv4Family, HostPortTable)
	tx := fake.NewTransaction()
	hostPortTransaction(tx, HostPortMappings(pods))
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	want := `
add table ip tranche-hostport { comment "pods' hostPorts (tranche agent)" ; }
add chain ip tranche-hostport hostports
add chain ip tranche-hostport output { type nat hook output priority -100 ; }
add chain ip tranche-hostport postrouting { type nat hook postrouting priority 100 ; }
add chain ip tranche-hostport prerouting { type nat hook prerouting priority -100 ; }
add rule ip tranche-hostport hostports ip daddr 10.240.0.10 tcp dport 54323 dnat to 10.244.1.6:8080
add rule ip tranche-hostport hostports ip daddr 127.0.0.1 tcp dport 54323 dnat to 10.244.1.5:8080
add rule ip tranche-hostport hostports ip daddr 10.240.0.10 udp dport 54323 dnat to 10.244.1.7:8080
add rule ip tranche-hostport hostports fib daddr type local tcp dport 8000 dnat to 10.244.1.8:80
add rule ip tranche-hostport hostports fib daddr type local tcp dport 8001 dnat to 10.244.1.9:80
add rule ip tranche-hostport output jump hostports
add rule ip tranche-hostport postrouting ip saddr 127.0.0.0/8 ct status dnat masquerade
add rule ip tranche-hostport prerouting jump hostports
`
	if diff := cmp.Diff(strings.TrimSpace(want), strings.TrimSpace(fake.Dump())); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}

	// A second sync replaces the table: a pod gone takes its rule with it.
	tx = fake.NewTransaction()
	hostPortTransaction(tx, HostPortMappings(pods[:1]))
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	if dump := fake.Dump(); strings.Contains(dump, "10.244.1.6") || !strings.Contains(dump, "10.244.1.5:8080") {
		t.Errorf("after pod2 went away:\n%s", dump)
	}
}
