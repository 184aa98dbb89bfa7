package server

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestClusterDNSArgs: the DNS Deployment is told the cluster's ranges (it answers
// their reverse zones itself), its upstreams and the API server, and the kube-dns
// Service sits at the tenth address of the service range.
func TestClusterDNSArgs(t *testing.T) {
	cases := []struct {
		name      string
		cfg       Config
		wantArgs  []string
		wantDNSIP string
	}{
		{"the default ranges", Config{ServiceCIDR: netip.MustParsePrefix("10.96.0.0/12"), ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"),
			DNS: DNSConfig{Upstreams: []string{"10.240.0.1:53"}}},
			[]string{"dns", "--listen=:53", "--metrics-listen=:9153", "--cluster-domain=cluster.local",
				"--service-cluster-ip-range=10.96.0.0/12", "--cluster-cidr=10.244.0.0/16", "--upstream=10.240.0.1:53"},
			"10.96.0.10"},
		{"other ranges", Config{ServiceCIDR: netip.MustParsePrefix("172.20.0.0/16"), ClusterCIDR: netip.MustParsePrefix("192.168.0.0/17"),
			DNS: DNSConfig{APIServer: "https://10.240.0.1:6443"}},
			[]string{"dns", "--listen=:53", "--metrics-listen=:9153", "--cluster-domain=cluster.local",
				"--service-cluster-ip-range=172.20.0.0/16", "--cluster-cidr=192.168.0.0/17", "--api-server=https://10.240.0.1:6443"},
			"172.20.0.10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewClientset()
			if err := ensureClusterDNS(ctx, client, tc.cfg); err != nil {
				t.Fatal(err)
			}
			d, err := client.AppsV1().Deployments(dnsNamespace).Get(ctx, dnsAppName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantArgs, d.Spec.Template.Spec.Containers[0].Args); diff != "" {
				t.Errorf("tranche-dns args (-want +got):\n%s", diff)
			}
			svc, err := client.CoreV1().Services(dnsNamespace).Get(ctx, dnsServiceName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if svc.Spec.ClusterIP != tc.wantDNSIP {
				t.Errorf("kube-dns ClusterIP %s, want %s", svc.Spec.ClusterIP, tc.wantDNSIP)
			}
		})
	}
}
