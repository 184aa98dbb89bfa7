package runtime

import (
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Services lists the cluster's Services (an informer's cache in the agent) for the
// variables kubelet gives every container; nil gives none.
type Services func() ([]*v1.Service, error)

// serviceEnv returns the variables kubelet derives from Services for a pod of ns, in
// a stable order: for every Service with a ClusterIP in the pod's namespace (when
// enableServiceLinks, the default) and for default/kubernetes (always, unless the
// namespace has its own "kubernetes"), NAME_SERVICE_HOST, NAME_SERVICE_PORT,
// NAME_SERVICE_PORT_<PORTNAME> and Docker's link variables NAME_PORT,
// NAME_PORT_<port>_<PROTO>{,_PROTO,_PORT,_ADDR}. They rank below the container's own
// variables, which may still refer to them as $(VAR).
func serviceEnv(ns string, enableServiceLinks bool, services []*v1.Service) []envVar {
	chosen := map[string]*v1.Service{}
	for _, svc := range services {
		if ip := svc.Spec.ClusterIP; ip == "" || ip == v1.ClusterIPNone {
			continue
		}
		switch {
		case svc.Namespace == ns && enableServiceLinks:
			chosen[svc.Name] = svc
		case svc.Namespace == "default" && svc.Name == "kubernetes":
			if _, ok := chosen[svc.Name]; !ok {
				chosen[svc.Name] = svc
			}
		}
	}
	// A pod of default with enableServiceLinks false still gets the kubernetes Service.
	var out []envVar
	for _, name := range slices.Sorted(maps.Keys(chosen)) {
		svc := chosen[name]
		prefix := envName(svc.Name)
		ip := svc.Spec.ClusterIP
		out = append(out, envVar{prefix + "_SERVICE_HOST", ip})
		if len(svc.Spec.Ports) > 0 {
			out = append(out, envVar{prefix + "_SERVICE_PORT", strconv.Itoa(int(svc.Spec.Ports[0].Port))})
		}
		for _, p := range svc.Spec.Ports {
			if p.Name != "" {
				out = append(out, envVar{prefix + "_SERVICE_PORT_" + envName(p.Name), strconv.Itoa(int(p.Port))})
			}
		}
		for i, p := range svc.Spec.Ports {
			proto := string(p.Protocol)
			if proto == "" {
				proto = string(v1.ProtocolTCP)
			}
			port := strconv.Itoa(int(p.Port))
			url := strings.ToLower(proto) + "://" + net.JoinHostPort(ip, port)
			if i == 0 {
				out = append(out, envVar{prefix + "_PORT", url})
			}
			pp := prefix + "_PORT_" + port + "_" + strings.ToUpper(proto)
			out = append(out,
				envVar{pp, url},
				envVar{pp + "_PROTO", strings.ToLower(proto)},
				envVar{pp + "_PORT", port},
				envVar{pp + "_ADDR", ip})
		}
	}
	return out
}

// envName is a Service or port name as a variable name: upper case, '-' as '_'.
func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
