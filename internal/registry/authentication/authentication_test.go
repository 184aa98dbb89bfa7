package authentication

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// makeTokenRequest returns a valid one-hour request bound to a pod, changed by mutate.
func makeTokenRequest(mutate func(*authenticationv1.TokenRequest)) *authenticationv1.TokenRequest {
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         []string{"https://kubernetes.default.svc.cluster.local"},
		ExpirationSeconds: new(int64(3600)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web-0", UID: "u-1"},
	}}
	if mutate != nil {
		mutate(tr)
	}
	return tr
}

func TestTokenRequestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*authenticationv1.TokenRequest)
		want   []string
	}{
		{name: "valid"},
		{name: "defaults", mutate: func(tr *authenticationv1.TokenRequest) { tr.Spec = authenticationv1.TokenRequestSpec{} }},
		{name: "exactly ten minutes", mutate: func(tr *authenticationv1.TokenRequest) { tr.Spec.ExpirationSeconds = new(int64(600)) }},
		{name: "too short", mutate: func(tr *authenticationv1.TokenRequest) { tr.Spec.ExpirationSeconds = new(int64(599)) },
			want: []string{"spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"}},
		{name: "exactly 2^32", mutate: func(tr *authenticationv1.TokenRequest) { tr.Spec.ExpirationSeconds = new(int64(1 << 32)) }},
		{name: "too long", mutate: func(tr *authenticationv1.TokenRequest) { tr.Spec.ExpirationSeconds = new(int64(1<<32 + 1)) },
			want: []string{"spec.expirationSeconds: Invalid value: 4294967297: may not specify a duration larger than 2^32 seconds"}},
		{name: "bound to a secret", mutate: func(tr *authenticationv1.TokenRequest) { tr.Spec.BoundObjectRef.Kind = "Secret" }},
		{name: "bound to a node", mutate: func(tr *authenticationv1.TokenRequest) { tr.Spec.BoundObjectRef.Kind = "Node" }},
		{name: "bound to a deployment", mutate: func(tr *authenticationv1.TokenRequest) {
			tr.Spec.BoundObjectRef.Kind, tr.Spec.BoundObjectRef.APIVersion = "Deployment", "apps/v1"
		}, want: []string{`spec.boundObjectRef.kind: Unsupported value: "Deployment.apps": supported values: "Node", "Pod", "Secret"`}},
		{name: "pod outside the core group", mutate: func(tr *authenticationv1.TokenRequest) { tr.Spec.BoundObjectRef.APIVersion = "example.com/v1" },
			want: []string{`spec.boundObjectRef.kind: Unsupported value: "Pod.example.com": supported values: "Node", "Pod", "Secret"`}},
		{name: "bound object without name", mutate: func(tr *authenticationv1.TokenRequest) { tr.Spec.BoundObjectRef.Name = "" },
			want: []string{"spec.boundObjectRef.name: Required value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(TokenRequestValidate(makeTokenRequest(tc.mutate)))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	if TokenRequestValidate(nil) != nil {
		t.Errorf("nil request gave errors")
	}
}

func TestTokenReview(t *testing.T) {
	r := TokenReviewResource()
	tests := []struct {
		name  string
		token string
		want  []string
	}{
		{name: "token", token: "abc"},
		{name: "no token", want: []string{"spec.token: Required value: token is required for TokenReviewSpec"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(r.Validate(&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tc.token}}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	if errs := r.Validate(&authenticationv1.SelfSubjectReview{}); errs != nil {
		t.Errorf("foreign object gave %v", errs)
	}
}

func TestIdentity(t *testing.T) {
	tests := []struct {
		res    registry.Resource
		plural string
	}{
		{res: TokenReviewResource(), plural: "tokenreviews"},
		{res: SelfSubjectReviewResource(), plural: "selfsubjectreviews"},
	}
	for _, tc := range tests {
		t.Run(tc.plural, func(t *testing.T) {
			r := tc.res
			if r.Plural != tc.plural || r.Namespaced || r.GVK.Group != "authentication.k8s.io" || r.GVK.Version != "v1" {
				t.Errorf("identity: %v %q namespaced=%v", r.GVK, r.Plural, r.Namespaced)
			}
			if diff := cmp.Diff([]string{"create"}, r.ServedVerbs()); diff != "" {
				t.Errorf("verbs (-want +got):\n%s", diff)
			}
		})
	}
}
