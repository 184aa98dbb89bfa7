package endpointslice

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// The indexed lookups must answer exactly what a scan of the namespace answers.
func TestIndexedLookupsMatchAScan(t *testing.T) {
	pod := func(ns, name, node string, l map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l}, Spec: v1.PodSpec{NodeName: node}}
	}
	svc := func(ns, name string, sel map[string]string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{Selector: sel}}
	}
	objs := []runtime.Object{
		pod("a", "web-1", "n1", map[string]string{"app": "web", "tier": "front"}),
		pod("a", "web-2", "n2", map[string]string{"app": "web", "tier": "back"}),
		pod("a", "db-1", "n1", map[string]string{"app": "db"}),
		pod("a", "bare", "", nil),
		pod("b", "web-1", "n1", map[string]string{"app": "web", "tier": "front"}),
		svc("a", "web", map[string]string{"app": "web"}),
		svc("a", "front", map[string]string{"app": "web", "tier": "front"}),
		svc("a", "all", map[string]string{}),
		svc("a", "none", nil),
		svc("a", "ghost", map[string]string{"app": "ghost"}),
		svc("b", "web", map[string]string{"app": "web"}),
	}
	c := startController(t, newFakeClient(objs...))

	names := func(pods []*v1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		ns  string
		sel map[string]string
	}{
		{"a", map[string]string{"app": "web"}},
		{"a", map[string]string{"app": "web", "tier": "front"}},
		{"a", map[string]string{"app": "web", "tier": "middle"}},
		{"a", map[string]string{}},
		{"b", map[string]string{"app": "web"}},
		{"c", map[string]string{"app": "web"}},
	} {
		got, err := c.selectedPods(tc.ns, tc.sel)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := c.pods.Pods(tc.ns).List(labels.SelectorFromValidatedSet(tc.sel))
		if g, w := names(got), names(want); !slices.Equal(g, w) {
			t.Errorf("selectedPods(%s, %v) = %v, a scan gives %v", tc.ns, tc.sel, g, w)
		}
	}

	for _, tc := range []struct {
		ns     string
		labels map[string]string
		want   []string
	}{
		{"a", map[string]string{"app": "web", "tier": "front"}, []string{"a/all", "a/front", "a/web"}},
		{"a", map[string]string{"app": "web", "tier": "back"}, []string{"a/all", "a/web"}},
		{"a", nil, []string{"a/all"}},
		{"b", map[string]string{"app": "web"}, []string{"b/web"}},
		{"c", map[string]string{"app": "web"}, nil},
	} {
		got := c.servicesFor(tc.ns, tc.labels)
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("servicesFor(%s, %v) = %v, want %v", tc.ns, tc.labels, got, tc.want)
		}
	}

	onN1, err := c.podsOnNode("n1")
	if err != nil {
		t.Fatal(err)
	}
	if g, w := names(onN1), []string{"a/db-1", "a/web-1", "b/web-1"}; !slices.Equal(g, w) {
		t.Errorf("podsOnNode(n1) = %v, want %v", g, w)
	}
}
