package core

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func makeQuota(mutate func(*v1.ResourceQuota)) *v1.ResourceQuota {
	q := &v1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "compute", Namespace: "default", CreationTimestamp: svcTestCreated},
		Spec: v1.ResourceQuotaSpec{Hard: v1.ResourceList{
			v1.ResourcePods: resource.MustParse("10"), v1.ResourceRequestsCPU: resource.MustParse("1"),
			v1.ResourceLimitsCPU: resource.MustParse("2"), "count/deployments.apps": resource.MustParse("3"),
		}},
	}
	if mutate != nil {
		mutate(q)
	}
	return q
}

func errStrings(errs field.ErrorList) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestValidateResourceQuota(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.ResourceQuota)
		want   []string
	}{
		{name: "valid"},
		{name: "negative", mutate: func(q *v1.ResourceQuota) { q.Spec.Hard[v1.ResourcePods] = resource.MustParse("-1") },
			want: []string{`spec.hard[pods]: Invalid value: "-1": must be greater than or equal to 0`}},
		{name: "fractional count", mutate: func(q *v1.ResourceQuota) { q.Spec.Hard[v1.ResourcePods] = resource.MustParse("1.5") },
			want: []string{`spec.hard[pods]: Invalid value: "1500m": must be an integer`}},
		{name: "bad name", mutate: func(q *v1.ResourceQuota) { q.Spec.Hard["foo/bar/baz"] = resource.MustParse("1") },
			want: []string{`spec.hard[foo/bar/baz]: Invalid value: "foo/bar/baz": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`}},
		{name: "scope and resource mismatch", mutate: func(q *v1.ResourceQuota) {
			q.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeBestEffort}
		}, want: []string{
			`spec.scopes: Invalid value: ["BestEffort"]: unsupported scope applied to resource`,
			`spec.scopes: Invalid value: ["BestEffort"]: unsupported scope applied to resource`,
		}},
		{name: "unknown scope", mutate: func(q *v1.ResourceQuota) {
			q.Spec.Hard = v1.ResourceList{v1.ResourcePods: resource.MustParse("1")}
			q.Spec.Scopes = []v1.ResourceQuotaScope{"Foo"}
		}, want: []string{`spec.scopes: Invalid value: ["Foo"]: unsupported scope`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(ValidateResourceQuota(makeQuota(tc.mutate)))
			if tc.want == nil {
				tc.want = []string{}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateResourceQuotaUpdateScopesImmutable(t *testing.T) {
	old := makeQuota(func(q *v1.ResourceQuota) {
		q.Spec.Hard = v1.ResourceList{v1.ResourcePods: resource.MustParse("1")}
		q.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeBestEffort}
	})
	q := old.DeepCopy()
	q.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeNotBestEffort}
	want := []string{`spec.scopes: Invalid value: ["NotBestEffort"]: field is immutable`}
	if diff := cmp.Diff(want, errStrings(ValidateResourceQuotaUpdate(q, old))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	q = old.DeepCopy()
	q.Spec.Hard[v1.ResourcePods] = resource.MustParse("5")
	if errs := ValidateResourceQuotaUpdate(q, old); len(errs) != 0 {
		t.Errorf("changing hard: %v", errs)
	}
}

func TestValidateResourceQuotaStatusUpdate(t *testing.T) {
	old := makeQuota(func(q *v1.ResourceQuota) { q.ResourceVersion = "7" })
	q := old.DeepCopy()
	q.Status.Used = v1.ResourceList{v1.ResourcePods: resource.MustParse("-2")}
	want := []string{`status.used[pods]: Invalid value: "-2": must be greater than or equal to 0`}
	if diff := cmp.Diff(want, errStrings(ValidateResourceQuotaStatusUpdate(q, old))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestResourceQuotaRowAndWarnings(t *testing.T) {
	q := makeQuota(func(q *v1.ResourceQuota) {
		q.Status.Hard = q.Spec.Hard
		q.Status.Used = v1.ResourceList{v1.ResourcePods: resource.MustParse("1"), v1.ResourceRequestsCPU: resource.MustParse("100m")}
	})
	res := ResourceQuotaResource()
	got := res.Row(q, svcTestCreated.Add(90*time.Second))
	want := []interface{}{"compute", "count/deployments.apps: 0/3, pods: 1/10, requests.cpu: 100m/1", "limits.cpu: 0/2", "90s"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	var names []string
	for _, c := range res.Columns {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Request", "Limit", "Age"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	high := makeQuota(func(q *v1.ResourceQuota) { q.Spec.Hard[v1.ResourceRequestsCPU] = resource.MustParse("3") })
	wantWarn := []string{"ResourceQuota requests.cpu (3) should be less than limits.cpu (2)"}
	if diff := cmp.Diff(wantWarn, res.Warnings(high, nil)); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if w := res.Warnings(high, q); len(w) != 0 {
		t.Errorf("update warnings: %v", w)
	}
}

func TestLimitRangeDefaultsAndValidation(t *testing.T) {
	lr := &v1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: "default", CreationTimestamp: svcTestCreated},
		Spec: v1.LimitRangeSpec{Limits: []v1.LimitRangeItem{{
			Type: v1.LimitTypeContainer,
			Min:  v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m")},
			Max:  v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")},
		}}},
	}
	DefaultLimitRange(lr)
	item := lr.Spec.Limits[0]
	if got := item.Default[v1.ResourceCPU]; got.String() != "1" {
		t.Errorf("default cpu = %s, want the max 1", got.String())
	}
	if got := item.DefaultRequest[v1.ResourceMemory]; got.String() != "1Gi" {
		t.Errorf("defaultRequest memory = %s, want the default 1Gi", got.String())
	}
	if errs := ValidateLimitRange(lr); len(errs) != 0 {
		t.Fatalf("valid limit range: %v", errs)
	}
	lr.Spec.Limits[0].Min[v1.ResourceCPU] = resource.MustParse("2")
	lr.Spec.Limits[0].DefaultRequest[v1.ResourceCPU] = resource.MustParse("2")
	lr.Spec.Limits = append(lr.Spec.Limits, v1.LimitRangeItem{Type: v1.LimitTypeContainer})
	want := []string{
		`spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1`,
		`spec.limits[0].defaultRequest[cpu]: Invalid value: "2": default request value 2 is greater than max value 1`,
		`spec.limits[0].defaultRequest[cpu]: Invalid value: "2": default request value 2 is greater than default limit value 1`,
		`spec.limits[0].default[cpu]: Invalid value: "2": min value 2 is greater than default value 1`,
		`spec.limits[1].type: Duplicate value: "Container"`,
	}
	if diff := cmp.Diff(want, errStrings(ValidateLimitRange(lr))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	row := LimitRangeResource().Row(lr, time.Time{})
	if diff := cmp.Diff([]interface{}{"limits", svcTestCreated.UTC().Format(time.RFC3339)}, row); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}
