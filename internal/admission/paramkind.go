package admission

import (
	"context"
	"fmt"

	arv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/tranche/tranche/internal/apiserver"
)

// authorizeParamKind refuses a policy whose paramKind its writer may not read, as
// kube-apiserver's policy strategies do: creating or changing a ValidatingAdmissionPolicy
// or MutatingAdmissionPolicy with a paramKind needs "get" on every object of that kind
// (system:masters excepted), or the policy would read for its author what the author
// cannot.
func authorizeParamKind(ctx context.Context, req *apiserver.AdmissionRequest, u user.Info, mapper meta.RESTMapper, authz authorizer.UnconditionalAuthorizer) error {
	if req.Resource.Group != arv1.GroupName || req.Subresource != "" ||
		(req.Operation != apiserver.AdmitCreate && req.Operation != apiserver.AdmitUpdate) {
		return nil
	}
	var pk, oldPK *arv1.ParamKind
	switch obj := req.Object.(type) {
	case *arv1.ValidatingAdmissionPolicy:
		pk = obj.Spec.ParamKind
		if old, ok := req.OldObject.(*arv1.ValidatingAdmissionPolicy); ok && old != nil {
			oldPK = old.Spec.ParamKind
		}
	case *arv1.MutatingAdmissionPolicy:
		pk = obj.Spec.ParamKind
		if old, ok := req.OldObject.(*arv1.MutatingAdmissionPolicy); ok && old != nil {
			oldPK = old.Spec.ParamKind
		}
	default:
		return nil
	}
	if pk == nil || (oldPK != nil && *oldPK == *pk) {
		return nil
	}
	for _, g := range u.GetGroups() {
		if g == user.SystemPrivilegedGroup {
			return nil
		}
	}
	resource, group, version := "*", "*", "*"
	if gv, err := schema.ParseGroupVersion(pk.APIVersion); err == nil {
		group, version = gv.Group, gv.Version
		if m, err := mapper.RESTMapping(gv.WithKind(pk.Kind).GroupKind(), gv.Version); err == nil {
			resource = m.Resource.Resource
		}
	}
	decision, _, err := authz.Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: "get", ResourceRequest: true,
		Name: "*", Namespace: "*", APIGroup: group, APIVersion: version, Resource: resource})
	if err == nil && decision == authorizer.DecisionAllow {
		return nil
	}
	msg := fmt.Sprintf(`user %v must have "get" permission on all objects of the referenced paramKind (kind=%s, apiVersion=%s)`, u, pk.Kind, pk.APIVersion)
	if err != nil {
		msg = err.Error()
	}
	return apierrors.NewInvalid(req.Kind.GroupKind(), req.Name, field.ErrorList{field.Forbidden(field.NewPath("spec", "paramKind"), msg)})
}
