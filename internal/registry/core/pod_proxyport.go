package core

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// defaultPodProxyPort is the port pods/NAME/proxy reaches when the request names none,
// as kube-apiserver picks it: the first port of the first container that declares one,
// else the scheme's own (80, or 443 for https).
func defaultPodProxyPort(pod *v1.Pod, scheme string) string {
	for _, c := range pod.Spec.Containers {
		if len(c.Ports) > 0 {
			return strconv.Itoa(int(c.Ports[0].ContainerPort))
		}
	}
	if scheme == "https" {
		return "443"
	}
	return "80"
}
