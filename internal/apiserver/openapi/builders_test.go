package openapi

import (
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/registry"
)

// makeResource builds a registry.Resource for tests; mutate adjusts it.
func makeResource(gvk schema.GroupVersionKind, plural string, obj, list runtime.Object, mutate func(*registry.Resource)) registry.Resource {
	r := registry.Resource{
		GVK:        gvk,
		Plural:     plural,
		Namespaced: true,
		New:        func() runtime.Object { return obj.DeepCopyObject() },
		NewList:    func() runtime.Object { return list.DeepCopyObject() },
	}
	if mutate != nil {
		mutate(&r)
	}
	return r
}

// testResources are a namespaced resource with status (Service), one with status and scale
// in a named group (Deployment), a cluster-scoped one (Namespace) and a create-only review
// kind (TokenReview).
func testResources() []registry.Resource {
	return []registry.Resource{
		makeResource(v1.SchemeGroupVersion.WithKind("Service"), "services", &v1.Service{}, &v1.ServiceList{},
			func(r *registry.Resource) { r.Status = &registry.StatusStrategy{} }),
		makeResource(appsv1.SchemeGroupVersion.WithKind("Deployment"), "deployments", &appsv1.Deployment{}, &appsv1.DeploymentList{},
			func(r *registry.Resource) {
				r.Status = &registry.StatusStrategy{}
				r.Scale = &registry.ScaleStrategy{}
			}),
		makeResource(v1.SchemeGroupVersion.WithKind("Namespace"), "namespaces", &v1.Namespace{}, &v1.NamespaceList{},
			func(r *registry.Resource) { r.Namespaced = false }),
		makeResource(authenticationv1.SchemeGroupVersion.WithKind("TokenReview"), "tokenreviews",
			&authenticationv1.TokenReview{}, &authenticationv1.TokenReview{},
			func(r *registry.Resource) {
				r.Namespaced = false
				r.Verbs = []string{"create"}
			}),
	}
}
