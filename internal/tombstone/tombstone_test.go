package tombstone

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestAs(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	for name, tc := range map[string]struct {
		obj  any
		want *v1.Pod
	}{
		"object":             {pod, pod},
		"tombstone":          {cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod}, pod},
		"other type":         {&v1.Node{}, nil},
		"tombstone of other": {cache.DeletedFinalStateUnknown{Key: "n", Obj: &v1.Node{}}, nil},
		"nil":                {nil, nil},
		"string":             {"x", nil},
	} {
		t.Run(name, func(t *testing.T) {
			if got := As[*v1.Pod](tc.obj); got != tc.want {
				t.Errorf("As(%T) = %v, want %v", tc.obj, got, tc.want)
			}
		})
	}
}
