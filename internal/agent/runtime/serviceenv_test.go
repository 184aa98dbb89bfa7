package runtime

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestServiceEnv(t *testing.T) {
	svc := func(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
	}
	kubernetes := svc("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP})
	all := []*v1.Service{
		kubernetes,
		svc("shop", "api-svc", "10.96.4.7", v1.ServicePort{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}, v1.ServicePort{Name: "dns-udp", Port: 53, Protocol: v1.ProtocolUDP}),
		svc("shop", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 80}),
		svc("shop", "external", ""),
		svc("other", "elsewhere", "10.96.9.9", v1.ServicePort{Port: 8080}),
	}
	lines := func(vars []envVar) string {
		var b strings.Builder
		for _, v := range vars {
			b.WriteString(v.name + "=" + v.value + "\n")
		}
		return b.String()
	}
	const kube = `KUBERNETES_SERVICE_HOST=10.96.0.1
KUBERNETES_SERVICE_PORT=443
KUBERNETES_SERVICE_PORT_HTTPS=443
KUBERNETES_PORT=tcp://10.96.0.1:443
KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443
KUBERNETES_PORT_443_TCP_PROTO=tcp
KUBERNETES_PORT_443_TCP_PORT=443
KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1
`
	for _, tc := range []struct {
		name  string
		ns    string
		links bool
		svcs  []*v1.Service
		want  string
	}{
		{"the namespace's services with a ClusterIP, and kubernetes", "shop", true, all, `API_SVC_SERVICE_HOST=10.96.4.7
API_SVC_SERVICE_PORT=80
API_SVC_SERVICE_PORT_HTTP=80
API_SVC_SERVICE_PORT_DNS_UDP=53
API_SVC_PORT=tcp://10.96.4.7:80
API_SVC_PORT_80_TCP=tcp://10.96.4.7:80
API_SVC_PORT_80_TCP_PROTO=tcp
API_SVC_PORT_80_TCP_PORT=80
API_SVC_PORT_80_TCP_ADDR=10.96.4.7
API_SVC_PORT_53_UDP=udp://10.96.4.7:53
API_SVC_PORT_53_UDP_PROTO=udp
API_SVC_PORT_53_UDP_PORT=53
API_SVC_PORT_53_UDP_ADDR=10.96.4.7
` + kube},
		{"enableServiceLinks false keeps kubernetes only", "shop", false, all, kube},
		{"a namespace's own kubernetes Service wins", "shop", true, []*v1.Service{kubernetes, svc("shop", "kubernetes", "10.96.7.7", v1.ServicePort{Port: 80})},
			"KUBERNETES_SERVICE_HOST=10.96.7.7\nKUBERNETES_SERVICE_PORT=80\nKUBERNETES_PORT=tcp://10.96.7.7:80\nKUBERNETES_PORT_80_TCP=tcp://10.96.7.7:80\nKUBERNETES_PORT_80_TCP_PROTO=tcp\nKUBERNETES_PORT_80_TCP_PORT=80\nKUBERNETES_PORT_80_TCP_ADDR=10.96.7.7\n"},
		{"no services", "shop", true, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lines(serviceEnv(tc.ns, tc.links, tc.svcs)); got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}

	// The container's own variables win and may refer to the Service's.
	pe := podEnv{pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop"}}, hostname: "p", services: serviceEnv("shop", true, all)}
	c := &v1.Container{Env: []v1.EnvVar{{Name: "API_SVC_SERVICE_PORT", Value: "8080"}, {Name: "URL", Value: "http://$(API_SVC_SERVICE_HOST):$(API_SVC_SERVICE_PORT)/"}}}
	env, err := containerEnv(t.Context(), pe, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	joined := "\n" + strings.Join(env, "\n") + "\n"
	for _, want := range []string{"\nAPI_SVC_SERVICE_PORT=8080\n", "\nURL=http://10.96.4.7:8080/\n", "\nKUBERNETES_SERVICE_HOST=10.96.0.1\n"} {
		if !strings.Contains(joined, want) {
			t.Errorf("environment lacks %q:%s", strings.TrimSpace(want), joined)
		}
	}
}
