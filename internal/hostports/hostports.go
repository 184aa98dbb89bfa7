// Package hostports is the one rule for the host ports a pod claims on its node and
// when two claims collide, as kube-scheduler's NodePorts plugin decides it; the
// scheduler filters nodes with it and the node agent admits pods with it, as kubelet
// runs that same plugin to admit pods bound to it directly.
package hostports

import v1 "k8s.io/api/core/v1"

// Port is one host port a pod claims: an address (0.0.0.0 for every address), a
// protocol and a port.
type Port struct {
	IP       string
	Protocol v1.Protocol
	Port     int32
}

// Of lists the host ports pod's long-running containers claim: its containers and
// its restartable (sidecar) init containers; an empty address is 0.0.0.0 and an
// empty protocol TCP.
func Of(pod *v1.Pod) []Port {
	var out []Port
	collect := func(c *v1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			proto := p.Protocol
			if proto == "" {
				proto = v1.ProtocolTCP
			}
			ip := p.HostIP
			if ip == "" {
				ip = "0.0.0.0"
			}
			out = append(out, Port{IP: ip, Protocol: proto, Port: p.HostPort})
		}
	}
	for i := range pod.Spec.Containers {
		collect(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			collect(c)
		}
	}
	return out
}

// Conflict reports whether a claim of want collides with any of used: the same port
// and protocol on overlapping addresses (0.0.0.0 overlaps every address).
func Conflict(want, used []Port) bool {
	for _, w := range want {
		for _, u := range used {
			if w.Port == u.Port && w.Protocol == u.Protocol && (w.IP == u.IP || w.IP == "0.0.0.0" || u.IP == "0.0.0.0") {
				return true
			}
		}
	}
	return false
}
