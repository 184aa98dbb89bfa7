package podfiles

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Kubelet's limits on the resolver configuration it hands to a pod (the expanded limits,
// GA since Kubernetes 1.28).
const (
	maxNameservers     = 3
	maxSearchDomains   = 32
	maxSearchLineChars = 2048
)

// DNSConfig is the resolver configuration of one pod, before it is written out.
type DNSConfig struct {
	// Nameservers, Searches and Options are the lines of resolv.conf, in order.
	Nameservers []string
	Searches    []string
	Options     []string
	// Warnings are the messages kubelet records as DNSConfigForming (or MissingClusterDNS)
	// warning events on the pod when it had to cut or change the configuration.
	Warnings []string
}

// PodDNS computes a pod's resolver configuration the way kubelet does.
//
// ClusterFirst (and ClusterFirstWithHostNet) use clusterDNS as the only nameservers,
// search <ns>.svc.<domain> svc.<domain> <domain> followed by the node's search domains
// (duplicates dropped), and options ndots:5. ClusterFirst on a hostNetwork pod, and any
// cluster policy when clusterDNS is empty, fall back to Default. Default uses the node's
// resolv.conf (hostResolv, the NODE's file as the agent sees it); nil hostResolv means the
// node has no resolver configuration, which kubelet turns into nameserver 127.0.0.1 and
// search ".". None starts empty. Then spec.dnsConfig is appended (nameservers and
// searches deduplicated, options merged by name, the pod's value winning) and the result
// is cut to 3 nameservers and 32 search domains of at most 253 characters and 2048 in
// all. An unknown policy is treated as ClusterFirst, as kubelet does; an error means the
// node's resolv.conf is malformed.
func PodDNS(pod *v1.Pod, clusterDNS []string, clusterDomain string, hostResolv []byte) (DNSConfig, error) {
	if pod == nil {
		return DNSConfig{}, fmt.Errorf("no pod given")
	}
	host := DNSConfig{}
	if hostResolv != nil {
		var err error
		host, err = parseResolvConf(hostResolv)
		if err != nil {
			return DNSConfig{}, fmt.Errorf("pod %s/%s: node resolv.conf: %w", pod.Namespace, pod.Name, err)
		}
	}
	var cfg DNSConfig
	useHost := false
	switch dnsType(pod) {
	case dnsHost:
		useHost = true
	case dnsCluster:
		if len(clusterDNS) == 0 {
			cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("pod: %q. kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.", pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")", v1.DNSClusterFirst, v1.DNSDefault))
			useHost = true
			break
		}
		cfg.Nameservers = append([]string(nil), clusterDNS...)
		cfg.Searches = host.Searches
		if clusterDomain != "" {
			cfg.Searches = dedup(append([]string{
				pod.Namespace + ".svc." + clusterDomain,
				"svc." + clusterDomain,
				clusterDomain,
			}, host.Searches...))
		}
		cfg.Options = []string{"ndots:5"}
	}
	if useHost {
		cfg.Nameservers, cfg.Searches, cfg.Options = host.Nameservers, host.Searches, host.Options
		if hostResolv == nil {
			cfg.Nameservers, cfg.Searches = []string{"127.0.0.1"}, []string{"."}
		}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Nameservers = dedup(append(append([]string(nil), cfg.Nameservers...), dc.Nameservers...))
		cfg.Searches = dedup(append(append([]string(nil), cfg.Searches...), dc.Searches...))
		cfg.Options = mergeOptions(cfg.Options, dc.Options)
	}
	cfg.fitLimits()
	return cfg, nil
}

// ResolvConf returns the pod's /etc/resolv.conf (see PodDNS for the rules) in the form
// containerd writes it: a search line, one nameserver line per server, an options line,
// each present only when not empty.
func ResolvConf(pod *v1.Pod, clusterDNS []string, clusterDomain string, hostResolv []byte) ([]byte, error) {
	cfg, err := PodDNS(pod, clusterDNS, clusterDomain, hostResolv)
	if err != nil {
		return nil, err
	}
	return cfg.Render(), nil
}

// Render writes the configuration as resolv.conf text.
func (c DNSConfig) Render() []byte {
	var b strings.Builder
	if len(c.Searches) > 0 {
		b.WriteString("search " + strings.Join(c.Searches, " ") + "\n")
	}
	for _, ns := range c.Nameservers {
		b.WriteString("nameserver " + ns + "\n")
	}
	if len(c.Options) > 0 {
		b.WriteString("options " + strings.Join(c.Options, " ") + "\n")
	}
	return []byte(b.String())
}

// dnsKind is where a pod's resolver configuration starts from.
type dnsKind int

const (
	dnsCluster dnsKind = iota
	dnsHost
	dnsNone
)

// dnsType maps the pod's dnsPolicy to its starting point. ClusterFirst on a hostNetwork
// pod means Default (only ClusterFirstWithHostNet gives such a pod the cluster DNS), and
// an unknown policy, which the API server rejects, means ClusterFirst.
func dnsType(pod *v1.Pod) dnsKind {
	switch pod.Spec.DNSPolicy {
	case v1.DNSNone:
		return dnsNone
	case v1.DNSDefault:
		return dnsHost
	case v1.DNSClusterFirst:
		if pod.Spec.HostNetwork {
			return dnsHost
		}
	}
	return dnsCluster
}

// fitLimits cuts the configuration to what resolvers accept, recording a warning for
// each cut as kubelet does.
func (c *DNSConfig) fitLimits() {
	if len(c.Nameservers) > maxNameservers {
		c.Nameservers = c.Nameservers[:maxNameservers]
		c.Warnings = append(c.Warnings, "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: "+strings.Join(c.Nameservers, " "))
	}
	exceeded := false
	if len(c.Searches) > maxSearchDomains {
		c.Searches = c.Searches[:maxSearchDomains]
		exceeded = true
	}
	// Some resolvers (glibc 2.28) abort on a search domain longer than a DNS name.
	kept := make([]string, 0, len(c.Searches))
	for _, s := range c.Searches {
		if len(s) > validation.DNS1123SubdomainMaxLength {
			exceeded = true
			continue
		}
		kept = append(kept, s)
	}
	c.Searches = kept
	if len(kept) == 0 {
		c.Searches = nil
	}
	for len(c.Searches) > 0 && len(strings.Join(c.Searches, " ")) > maxSearchLineChars {
		c.Searches = c.Searches[:len(c.Searches)-1]
		exceeded = true
	}
	if exceeded {
		c.Warnings = append(c.Warnings, "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: "+strings.Join(c.Searches, " "))
	}
}

// parseResolvConf reads a resolv.conf as kubelet does: nameserver lines accumulate, the
// last search line and the last options line win, search domains lose a trailing dot,
// and comments start with '#'.
func parseResolvConf(data []byte) (DNSConfig, error) {
	var cfg DNSConfig
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) < 2 {
				return DNSConfig{}, fmt.Errorf("line %d: nameserver list is empty", i+1)
			}
			cfg.Nameservers = append(cfg.Nameservers, fields[1])
		case "search":
			cfg.Searches = nil
			for _, s := range fields[1:] {
				cfg.Searches = append(cfg.Searches, strings.TrimSuffix(s, "."))
			}
		case "options":
			cfg.Options = append([]string(nil), fields[1:]...)
		}
	}
	return cfg, nil
}

// mergeOptions merges the pod's dnsConfig options into existing "name[:value]" options:
// a pod option replaces the existing one of the same name in place, new ones are
// appended. (Kubelet goes through a map, so its order is random; keeping the first
// position makes the file stable.)
func mergeOptions(existing []string, pod []v1.PodDNSConfigOption) []string {
	names := []string{}
	values := map[string]string{}
	set := func(name, value string) {
		if _, ok := values[name]; !ok {
			names = append(names, name)
		}
		values[name] = value
	}
	for _, op := range existing {
		name, value, _ := strings.Cut(op, ":")
		set(name, value)
	}
	for _, op := range pod {
		value := ""
		if op.Value != nil {
			value = *op.Value
		}
		set(op.Name, value)
	}
	out := make([]string, 0, len(names))
	for _, name := range names {
		if values[name] != "" {
			out = append(out, name+":"+values[name])
		} else {
			out = append(out, name)
		}
	}
	return out
}

// dedup drops repeated strings, keeping the first occurrence.
func dedup(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
