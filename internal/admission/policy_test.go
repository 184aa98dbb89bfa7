package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	arv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/apiserver"
)

func configMapPolicy(mutate func(*arv1.ValidatingAdmissionPolicy)) *arv1.ValidatingAdmissionPolicy {
	p := &arv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "small-configmaps"},
		Spec: arv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(arv1.Fail),
			MatchConstraints: &arv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}, MatchPolicy: ptr.To(arv1.Equivalent),
				ResourceRules: []arv1.NamedRuleWithOperations{{RuleWithOperations: arv1.RuleWithOperations{
					Operations: []arv1.OperationType{arv1.Create, arv1.Update},
					Rule:       arv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}, Scope: ptr.To(arv1.AllScopes)},
				}}},
			},
			Variables:   []arv1.Variable{{Name: "keys", Expression: "has(object.data) ? object.data.size() : 0"}},
			Validations: []arv1.Validation{{Expression: "variables.keys <= 1", Message: "too many keys"}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func binding(actions ...arv1.ValidationAction) *arv1.ValidatingAdmissionPolicyBinding {
	return &arv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "small-configmaps-binding"},
		Spec: arv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "small-configmaps", ValidationActions: actions}}
}

func configMapRequest(keys ...string) *apiserver.AdmissionRequest {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{}}
	for _, k := range keys {
		cm.Data[k] = "v"
	}
	return &apiserver.AdmissionRequest{Operation: apiserver.AdmitCreate, Resource: v1.SchemeGroupVersion.WithResource("configmaps"),
		Kind: v1.SchemeGroupVersion.WithKind("ConfigMap"), Namespace: "ns", Name: "cm", Object: cm}
}

func TestValidatingAdmissionPolicy(t *testing.T) {
	limits := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "limits"}, Data: map[string]string{"max": "2"}}
	tests := []struct {
		name     string
		objects  []runtime.Object
		req      *apiserver.AdmissionRequest
		wantErr  string
		reason   metav1.StatusReason
		warnings []string
	}{
		{name: "allowed", objects: []runtime.Object{configMapPolicy(nil), binding(arv1.Deny)}, req: configMapRequest("a")},
		{name: "denied", objects: []runtime.Object{configMapPolicy(nil), binding(arv1.Deny)}, req: configMapRequest("a", "b"),
			// Without a reason of the validation's own, a denial is Invalid (422).
			wantErr: `configmaps "cm" is forbidden: ValidatingAdmissionPolicy 'small-configmaps' with binding 'small-configmaps-binding' denied request: too many keys`,
			reason:  metav1.StatusReasonInvalid},
		{name: "no binding", objects: []runtime.Object{configMapPolicy(nil)}, req: configMapRequest("a", "b")},
		{name: "warn", objects: []runtime.Object{configMapPolicy(nil), binding(arv1.Warn)}, req: configMapRequest("a", "b"),
			warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'small-configmaps' with binding 'small-configmaps-binding': too many keys"}},
		{name: "message expression", req: configMapRequest("a", "b"), objects: []runtime.Object{configMapPolicy(func(p *arv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations[0].MessageExpression = `"configmap " + object.metadata.name + " has " + string(variables.keys) + " keys"`
			p.Spec.Validations[0].Reason = ptr.To(metav1.StatusReasonForbidden)
		}), binding(arv1.Deny)},
			wantErr: `configmaps "cm" is forbidden: ValidatingAdmissionPolicy 'small-configmaps' with binding 'small-configmaps-binding' denied request: configmap cm has 2 keys`,
			reason:  metav1.StatusReasonForbidden},
		{name: "param", req: configMapRequest("a", "b", "c"), objects: []runtime.Object{limits, configMapPolicy(func(p *arv1.ValidatingAdmissionPolicy) {
			p.Spec.ParamKind = &arv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
			p.Spec.Validations[0].Expression = "variables.keys <= int(params.data.max)"
		}), func() runtime.Object {
			b := binding(arv1.Deny)
			b.Spec.ParamRef = &arv1.ParamRef{Name: "limits", Namespace: "ns", ParameterNotFoundAction: ptr.To(arv1.DenyAction)}
			return b
		}()},
			wantErr: `configmaps "cm" is forbidden: ValidatingAdmissionPolicy 'small-configmaps' with binding 'small-configmaps-binding' denied request: too many keys`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := startWebhooks(t, tc.objects...)
			var warnings []string
			var err error
			// The policy source compiles what its informers deliver in the background.
			for i := 0; i < 50; i++ {
				warnings, err = w.Validate(context.Background(), tc.req)
				if (err != nil) == (tc.wantErr != "") && len(warnings) == len(tc.warnings) {
					break
				}
				waitABit()
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if tc.reason != "" && apierrors.ReasonForError(err) != tc.reason {
				t.Errorf("reason %q, want %q", apierrors.ReasonForError(err), tc.reason)
			}
			if diff := cmp.Diff(tc.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func waitABit() { time.Sleep(20 * time.Millisecond) }
