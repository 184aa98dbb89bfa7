// Package nodeconfig is the cluster's settings a joined node reads from the API, as
// kubeadm publishes them: kube-system/kubelet-config (a KubeletConfiguration under the
// key "kubelet": cluster DNS and domain) and kube-system/kube-proxy (a
// KubeProxyConfiguration under "config.conf": the cluster CIDR). The API server writes
// them (ConfigMaps) and the agent reads them (Read) with its node identity, which a
// Role in kube-system allows, as kubeadm's kubeadm:kubelet-config and kube-proxy Roles.
package nodeconfig

import (
	"context"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// Names of the ConfigMaps and their keys (kubeadm's).
const (
	KubeletConfigMap = "kubelet-config"
	KubeletKey       = "kubelet"
	ProxyConfigMap   = "kube-proxy"
	ProxyKey         = "config.conf"
)

// Settings are what a node needs of the cluster beyond its credentials.
type Settings struct {
	// ClusterCIDR is the pod network (node IPAM cuts the nodes' podCIDRs from it).
	ClusterCIDR netip.Prefix
	// ClusterDNS are the DNS Service's addresses written into pods' resolv.conf.
	ClusterDNS []string
	// ClusterDomain is the cluster's DNS domain (cluster.local).
	ClusterDomain string
}

// ConfigMaps returns the two ConfigMaps publishing s in kube-system.
func ConfigMaps(s Settings) ([]*v1.ConfigMap, error) {
	kubelet, err := yaml.Marshal(kubeletv1beta1.KubeletConfiguration{
		TypeMeta:      metav1.TypeMeta{APIVersion: kubeletv1beta1.SchemeGroupVersion.String(), Kind: "KubeletConfiguration"},
		ClusterDNS:    s.ClusterDNS,
		ClusterDomain: s.ClusterDomain,
	})
	if err != nil {
		return nil, err
	}
	proxy, err := yaml.Marshal(kubeproxyv1alpha1.KubeProxyConfiguration{
		TypeMeta:    metav1.TypeMeta{APIVersion: kubeproxyv1alpha1.SchemeGroupVersion.String(), Kind: "KubeProxyConfiguration"},
		ClusterCIDR: s.ClusterCIDR.String(),
	})
	if err != nil {
		return nil, err
	}
	return []*v1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: KubeletConfigMap, Namespace: metav1.NamespaceSystem}, Data: map[string]string{KubeletKey: string(kubelet)}},
		{ObjectMeta: metav1.ObjectMeta{Name: ProxyConfigMap, Namespace: metav1.NamespaceSystem}, Data: map[string]string{ProxyKey: string(proxy)}},
	}, nil
}

// Read fetches the settings from kube-system with client (a node identity may).
func Read(ctx context.Context, client kubernetes.Interface) (Settings, error) {
	var s Settings
	cms := client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	cm, err := cms.Get(ctx, KubeletConfigMap, metav1.GetOptions{})
	if err != nil {
		return s, fmt.Errorf("reading the cluster's kubelet settings: %w", err)
	}
	var kc kubeletv1beta1.KubeletConfiguration
	if err := yaml.Unmarshal([]byte(cm.Data[KubeletKey]), &kc); err != nil {
		return s, fmt.Errorf("configmap kube-system/%s key %s: %w", KubeletConfigMap, KubeletKey, err)
	}
	for _, a := range kc.ClusterDNS {
		if _, err := netip.ParseAddr(a); err != nil {
			return s, fmt.Errorf("configmap kube-system/%s: clusterDNS: %w", KubeletConfigMap, err)
		}
	}
	s.ClusterDNS, s.ClusterDomain = kc.ClusterDNS, kc.ClusterDomain
	if cm, err = cms.Get(ctx, ProxyConfigMap, metav1.GetOptions{}); err != nil {
		return s, fmt.Errorf("reading the cluster's proxy settings: %w", err)
	}
	var pc kubeproxyv1alpha1.KubeProxyConfiguration
	if err := yaml.Unmarshal([]byte(cm.Data[ProxyKey]), &pc); err != nil {
		return s, fmt.Errorf("configmap kube-system/%s key %s: %w", ProxyConfigMap, ProxyKey, err)
	}
	p, err := netip.ParsePrefix(pc.ClusterCIDR)
	if err != nil {
		return s, fmt.Errorf("configmap kube-system/%s: clusterCIDR: %w", ProxyConfigMap, err)
	}
	s.ClusterCIDR = p.Masked()
	return s, nil
}
