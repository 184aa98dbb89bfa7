package ocispec

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// safeSysctls is kubelet's safe set as of Kubernetes 1.37 (pkg/kubelet/sysctl,
// mirrored by pod-security-admission's check_sysctls.go): namespaced sysctls that
// cannot affect other pods. The kernel-version gates kubelet applies are all met by a
// kernel >= 4.15.
var safeSysctls = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ip_local_reserved_ports",   // 1.27
	"net.ipv4.tcp_keepalive_time",        // 1.29
	"net.ipv4.tcp_fin_timeout",           // 1.29
	"net.ipv4.tcp_keepalive_intvl",       // 1.29
	"net.ipv4.tcp_keepalive_probes",      // 1.29
	"net.ipv4.tcp_rmem",                  // 1.32
	"net.ipv4.tcp_wmem",                  // 1.32
	"net.ipv4.tcp_slow_start_after_idle", // 1.37
	"net.ipv4.tcp_notsent_lowat",         // 1.37
}

// sysctls checks the pod's sysctls as kubelet's admission does (safe set plus
// --allowed-unsafe-sysctls; none of the network namespace's with hostNetwork nor of
// the IPC namespace's with hostIPC) and returns them for the spec, names normalised to
// dots. A refusal is a ConfigError with kubelet's message.
func sysctls(pod *v1.Pod, unsafe []string) (map[string]string, error) {
	sc := pod.Spec.SecurityContext
	if sc == nil || len(sc.Sysctls) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(sc.Sysctls))
	for _, s := range sc.Sysctls {
		name := normalizeSysctl(s.Name)
		if !allowedSysctl(name, unsafe) {
			return nil, &ConfigError{Message: fmt.Sprintf("forbidden sysctl: %q not allowlisted", name)}
		}
		switch ns := sysctlNamespace(name); {
		case ns == "net" && pod.Spec.HostNetwork, ns == "ipc" && pod.Spec.HostIPC:
			return nil, &ConfigError{Message: fmt.Sprintf("forbidden sysctl: %q not allowed with host %s enabled", name, ns)}
		}
		out[name] = s.Value
	}
	return out, nil
}

func allowedSysctl(name string, unsafe []string) bool {
	for _, s := range safeSysctls {
		if s == name {
			return true
		}
	}
	for _, p := range unsafe {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, prefix) || p == name {
			return true
		}
	}
	return false
}

// sysctlNamespace is the namespace a sysctl belongs to (kubelet's NamespacedBy):
// "ipc", "net", "uts" or "" for one that is not namespaced.
func sysctlNamespace(name string) string {
	switch {
	case strings.HasPrefix(name, "kernel.shm"), strings.HasPrefix(name, "kernel.msg"),
		name == "kernel.sem", strings.HasPrefix(name, "fs.mqueue."):
		return "ipc"
	case strings.HasPrefix(name, "net."):
		return "net"
	case name == "kernel.hostname", name == "kernel.domainname":
		return "uts"
	}
	return ""
}

// normalizeSysctl is kubelet's NormalizeName: a name whose first separator is "/"
// (net/ipv4/conf/eth0.100/forwarding) has its "/" and "." swapped.
func normalizeSysctl(name string) string {
	i := strings.IndexAny(name, "./")
	if i < 0 || name[i] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '/':
			return '.'
		case '.':
			return '/'
		}
		return r
	}, name)
}
