package admissionregistration

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	arv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/registry"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func makeValidatingWebhookConfiguration(mutate func(*arv1.ValidatingWebhookConfiguration)) *arv1.ValidatingWebhookConfiguration {
	c := &arv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deny", CreationTimestamp: metav1.NewTime(created)},
		Webhooks: []arv1.ValidatingWebhook{{
			Name: "deny.example.com",
			ClientConfig: arv1.WebhookClientConfig{
				Service: &arv1.ServiceReference{Namespace: "ns", Name: "webhook", Path: ptr.To("/pods")},
			},
			Rules: []arv1.RuleWithOperations{{
				Operations: []arv1.OperationType{arv1.Create},
				Rule:       arv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			SideEffects:             ptr.To(arv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if mutate != nil {
		mutate(c)
	}
	return c
}

// prepare runs the steps the handlers run before validation on a create.
func prepare(r registry.Resource, obj runtime.Object) runtime.Object {
	if r.PrepareForCreate != nil {
		r.PrepareForCreate(obj)
	}
	if r.Default != nil {
		r.Default(obj)
	}
	return obj
}

func TestWebhookConfigurationDefaults(t *testing.T) {
	c := prepare(ValidatingWebhookConfigurationResource(), makeValidatingWebhookConfiguration(nil)).(*arv1.ValidatingWebhookConfiguration)
	w := c.Webhooks[0]
	equivalent, fail, all := arv1.Equivalent, arv1.Fail, arv1.AllScopes
	want := arv1.ValidatingWebhook{
		Name: "deny.example.com",
		ClientConfig: arv1.WebhookClientConfig{
			Service: &arv1.ServiceReference{Namespace: "ns", Name: "webhook", Path: ptr.To("/pods"), Port: ptr.To[int32](443)},
		},
		Rules: []arv1.RuleWithOperations{{
			Operations: []arv1.OperationType{arv1.Create},
			Rule:       arv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: &all},
		}},
		FailurePolicy:           &fail,
		MatchPolicy:             &equivalent,
		NamespaceSelector:       &metav1.LabelSelector{},
		ObjectSelector:          &metav1.LabelSelector{},
		SideEffects:             ptr.To(arv1.SideEffectClassNone),
		TimeoutSeconds:          ptr.To[int32](10),
		AdmissionReviewVersions: []string{"v1"},
	}
	if diff := cmp.Diff(want, w); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}

	m := &arv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Webhooks: []arv1.MutatingWebhook{{Name: "m.example.com"}}}
	prepare(MutatingWebhookConfigurationResource(), m)
	if got := m.Webhooks[0].ReinvocationPolicy; got == nil || *got != arv1.NeverReinvocationPolicy {
		t.Errorf("reinvocationPolicy = %v, want Never", got)
	}
}

func TestValidateWebhookConfiguration(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*arv1.ValidatingWebhookConfiguration)
		want   []string
	}{
		{name: "valid"},
		{name: "name not qualified", mutate: func(c *arv1.ValidatingWebhookConfiguration) { c.Webhooks[0].Name = "deny" },
			want: []string{`webhooks[0].name: Invalid value: "deny": should be a domain with at least three segments separated by dots`}},
		{name: "no client", mutate: func(c *arv1.ValidatingWebhookConfiguration) { c.Webhooks[0].ClientConfig = arv1.WebhookClientConfig{} },
			want: []string{"webhooks[0].clientConfig: Required value: exactly one of url or service is required"}},
		{name: "side effects unknown", mutate: func(c *arv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].SideEffects = ptr.To(arv1.SideEffectClass("Unknown"))
		}, want: []string{`webhooks[0].sideEffects: Unsupported value: "Unknown": supported values: "None", "NoneOnDryRun"`}},
		{name: "timeout too long", mutate: func(c *arv1.ValidatingWebhookConfiguration) { c.Webhooks[0].TimeoutSeconds = ptr.To[int32](31) },
			want: []string{"webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds"}},
		{name: "duplicate names", mutate: func(c *arv1.ValidatingWebhookConfiguration) { c.Webhooks = append(c.Webhooks, c.Webhooks[0]) },
			want: []string{`webhooks[1].name: Duplicate value: "deny.example.com"`}},
	}
	r := ValidatingWebhookConfigurationResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := prepare(r, makeValidatingWebhookConfiguration(tc.mutate))
			if diff := cmp.Diff(tc.want, errStrings(r.Validate(obj))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func makePolicy(mutate func(*arv1.ValidatingAdmissionPolicy)) *arv1.ValidatingAdmissionPolicy {
	p := &arv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "replicas", CreationTimestamp: metav1.NewTime(created)},
		Spec: arv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &arv1.MatchResources{ResourceRules: []arv1.NamedRuleWithOperations{{RuleWithOperations: arv1.RuleWithOperations{
				Operations: []arv1.OperationType{arv1.Create, arv1.Update},
				Rule:       arv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
			}}}},
			Validations: []arv1.Validation{{Expression: "object.spec.replicas <= 5", Message: "too many"}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestValidatingAdmissionPolicy(t *testing.T) {
	r := ValidatingAdmissionPolicyResource()
	tests := []struct {
		name   string
		mutate func(*arv1.ValidatingAdmissionPolicy)
		want   []string
	}{
		{name: "valid"},
		{name: "undeclared name", mutate: func(p *arv1.ValidatingAdmissionPolicy) { p.Spec.Validations[0].Expression = "replicas <= 5" },
			want: []string{"spec.validations[0].expression: Invalid value: \"replicas <= 5\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'replicas' (in container '')\n | replicas <= 5\n | ^"}},
		{name: "no validations", mutate: func(p *arv1.ValidatingAdmissionPolicy) { p.Spec.Validations = nil },
			want: []string{
				"spec.validations: Required value: validations or auditAnnotations must contain at least one item",
				"spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
			}},
		{name: "no match constraints", mutate: func(p *arv1.ValidatingAdmissionPolicy) { p.Spec.MatchConstraints = nil },
			want: []string{"spec.matchConstraints: Required value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := prepare(r, makePolicy(tc.mutate))
			if diff := cmp.Diff(tc.want, errStrings(r.Validate(obj))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	p := prepare(r, makePolicy(func(p *arv1.ValidatingAdmissionPolicy) {
		p.Status.TypeChecking = &arv1.TypeChecking{}
	})).(*arv1.ValidatingAdmissionPolicy)
	if p.Status.TypeChecking != nil {
		t.Error("status set by a create is kept")
	}
	mc := p.Spec.MatchConstraints
	if *p.Spec.FailurePolicy != arv1.Fail || *mc.MatchPolicy != arv1.Equivalent || mc.NamespaceSelector == nil || mc.ObjectSelector == nil {
		t.Errorf("defaults missing: failurePolicy %v, matchConstraints %+v", p.Spec.FailurePolicy, mc)
	}
	if r.Status == nil || r.Status.ValidateUpdate == nil {
		t.Error("no status subresource")
	}
}

func TestTables(t *testing.T) {
	now := created.Add(5 * time.Minute)
	binding := &arv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", CreationTimestamp: metav1.NewTime(created)},
		Spec: arv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "replicas", ParamRef: &arv1.ParamRef{Name: "limits"}}}
	policy := makePolicy(func(p *arv1.ValidatingAdmissionPolicy) {
		p.Spec.ParamKind = &arv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	})
	mpolicy := &arv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "m", CreationTimestamp: metav1.NewTime(created)},
		Spec: arv1.MutatingAdmissionPolicySpec{Mutations: []arv1.Mutation{{}, {}}}}
	tests := []struct {
		name    string
		r       registry.Resource
		obj     runtime.Object
		columns []string
		row     []interface{}
	}{
		{"validatingwebhookconfigurations", ValidatingWebhookConfigurationResource(), makeValidatingWebhookConfiguration(nil),
			[]string{"Name", "Webhooks", "Age"}, []interface{}{"deny", int64(1), "5m"}},
		{"validatingadmissionpolicies", ValidatingAdmissionPolicyResource(), policy,
			[]string{"Name", "Validations", "ParamKind", "Age"}, []interface{}{"replicas", int64(1), "v1/ConfigMap", "5m"}},
		{"validatingadmissionpolicybindings", ValidatingAdmissionPolicyBindingResource(), binding,
			[]string{"Name", "PolicyName", "ParamRef", "Age"}, []interface{}{"b", "replicas", "*/limits", "5m"}},
		{"mutatingadmissionpolicies", MutatingAdmissionPolicyResource(), mpolicy,
			[]string{"Name", "Mutations", "ParamKind", "Age"}, []interface{}{"m", int64(2), "<unset>", "5m"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			for _, c := range tc.r.Columns {
				names = append(names, c.Name)
			}
			if diff := cmp.Diff(tc.columns, names); diff != "" {
				t.Errorf("columns (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.row, tc.r.Row(tc.obj, now)); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
			if tc.r.Namespaced || tc.r.Plural != tc.name {
				t.Errorf("%s: namespaced %v plural %q", tc.name, tc.r.Namespaced, tc.r.Plural)
			}
		})
	}
}
