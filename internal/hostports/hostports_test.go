package hostports

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestOf(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{
			{Name: "once", Ports: []v1.ContainerPort{{HostPort: 7000, ContainerPort: 7000}}},
			{Name: "sidecar", RestartPolicy: &always, Ports: []v1.ContainerPort{{HostPort: 7001, ContainerPort: 7001}}},
		},
		Containers: []v1.Container{{Name: "c", Ports: []v1.ContainerPort{
			{ContainerPort: 8080},
			{HostPort: 80, ContainerPort: 8080},
			{HostPort: 53, HostIP: "10.0.0.1", Protocol: v1.ProtocolUDP, ContainerPort: 53},
		}}},
	}}
	want := []Port{{"0.0.0.0", v1.ProtocolTCP, 80}, {"10.0.0.1", v1.ProtocolUDP, 53}, {"0.0.0.0", v1.ProtocolTCP, 7001}}
	if diff := cmp.Diff(want, Of(pod)); diff != "" {
		t.Errorf("Of (-want +got):\n%s", diff)
	}
}

func TestConflict(t *testing.T) {
	tcp := func(ip string, port int32) Port { return Port{IP: ip, Protocol: v1.ProtocolTCP, Port: port} }
	for _, tc := range []struct {
		name string
		a, b []Port
		want bool
	}{
		{"same port, every address", []Port{tcp("0.0.0.0", 80)}, []Port{tcp("0.0.0.0", 80)}, true},
		{"every address against one", []Port{tcp("0.0.0.0", 80)}, []Port{tcp("10.0.0.1", 80)}, true},
		{"one address against every", []Port{tcp("10.0.0.1", 80)}, []Port{tcp("0.0.0.0", 80)}, true},
		{"two addresses", []Port{tcp("10.0.0.1", 80)}, []Port{tcp("10.0.0.2", 80)}, false},
		{"another protocol", []Port{tcp("0.0.0.0", 53)}, []Port{{IP: "0.0.0.0", Protocol: v1.ProtocolUDP, Port: 53}}, false},
		{"another port", []Port{tcp("0.0.0.0", 80)}, []Port{tcp("0.0.0.0", 81)}, false},
		{"none", nil, []Port{tcp("0.0.0.0", 80)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Conflict(tc.a, tc.b); got != tc.want {
				t.Errorf("Conflict = %v, want %v", got, tc.want)
			}
		})
	}
}
