package core

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestDefaultPodProxyPort(t *testing.T) {
	withPorts := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{
		{Name: "sidecar"},
		{Name: "server", Ports: []v1.ContainerPort{{ContainerPort: 8080}, {ContainerPort: 9090}}},
		{Name: "other", Ports: []v1.ContainerPort{{ContainerPort: 7070}}},
	}}}
	none := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	for _, tc := range []struct {
		pod    *v1.Pod
		scheme string
		want   string
	}{
		{withPorts, "http", "8080"},
		{withPorts, "https", "8080"},
		{none, "http", "80"},
		{none, "", "80"},
		{none, "https", "443"},
	} {
		if got := defaultPodProxyPort(tc.pod, tc.scheme); got != tc.want {
			t.Errorf("defaultPodProxyPort(%s, %q) = %s, want %s", tc.pod.Spec.Containers[0].Name, tc.scheme, got, tc.want)
		}
	}
}
