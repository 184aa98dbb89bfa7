// Package apiregistration serves apiregistration.k8s.io/v1 APIServices, the kind with
// which kube-aggregator registers every group/version the API serves: built-in and
// custom resources' group versions are Local APIServices, an extension API server's are
// backed by a Service. Validation and the status rules are kube-aggregator's own.
package apiregistration

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/install"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/validation"

	"github.com/tranche/tranche/internal/registry"
)

// The API server's codec decodes and encodes with client-go's scheme: it learns the v1
// types (with their defaulters: a service reference's port is 443 unless set).
func init() {
	utilruntime.Must(apiregv1.AddToScheme(scheme.Scheme))
}

// internalScheme converts between v1 and the internal type kube-aggregator's validation
// works on.
var internalScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	install.Install(s)
	return s
}()

func toInternal(in *apiregv1.APIService) *apiregistration.APIService {
	out := &apiregistration.APIService{}
	if err := internalScheme.Convert(in, out, nil); err != nil {
		// The conversion is generated field copying; it fails only on a programmer error.
		panic(fmt.Sprintf("apiservice %s: %v", in.Name, err))
	}
	return out
}

// APIServiceResource returns apiregistration.k8s.io/v1 APIService: cluster-scoped, with
// a status subresource, kube-aggregator's validation (the name is version.group, a
// service reference needs a caBundle unless insecureSkipTLSVerify, priorities in range),
// and the NAME SERVICE AVAILABLE AGE table.
func APIServiceResource() registry.Resource {
	ctx := context.Background()
	return registry.Resource{
		GVK:        apiregv1.SchemeGroupVersion.WithKind("APIService"),
		Plural:     "apiservices",
		Singular:   "apiservice",
		Categories: []string{"api-extensions"},
		New:        func() runtime.Object { return &apiregv1.APIService{} },
		NewList:    func() runtime.Object { return &apiregv1.APIServiceList{} },
		// The name is version.group, "v1." for the core group: any path segment here,
		// and Validate requires the exact name, as kube-aggregator does.
		NameValidation:   path.ValidatePathSegmentName,
		PrepareForCreate: registry.Hook(func(a *apiregv1.APIService) { a.Status = apiregv1.APIServiceStatus{} }),
		Validate: registry.Func(func(a *apiregv1.APIService) field.ErrorList {
			return validation.ValidateAPIService(ctx, toInternal(a))
		}),
		ValidateUpdate: registry.FuncUpdate(func(a, old *apiregv1.APIService) field.ErrorList {
			return validation.ValidateAPIServiceUpdate(ctx, toInternal(a), toInternal(old))
		}),
		Status: &registry.StatusStrategy{
			ValidateUpdate: registry.FuncUpdate(func(a, old *apiregv1.APIService) field.ErrorList {
				return validation.ValidateAPIServiceStatusUpdate(ctx, toInternal(a), toInternal(old))
			}),
		},
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Service", Type: "string", Description: "The reference to the service that hosts this API endpoint."},
			{Name: "Available", Type: "string", Description: "Whether this service is available."},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object, now time.Time) []interface{} {
			a, ok := obj.(*apiregv1.APIService)
			if !ok {
				return []interface{}{"", "", "", ""}
			}
			return []interface{}{a.Name, ServiceColumn(a), AvailableColumn(a), registry.HumanAge(a.CreationTimestamp, now)}
		},
	}
}

// ServiceColumn is "Local" for an APIService the API server serves itself, else the
// backing Service as namespace/name.
func ServiceColumn(a *apiregv1.APIService) string {
	if a.Spec.Service == nil {
		return "Local"
	}
	return a.Spec.Service.Namespace + "/" + a.Spec.Service.Name
}

// AvailableColumn is the Available condition's status, with its reason when not True
// ("False (MissingEndpoints)"), or Unknown.
func AvailableColumn(a *apiregv1.APIService) string {
	for _, c := range a.Status.Conditions {
		if c.Type != apiregv1.Available {
			continue
		}
		if c.Status != apiregv1.ConditionTrue && c.Reason != "" {
			return fmt.Sprintf("%s (%s)", c.Status, c.Reason)
		}
		return string(c.Status)
	}
	return string(apiregv1.ConditionUnknown)
}
