package core

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// podProxyDefaultPort is the port pods/NAME/proxy reaches when the name gives
// none: the first port declared by a container, as kube-apiserver's pod
// ResourceLocation picks it (the sig-apps 'serve a basic image' specs proxy to
// serve-hostname's 9376 that way), else the scheme's own port.
func podProxyDefaultPort(pod *v1.Pod, scheme string) string {
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
