package node

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func makeRuntimeClass(mutate func(*nodev1.RuntimeClass)) *nodev1.RuntimeClass {
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor", CreationTimestamp: metav1.NewTime(created)}, Handler: "runsc"}
	if mutate != nil {
		mutate(rc)
	}
	return rc
}

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestValidateRuntimeClass(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*nodev1.RuntimeClass)
		want   []string
	}{
		{name: "valid"},
		{name: "no handler", mutate: func(rc *nodev1.RuntimeClass) { rc.Handler = "" }, want: []string{"handler: Required value"}},
		{name: "handler not a DNS label", mutate: func(rc *nodev1.RuntimeClass) { rc.Handler = "run.sc" },
			want: []string{`handler: Invalid value: "run.sc": must not contain dots`}},
		{name: "overhead", mutate: func(rc *nodev1.RuntimeClass) {
			rc.Overhead = &nodev1.Overhead{PodFixed: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("120Mi")}}
		}},
		{name: "negative overhead", mutate: func(rc *nodev1.RuntimeClass) {
			rc.Overhead = &nodev1.Overhead{PodFixed: v1.ResourceList{v1.ResourceCPU: resource.MustParse("-1")}}
		}, want: []string{"overhead.limits[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"}},
		{name: "scheduling", mutate: func(rc *nodev1.RuntimeClass) {
			rc.Scheduling = &nodev1.Scheduling{NodeSelector: map[string]string{"sandbox": "true"},
				Tolerations: []v1.Toleration{{Key: "sandbox", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}}
		}},
		{name: "bad node selector", mutate: func(rc *nodev1.RuntimeClass) {
			rc.Scheduling = &nodev1.Scheduling{NodeSelector: map[string]string{"a b": "x"}}
		}, want: []string{`scheduling.nodeSelector: Invalid value: "a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`}},
		{name: "duplicate toleration", mutate: func(rc *nodev1.RuntimeClass) {
			t := v1.Toleration{Key: "k", Operator: v1.TolerationOpEqual, Value: "v"}
			rc.Scheduling = &nodev1.Scheduling{Tolerations: []v1.Toleration{t, t}}
		}, want: []string{`scheduling.tolerations[1]: Duplicate value: {"key":"k","operator":"Equal","value":"v"}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(RuntimeClassResource().Validate(makeRuntimeClass(tc.mutate)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRuntimeClassHandlerImmutable(t *testing.T) {
	old := makeRuntimeClass(nil)
	got := errStrings(RuntimeClassResource().ValidateUpdate(makeRuntimeClass(func(rc *nodev1.RuntimeClass) { rc.Handler = "runc" }), old))
	want := []string{`handler: Invalid value: "runc": field is immutable`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if errs := RuntimeClassResource().ValidateUpdate(makeRuntimeClass(func(rc *nodev1.RuntimeClass) { rc.Labels = map[string]string{"a": "b"} }), old); len(errs) != 0 {
		t.Errorf("metadata change refused: %v", errs)
	}
}

func TestRuntimeClassRow(t *testing.T) {
	r := RuntimeClassResource()
	var names []string
	for _, c := range r.Columns {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Handler", "Age"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]interface{}{"gvisor", "runsc", "5m"}, r.Row(makeRuntimeClass(nil), created.Add(5*time.Minute))); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	if r.Namespaced {
		t.Error("RuntimeClass must be cluster-scoped")
	}
}
