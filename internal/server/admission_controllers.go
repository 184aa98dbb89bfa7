package server

import (
	"context"

	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"
	"k8s.io/kubernetes/pkg/controller/validatingadmissionpolicystatus"

	"github.com/tranche/tranche/internal/apiserver/openapi/generated"
	"github.com/tranche/tranche/internal/controller/manager"
)

// validatingAdmissionPolicyStatus is kube-controller-manager's
// validatingadmissionpolicy-status-controller: it type-checks every policy's expressions
// against the OpenAPI schemas of the kinds it matches and writes status.typeChecking.
func validatingAdmissionPolicyStatus(disc discovery.DiscoveryInterface) manager.Descriptor {
	return manager.Descriptor{Name: "validatingadmissionpolicy-status", New: func(_ context.Context, c manager.Context) (manager.Controller, error) {
		schemas := resolver.NewDefinitionsSchemaResolver(generated.GetOpenAPIDefinitions, scheme.Scheme).
			Combine(&resolver.ClientDiscoveryResolver{Discovery: disc})
		checker := &validating.TypeChecker{SchemaResolver: schemas,
			RestMapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}
		ctrl, err := validatingadmissionpolicystatus.NewController(c.Informers.Admissionregistration().V1().ValidatingAdmissionPolicies(),
			c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies(), checker)
		if err != nil {
			return nil, err
		}
		return manager.Workers(ctrl, 1), nil
	}}
}
