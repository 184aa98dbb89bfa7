package policy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func makePDB(mutate func(*policyv1.PodDisruptionBudget)) *policyv1.PodDisruptionBudget {
	two := intstr.FromInt32(2)
	p := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "t1", CreationTimestamp: metav1.NewTime(created)},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestValidatePodDisruptionBudget(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	n := func(i int32) *intstr.IntOrString { v := intstr.FromInt32(i); return &v }
	tests := []struct {
		name   string
		mutate func(*policyv1.PodDisruptionBudget)
		want   []string
	}{
		{name: "valid"},
		{name: "maxUnavailable percent", mutate: func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, pct("25%") }},
		{name: "both set", mutate: func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = n(1) },
			want: []string{`spec: Invalid value: {"minAvailable":2,"selector":{"matchLabels":{"app":"web"}},"maxUnavailable":1}: minAvailable and maxUnavailable cannot be both set`}},
		{name: "negative", mutate: func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = n(-1) },
			want: []string{"spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"}},
		{name: "over 100%", mutate: func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = pct("150%") },
			want: []string{`spec.minAvailable: Invalid value: "150%": must not be greater than 100%`}},
		{name: "not a percent", mutate: func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable, p.Spec.MinAvailable = pct("half"), nil },
			want: []string{`spec.maxUnavailable: Invalid value: "half": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')`}},
		{name: "bad selector", mutate: func(p *policyv1.PodDisruptionBudget) {
			p.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
		}, want: []string{`spec.selector.matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator`}},
		{name: "unknown eviction policy", mutate: func(p *policyv1.PodDisruptionBudget) {
			p.Spec.UnhealthyPodEvictionPolicy = new(policyv1.UnhealthyPodEvictionPolicyType("Sometimes"))
		}, want: []string{`spec.unhealthyPodEvictionPolicy: Unsupported value: "Sometimes": supported values: "AlwaysAllow", "IfHealthyBudget"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(PodDisruptionBudgetResource().Validate(makePDB(tc.mutate)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidatePodDisruptionBudgetStatus(t *testing.T) {
	p := makePDB(func(p *policyv1.PodDisruptionBudget) { p.Status.DisruptionsAllowed = -1 })
	got := errStrings(PodDisruptionBudgetResource().Status.ValidateUpdate(p, makePDB(nil)))
	want := []string{"status.disruptionsAllowed: Invalid value: -1: must be greater than or equal to 0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPodDisruptionBudgetPrepareForCreateClearsStatus(t *testing.T) {
	p := makePDB(func(p *policyv1.PodDisruptionBudget) { p.Status.DisruptionsAllowed = 5 })
	PodDisruptionBudgetResource().PrepareForCreate(p)
	if p.Status.DisruptionsAllowed != 0 {
		t.Errorf("status kept on create: %+v", p.Status)
	}
}

func TestPodDisruptionBudgetRow(t *testing.T) {
	r := PodDisruptionBudgetResource()
	var names []string
	for _, c := range r.Columns {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	p := makePDB(func(p *policyv1.PodDisruptionBudget) { p.Status.DisruptionsAllowed = 1 })
	if diff := cmp.Diff([]interface{}{"web", "2", "N/A", int64(1), "5m"}, r.Row(p, created.Add(5*time.Minute))); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}
