package node

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestStatusKeepsExtendedResources: an extended resource patched into capacity stays
// there and in allocatable across the agent's status updates; what the agent measures
// (cpu) is its own, and other names are not carried over.
func TestStatusKeepsExtendedResources(t *testing.T) {
	prev := &v1.NodeStatus{Capacity: v1.ResourceList{
		"example.com/foo":  resource.MustParse("5"),
		v1.ResourceCPU:     resource.MustParse("64"),
		"kubernetes.io/xy": resource.MustParse("1"),
	}}
	st := Status(Config{Name: "n", CPU: 2, Memory: 1 << 30}, prev, time.Unix(0, 0))
	for _, list := range []v1.ResourceList{st.Capacity, st.Allocatable} {
		if q := list["example.com/foo"]; q.Value() != 5 {
			t.Errorf("example.com/foo = %v, want 5 in %v", q.String(), list)
		}
		if q := list[v1.ResourceCPU]; q.Value() != 2 {
			t.Errorf("cpu = %v, want the measured 2", q.String())
		}
		if _, ok := list["kubernetes.io/xy"]; ok {
			t.Errorf("kubernetes.io/xy carried over: %v", list)
		}
	}
}
