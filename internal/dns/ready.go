package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Dialer opens a connection, possibly from inside a network namespace.
type Dialer func(network, addr string, timeout time.Duration) (net.Conn, error)

// KubeDNSAddrs returns where the cluster DNS listens: the kube-dns Service's ClusterIP
// and its ready endpoints, as IP:53.
func KubeDNSAddrs(ctx context.Context, client kubernetes.Interface) []string {
	var out []string
	if svc, err := client.CoreV1().Services(dnsServiceNamespace).Get(ctx, dnsServiceName, metav1.GetOptions{}); err == nil {
		for _, ip := range clusterIPs(svc) {
			out = append(out, netip.AddrPortFrom(ip, 53).String())
		}
	}
	slices, err := client.DiscoveryV1().EndpointSlices(dnsServiceNamespace).List(ctx,
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + dnsServiceName})
	if err != nil {
		return out
	}
	svc := &v1.Service{}
	for i := range slices.Items {
		for _, e := range readyEndpoints(svc, []*discoveryv1.EndpointSlice{&slices.Items[i]}) {
			for _, a := range e.addrs {
				out = append(out, netip.AddrPortFrom(a, 53).String())
			}
		}
	}
	return out
}

// WaitAnswers polls until one of the servers addrs returns answers name's A query with
// a record, or ctx ends. It returns the address that answered.
func WaitAnswers(ctx context.Context, dial Dialer, addrs func(context.Context) []string, name string) (string, error) {
	var last error = errors.New("no DNS server address yet")
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, a := range addrs(ctx) {
			if err := probe(dial, a, name); err != nil {
				last = fmt.Errorf("%s: %w", a, err)
				continue
			}
			return a, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("cluster DNS does not answer %s: %w", name, last)
		case <-tick.C:
		}
	}
}

func probe(dial Dialer, addr, name string) error {
	c, err := dial("udp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	conn := &dns.Conn{Conn: c}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	if err := conn.WriteMsg(q); err != nil {
		return err
	}
	resp, err := conn.ReadMsg()
	if err != nil {
		return err
	}
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) == 0 {
		return fmt.Errorf("answer %s with %d records", dns.RcodeToString[resp.Rcode], len(resp.Answer))
	}
	return nil
}
