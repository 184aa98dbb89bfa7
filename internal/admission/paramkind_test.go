package admission

import (
	"context"
	"testing"

	arv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/tranche/tranche/internal/apiserver"
)

// allowGet allows "get" of every object of one resource only.
type allowGet struct {
	resource string
}

func (a *allowGet) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if attrs.GetVerb() == "get" && attrs.GetResource() == a.resource && attrs.GetName() == "*" && attrs.GetNamespace() == "*" {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func TestAuthorizeParamKind(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(v1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	admin := &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}
	policy := func(pk *arv1.ParamKind) *arv1.ValidatingAdmissionPolicy {
		return &arv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: arv1.ValidatingAdmissionPolicySpec{ParamKind: pk}}
	}
	configMaps := &arv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	request := func(op apiserver.AdmitOp, obj, old *arv1.ValidatingAdmissionPolicy) *apiserver.AdmissionRequest {
		r := &apiserver.AdmissionRequest{Operation: op, Resource: arv1.SchemeGroupVersion.WithResource("validatingadmissionpolicies"),
			Kind: arv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicy"), Name: "p", Object: obj}
		if old != nil {
			r.OldObject = old
		}
		return r
	}
	tests := []struct {
		name    string
		req     *apiserver.AdmissionRequest
		user    user.Info
		allowed string
		wantErr string
	}{
		{name: "no paramKind", req: request(apiserver.AdmitCreate, policy(nil), nil), user: alice},
		{name: "may read configmaps", req: request(apiserver.AdmitCreate, policy(configMaps), nil), user: alice, allowed: "configmaps"},
		{name: "may not", req: request(apiserver.AdmitCreate, policy(configMaps), nil), user: alice, allowed: "secrets",
			wantErr: `ValidatingAdmissionPolicy.admissionregistration.k8s.io "p" is invalid: spec.paramKind: Forbidden: user &{alice  [system:authenticated] map[]} must have "get" permission on all objects of the referenced paramKind (kind=ConfigMap, apiVersion=v1)`},
		{name: "system:masters", req: request(apiserver.AdmitCreate, policy(configMaps), nil), user: admin},
		{name: "unchanged on update", req: request(apiserver.AdmitUpdate, policy(configMaps), policy(configMaps)), user: alice},
		{name: "changed on update", req: request(apiserver.AdmitUpdate, policy(configMaps), policy(nil)), user: alice,
			wantErr: `ValidatingAdmissionPolicy.admissionregistration.k8s.io "p" is invalid: spec.paramKind: Forbidden: user &{alice  [system:authenticated] map[]} must have "get" permission on all objects of the referenced paramKind (kind=ConfigMap, apiVersion=v1)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := authorizeParamKind(context.Background(), tc.req, tc.user, mapper, &allowGet{resource: tc.allowed})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Fatalf("error %v\nwant %s", err, tc.wantErr)
			}
		})
	}
}
