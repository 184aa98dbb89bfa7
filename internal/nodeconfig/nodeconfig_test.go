package nodeconfig

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes/fake"
)

func TestRoundTrip(t *testing.T) {
	want := Settings{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"), ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"}
	cms, err := ConfigMaps(want)
	if err != nil {
		t.Fatal(err)
	}
	if got := cms[0].Data[KubeletKey]; !strings.Contains(got, "kind: KubeletConfiguration") || !strings.Contains(got, "apiVersion: kubelet.config.k8s.io/v1beta1") {
		t.Errorf("kubelet-config:\n%s", got)
	}
	if got := cms[1].Data[ProxyKey]; !strings.Contains(got, "kind: KubeProxyConfiguration") || !strings.Contains(got, "clusterCIDR: 10.244.0.0/16") {
		t.Errorf("kube-proxy:\n%s", got)
	}
	client := fake.NewClientset(cms[0], cms[1])
	got, err := Read(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Errorf("Read (-want +got):\n%s", d)
	}
}

func TestReadErrors(t *testing.T) {
	cms, err := ConfigMaps(Settings{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"), ClusterDNS: []string{"10.96.0.10"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Read(context.Background(), fake.NewClientset()); err == nil || !strings.Contains(err.Error(), "kubelet settings") {
		t.Errorf("no ConfigMaps: %v", err)
	}
	cms[1].Data[ProxyKey] = "clusterCIDR: nonsense\n"
	if _, err := Read(context.Background(), fake.NewClientset(cms[0], cms[1])); err == nil || !strings.Contains(err.Error(), "kube-system/kube-proxy: clusterCIDR") {
		t.Errorf("bad clusterCIDR: %v", err)
	}
}
