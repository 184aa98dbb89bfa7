package core

import (
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/registry"
)

// ServiceAccountResource returns the core/v1 ServiceAccount resource (metadata-only
// validation, as in Kubernetes) with kubectl's NAME SECRETS AGE table.
func ServiceAccountResource() registry.Resource {
	return registry.Resource{
		GVK:        schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"},
		Plural:     "serviceaccounts",
		Singular:   "serviceaccount",
		ShortNames: []string{"sa"},
		Namespaced: true,
		New:        func() runtime.Object { return &v1.ServiceAccount{} },
		NewList:    func() runtime.Object { return &v1.ServiceAccountList{} },
		// serviceaccounts/token is served by the API server's configuration (it signs
		// with the server's key); the resource declares it for discovery.
		Handlers: []registry.Handler{{Name: "token", Kind: authenticationv1.SchemeGroupVersion.WithKind("TokenRequest"), Verbs: []string{"create"}}},
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Secrets", Type: "string", Description: v1.ServiceAccount{}.SwaggerDoc()["secrets"]},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object, now time.Time) []interface{} {
			sa, _ := obj.(*v1.ServiceAccount)
			if sa == nil {
				return nil
			}
			return []interface{}{sa.Name, int64(len(sa.Secrets)), registry.HumanAge(sa.CreationTimestamp, now)}
		},
	}
}
