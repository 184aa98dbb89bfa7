package authorization

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func podsGet() *authorizationv1.ResourceAttributes {
	return &authorizationv1.ResourceAttributes{Namespace: "dev", Verb: "get", Resource: "pods"}
}

func TestSelfSubjectAccessReview(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*authorizationv1.SelfSubjectAccessReview)
		want   []string
	}{
		{name: "resource attributes"},
		{name: "non-resource attributes", mutate: func(r *authorizationv1.SelfSubjectAccessReview) {
			r.Spec = authorizationv1.SelfSubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"}}
		}},
		{name: "neither", mutate: func(r *authorizationv1.SelfSubjectAccessReview) { r.Spec.ResourceAttributes = nil },
			want: []string{"spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"}},
		{name: "both", mutate: func(r *authorizationv1.SelfSubjectAccessReview) {
			r.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"}
		}, want: []string{`spec.nonResourceAttributes: Invalid value: {"path":"/healthz","verb":"get"}: cannot be specified in combination with resourceAttributes`}},
		{name: "handler-owned metadata is fine", mutate: func(r *authorizationv1.SelfSubjectAccessReview) {
			r.UID, r.CreationTimestamp = "u-1", metav1.Now()
		}},
		{name: "labels are not", mutate: func(r *authorizationv1.SelfSubjectAccessReview) { r.Labels = map[string]string{"a": "b"} },
			want: []string{`metadata: Invalid value: {"labels":{"a":"b"}}: must be empty`}},
		{name: "label selector with raw and requirements", mutate: func(r *authorizationv1.SelfSubjectAccessReview) {
			r.Spec.ResourceAttributes.LabelSelector = &authorizationv1.LabelSelectorAttributes{
				RawSelector:  "app=web",
				Requirements: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}},
			}
		}, want: []string{`spec.resourceAttributes.labelSelector.rawSelector: Invalid value: "app=web": may not specified at the same time as requirements`}},
		{name: "empty field selector", mutate: func(r *authorizationv1.SelfSubjectAccessReview) {
			r.Spec.ResourceAttributes.FieldSelector = &authorizationv1.FieldSelectorAttributes{}
		}, want: []string{"spec.resourceAttributes.fieldSelector.requirements: Required value: when spec.resourceAttributes.fieldSelector is specified, requirements or rawSelector is required"}},
		{name: "field requirement without values", mutate: func(r *authorizationv1.SelfSubjectAccessReview) {
			r.Spec.ResourceAttributes.FieldSelector = &authorizationv1.FieldSelectorAttributes{
				Requirements: []metav1.FieldSelectorRequirement{{Key: "spec.nodeName", Operator: metav1.FieldSelectorOpIn}},
			}
		}, want: []string{"spec.resourceAttributes.fieldSelector.requirements[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"}},
		{name: "unknown operator accepted", mutate: func(r *authorizationv1.SelfSubjectAccessReview) {
			r.Spec.ResourceAttributes.FieldSelector = &authorizationv1.FieldSelectorAttributes{
				Requirements: []metav1.FieldSelectorRequirement{{Key: "spec.nodeName", Operator: "Near"}},
			}
		}},
	}
	res := SelfSubjectAccessReviewResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: podsGet()}}
			if tc.mutate != nil {
				tc.mutate(r)
			}
			if diff := cmp.Diff(tc.want, errStrings(res.Validate(r))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSubjectAccessReviews(t *testing.T) {
	tests := []struct {
		name   string
		spec   authorizationv1.SubjectAccessReviewSpec
		ns     string
		sar    []string // errors for a SubjectAccessReview
		local  []string // errors for a LocalSubjectAccessReview in ns
		isSame bool
	}{
		{name: "user", spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: podsGet()}, ns: "dev"},
		{name: "groups only", spec: authorizationv1.SubjectAccessReviewSpec{Groups: []string{"devs"}, ResourceAttributes: podsGet()}, ns: "dev"},
		{name: "no subject", spec: authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: podsGet()}, ns: "dev", isSame: true,
			sar: []string{`spec.user: Invalid value: "": at least one of user or group must be specified`}},
		{name: "namespace mismatch", spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: podsGet()}, ns: "prod",
			local: []string{`spec.resourceAttributes.namespace: Invalid value: "dev": must match metadata.namespace`}},
		{name: "non-resource", spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}, ns: "dev",
			local: []string{`spec.nonResourceAttributes: Invalid value: {"path":"/metrics","verb":"get"}: disallowed on this kind of request`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.isSame {
				tc.local = tc.sar
			}
			sar := &authorizationv1.SubjectAccessReview{Spec: tc.spec}
			if diff := cmp.Diff(tc.sar, errStrings(SubjectAccessReviewResource().Validate(sar))); diff != "" {
				t.Errorf("SubjectAccessReview errors (-want +got):\n%s", diff)
			}
			local := &authorizationv1.LocalSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns}, Spec: tc.spec}
			if diff := cmp.Diff(tc.local, errStrings(LocalSubjectAccessReviewResource().Validate(local))); diff != "" {
				t.Errorf("LocalSubjectAccessReview errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	tests := []struct {
		res        registry.Resource
		plural     string
		namespaced bool
	}{
		{res: SelfSubjectAccessReviewResource(), plural: "selfsubjectaccessreviews"},
		{res: SelfSubjectRulesReviewResource(), plural: "selfsubjectrulesreviews"},
		{res: SubjectAccessReviewResource(), plural: "subjectaccessreviews"},
		{res: LocalSubjectAccessReviewResource(), plural: "localsubjectaccessreviews", namespaced: true},
	}
	for _, tc := range tests {
		t.Run(tc.plural, func(t *testing.T) {
			r := tc.res
			if r.Plural != tc.plural || r.Namespaced != tc.namespaced || r.GVK.Group != "authorization.k8s.io" || r.GVK.Version != "v1" {
				t.Errorf("identity: %v %q namespaced=%v", r.GVK, r.Plural, r.Namespaced)
			}
			if diff := cmp.Diff([]string{"create"}, r.ServedVerbs()); diff != "" {
				t.Errorf("verbs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestForeignObjects(t *testing.T) {
	var ssar *authorizationv1.SelfSubjectAccessReview
	for _, errs := range []field.ErrorList{
		SelfSubjectAccessReviewResource().Validate(ssar),
		SubjectAccessReviewResource().Validate(ssar),
		LocalSubjectAccessReviewResource().Validate(ssar),
	} {
		if errs != nil {
			t.Errorf("foreign object gave %v", errs)
		}
	}
}
