// Package scheduling serves scheduling.k8s.io/v1 PriorityClasses and holds the pure
// part of kube-apiserver's Priority admission plugin: how a pod's priorityClassName
// (or the cluster's globalDefault class) becomes its spec.priority and
// spec.preemptionPolicy.
package scheduling

import (
	"fmt"
	"strings"
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	api "k8s.io/kubernetes/pkg/apis/scheduling"
	apiv1 "k8s.io/kubernetes/pkg/apis/scheduling/v1"
	"k8s.io/kubernetes/pkg/apis/scheduling/validation"

	"github.com/tranche/tranche/internal/registry"
)

// PriorityClassResource serves scheduling.k8s.io/v1 priorityclasses (short name pc):
// cluster-scoped, preemptionPolicy defaulted to PreemptLowerPriority, validated as
// kube-apiserver does (the "system-" prefix reserved for the two system classes, user
// values at most one billion, value and preemptionPolicy immutable), generation 1 from
// creation on, with kubectl's NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY table.
// Refusing the deletion of the system classes and a second globalDefault class is the
// Priority admission step's part (internal/server/priority.go).
func PriorityClassResource() registry.Resource {
	doc := schedulingv1.PriorityClass{}.SwaggerDoc()
	return registry.Strategy[*schedulingv1.PriorityClass]{
		PrepareForCreate: func(pc *schedulingv1.PriorityClass) { pc.Generation = 1 },
		Default:          apiv1.SetDefaults_PriorityClass,
		Validate:         ValidatePriorityClass,
		ValidateUpdate:   ValidatePriorityClassUpdate,
		Row: func(pc *schedulingv1.PriorityClass, now time.Time) []interface{} {
			policy := ""
			if pc.PreemptionPolicy != nil {
				policy = string(*pc.PreemptionPolicy)
			}
			return []interface{}{pc.Name, int64(pc.Value), pc.GlobalDefault, registry.HumanAge(pc.CreationTimestamp, now), policy}
		},
	}.Apply(registry.Resource{
		GVK:        schedulingv1.SchemeGroupVersion.WithKind("PriorityClass"),
		Plural:     "priorityclasses",
		Singular:   "priorityclass",
		ShortNames: []string{"pc"},
		New:        func() runtime.Object { return &schedulingv1.PriorityClass{} },
		NewList:    func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Value", Type: "integer", Description: doc["value"]},
			{Name: "Global-Default", Type: "boolean", Description: doc["globalDefault"]},
			registry.AgeColumn,
			{Name: "PreemptionPolicy", Type: "string", Description: doc["preemptionPolicy"]},
		},
	})
}

// ValidatePriorityClass is kube-apiserver's check of a new PriorityClass. Of its
// metadata errors only the reserved-name one is kept: the generic handlers validate
// metadata themselves.
func ValidatePriorityClass(pc *schedulingv1.PriorityClass) field.ErrorList {
	return withoutMetadataButReserved(validation.ValidatePriorityClass(toInternal(pc)))
}

// ValidatePriorityClassUpdate is kube-apiserver's check of an update: value and
// preemptionPolicy never change, the rest (description, globalDefault, labels) may.
func ValidatePriorityClassUpdate(pc, old *schedulingv1.PriorityClass) field.ErrorList {
	return registry.WithoutMetadata(validation.ValidatePriorityClassUpdate(toInternal(pc), toInternal(old)))
}

func toInternal(pc *schedulingv1.PriorityClass) *api.PriorityClass {
	out := &api.PriorityClass{}
	if err := apiv1.Convert_v1_PriorityClass_To_scheduling_PriorityClass(pc, out, nil); err != nil {
		panic(fmt.Sprintf("converting PriorityClass %s: %v", pc.Name, err))
	}
	return out
}

func withoutMetadataButReserved(errs field.ErrorList) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		if e.Field == "metadata.name" && e.Type == field.ErrorTypeForbidden {
			out = append(out, e)
			continue
		}
		if e.Field == "metadata" || strings.HasPrefix(e.Field, "metadata.") {
			continue
		}
		out = append(out, e)
	}
	return out
}

// SystemPriorityClasses returns fresh copies of the classes every cluster has,
// system-node-critical and system-cluster-critical, as kube-apiserver creates them at
// start-up.
func SystemPriorityClasses() []*schedulingv1.PriorityClass {
	out := apiv1.SystemPriorityClasses()
	for _, pc := range out {
		apiv1.SetDefaults_PriorityClass(pc)
	}
	return out
}

// IsSystemPriorityClass reports whether name is one of the system classes, which
// cannot be deleted.
func IsSystemPriorityClass(name string) bool {
	for _, n := range apiv1.SystemPriorityClassNames() {
		if n == name {
			return true
		}
	}
	return false
}
