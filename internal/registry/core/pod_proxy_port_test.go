package core

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/registry"
)

// TestPodProxyDefaultPort checks the URL pods/NAME/proxy reaches when the name
// gives no port: the first declared container port, as kube-apiserver picks it.
func TestPodProxyDefaultPort(t *testing.T) {
	mk := func(ports ...[]int32) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Status: v1.PodStatus{PodIP: "10.244.1.5"}}
		for i, cp := range ports {
			c := v1.Container{Name: string(rune('a' + i))}
			for _, port := range cp {
				c.Ports = append(c.Ports, v1.ContainerPort{ContainerPort: port})
			}
			p.Spec.Containers = append(p.Spec.Containers, c)
		}
		return p
	}
	cases := []struct {
		name, id string
		pod      *v1.Pod
		want     string
	}{
		{"first port of the first container with ports", "web", mk(nil, []int32{9376, 8080}, []int32{70}), "http://10.244.1.5:9376/"},
		{"no ports: http's own", "web", mk(nil), "http://10.244.1.5:80/"},
		{"no ports: https's own", "https:web:", mk(nil), "https://10.244.1.5:443/"},
		{"a port in the name wins", "web:8080", mk([]int32{9376}), "http://10.244.1.5:8080/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := &evictionObjects{pods: map[string]*v1.Pod{"web": tc.pod}}
			loc, err := podProxyLocation(context.Background(), &registry.HandlerRequest{
				Verb: "get", Namespace: "ns", Name: tc.id, Subresource: "proxy",
				Path: "/api/v1/namespaces/ns/pods/" + tc.id + "/proxy/", Objects: objs,
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := loc.URL.String(); got != tc.want {
				t.Errorf("URL %s, want %s", got, tc.want)
			}
		})
	}
}
