package core

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	api "k8s.io/kubernetes/pkg/apis/core"
	apiv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"

	"github.com/tranche/tranche/internal/registry"
)

// LimitRangeResource serves core/v1 limitranges (short name limits): core/v1's defaults
// (a Container item's default limit from max, its default request from the default
// limit or min), Kubernetes' validation, and the NAME CREATED AT table kube-apiserver
// prints for resources without a printer of their own.
func LimitRangeResource() registry.Resource {
	return registry.Strategy[*v1.LimitRange]{
		Default:        DefaultLimitRange,
		Validate:       ValidateLimitRange,
		ValidateUpdate: func(lr, _ *v1.LimitRange) field.ErrorList { return ValidateLimitRange(lr) },
		Row: func(lr *v1.LimitRange, _ time.Time) []interface{} {
			return []interface{}{lr.Name, lr.CreationTimestamp.UTC().Format(time.RFC3339)}
		},
	}.Apply(registry.Resource{
		GVK:        v1.SchemeGroupVersion.WithKind("LimitRange"),
		Plural:     "limitranges",
		Singular:   "limitrange",
		ShortNames: []string{"limits"},
		Namespaced: true,
		New:        func() runtime.Object { return &v1.LimitRange{} },
		NewList:    func() runtime.Object { return &v1.LimitRangeList{} },
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Created At", Type: "date", Description: registry.AgeColumn.Description},
		},
	})
}

// DefaultLimitRange applies core/v1's LimitRangeItem defaults to every item.
func DefaultLimitRange(lr *v1.LimitRange) {
	for i := range lr.Spec.Limits {
		apiv1.SetDefaults_LimitRangeItem(&lr.Spec.Limits[i])
	}
}

// ValidateLimitRange is Kubernetes' ValidateLimitRange without metadata: one item per
// type, qualified resource names, min <= defaultRequest <= default <= max and
// maxLimitRequestRatio >= 1, with upstream's field paths and wording.
func ValidateLimitRange(lr *v1.LimitRange) field.ErrorList {
	out := &api.LimitRange{}
	if err := apiv1.Convert_v1_LimitRange_To_core_LimitRange(lr, out, nil); err != nil {
		panic(fmt.Sprintf("converting LimitRange %s/%s: %v", lr.Namespace, lr.Name, err))
	}
	return registry.WithoutMetadata(corevalidation.ValidateLimitRange(out))
}
