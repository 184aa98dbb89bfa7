// Package podfiles computes the files kubelet writes for every pod and bind-mounts into
// its containers: /etc/hosts, /etc/resolv.conf and the pod's hostname. Every function is
// pure: the caller reads the node's files and writes the results, so the contents can be
// compared byte for byte with what a real kubelet (and containerd) produce.
package podfiles

import (
	"bytes"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// hostnameMaxLen is the longest hostname the kernel stores (64 bytes with the NUL).
const hostnameMaxLen = 63

// fqdnMaxLen is the longest FQDN that fits the kernel's nodename field when
// setHostnameAsFQDN asks for it.
const fqdnMaxLen = 64

// Hostname returns the pod's kernel hostname and its FQDN, as kubelet derives them:
// spec.hostname (or the pod name) cut to 63 characters without a trailing '-' or '.', and,
// with spec.subdomain, the FQDN <hostname>.<subdomain>.<namespace>.svc.<clusterDomain>
// (empty without a subdomain). With setHostnameAsFQDN the kernel hostname is the FQDN,
// which must then fit in 64 characters. An invalid hostname or subdomain is an error
// (the API server rejects them, so only a corrupt object gets there).
func Hostname(pod *v1.Pod, clusterDomain string) (hostname, fqdn string, err error) {
	short, domain, err := hostnameAndDomain(pod, clusterDomain)
	if err != nil {
		return "", "", err
	}
	if domain == "" {
		return short, "", nil
	}
	fqdn = short + "." + domain
	if pod.Spec.SetHostnameAsFQDN == nil || !*pod.Spec.SetHostnameAsFQDN {
		return short, fqdn, nil
	}
	if len(fqdn) > fqdnMaxLen {
		return "", "", fmt.Errorf("pod %s/%s: failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)", pod.Namespace, pod.Name, fqdn, fqdnMaxLen, len(fqdn))
	}
	return fqdn, fqdn, nil
}

// hostnameAndDomain returns the short hostname and the domain part of the FQDN
// (<subdomain>.<namespace>.svc.<clusterDomain>, or "" without a subdomain).
func hostnameAndDomain(pod *v1.Pod, clusterDomain string) (string, string, error) {
	if pod == nil {
		return "", "", fmt.Errorf("no pod given")
	}
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Hostname); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod %s/%s: pod Hostname %q is not a valid DNS label: %s", pod.Namespace, pod.Name, pod.Spec.Hostname, strings.Join(msgs, ";"))
		}
		hostname = pod.Spec.Hostname
	}
	if len(hostname) > hostnameMaxLen {
		// A pod name may be a 253-character subdomain; the kernel keeps 63, and a hostname
		// must not end with a separator.
		hostname = strings.TrimRight(hostname[:hostnameMaxLen], "-.")
	}
	if hostname == "" {
		return "", "", fmt.Errorf("pod %s/%s: hostname for pod was invalid: %q", pod.Namespace, pod.Name, pod.Name)
	}
	if pod.Spec.Subdomain == "" {
		return hostname, "", nil
	}
	if msgs := validation.IsDNS1123Label(pod.Spec.Subdomain); len(msgs) != 0 {
		return "", "", fmt.Errorf("pod %s/%s: pod Subdomain %q is not a valid DNS label: %s", pod.Namespace, pod.Name, pod.Spec.Subdomain, strings.Join(msgs, ";"))
	}
	return hostname, fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain), nil
}

// managedHostsHeader opens the /etc/hosts kubelet writes for a pod with its own network.
const managedHostsHeader = "# Kubernetes-managed hosts file.\n"

// hostNetworkHostsHeader opens the /etc/hosts of a hostNetwork pod, a copy of the node's.
const hostNetworkHostsHeader = "# Kubernetes-managed hosts file (host network).\n"

// Hosts returns the /etc/hosts kubelet writes for a pod with its own network namespace:
// the header, the IPv4 and IPv6 localhost block, one line per pod IP naming the pod
// (FQDN first when the pod has a subdomain), then the pod's hostAliases, one line per
// alias IP. It fails only when Hostname does. A hostNetwork pod gets HostNetworkHosts
// instead.
func Hosts(pod *v1.Pod, podIPs []string, clusterDomain string) ([]byte, error) {
	hostname, domain, err := hostnameAndDomain(pod, clusterDomain)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	writeHostAliases(&b, pod.Spec.HostAliases)
	return b.Bytes(), nil
}

// HostNetworkHosts returns the /etc/hosts of a hostNetwork pod: kubelet's header, the
// node's own hosts file unchanged, then the pod's hostAliases.
func HostNetworkHosts(pod *v1.Pod, nodeHosts []byte) []byte {
	var b bytes.Buffer
	b.WriteString(hostNetworkHostsHeader)
	b.Write(nodeHosts)
	if pod != nil {
		writeHostAliases(&b, pod.Spec.HostAliases)
	}
	return b.Bytes()
}

// writeHostAliases appends kubelet's hostAliases section: a blank line, a comment, and
// each alias IP with its hostnames separated by tabs.
func writeHostAliases(b *bytes.Buffer, aliases []v1.HostAlias) {
	if len(aliases) == 0 {
		return
	}
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
}
