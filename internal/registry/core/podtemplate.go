package core

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// PodTemplateResource serves core/v1 podtemplates: namespaced, generation tracked, the
// template defaulted and validated as a workload's pod template is (path "template"),
// and kubectl's NAME CONTAINERS IMAGES POD LABELS table.
func PodTemplateResource() registry.Resource {
	return registry.Resource{
		GVK:             v1.SchemeGroupVersion.WithKind("PodTemplate"),
		Plural:          "podtemplates",
		Singular:        "podtemplate",
		Namespaced:      true,
		New:             func() runtime.Object { return &v1.PodTemplate{} },
		NewList:         func() runtime.Object { return &v1.PodTemplateList{} },
		TrackGeneration: true,
		Default: registry.Hook(func(pt *v1.PodTemplate) {
			DefaultPodSpec(&pt.Template.Spec)
		}),
		Validate: registry.Func(ValidatePodTemplate),
		ValidateUpdate: registry.FuncUpdate(func(pt, _ *v1.PodTemplate) field.ErrorList {
			return ValidatePodTemplate(pt)
		}),
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Containers", Type: "string", Description: "Names of each container in the template."},
			{Name: "Images", Type: "string", Description: "Images referenced by each container in the template."},
			{Name: "Pod Labels", Type: "string", Description: "The labels for the pod template."},
		},
		Row: registry.FuncWith(func(pt *v1.PodTemplate, _ time.Time) []interface{} {
			var names, images []string
			for _, c := range pt.Template.Spec.Containers {
				names, images = append(names, c.Name), append(images, c.Image)
			}
			return []interface{}{pt.Name, strings.Join(names, ","), strings.Join(images, ","), labels.FormatLabels(pt.Template.Labels)}
		}),
	}
}

// ValidatePodTemplate is Kubernetes' check of a PodTemplate: its template's labels,
// annotations and pod spec, under the field path "template". The same rules apply on
// update; nothing in a PodTemplate is immutable.
func ValidatePodTemplate(pt *v1.PodTemplate) field.ErrorList {
	return ValidatePodTemplateSpec(&pt.Template, field.NewPath("template"))
}

// ValidateTolerations checks tolerations as a pod spec's are checked (RuntimeClass's
// scheduling.tolerations reuses the rules); fldPath is the list's path.
func ValidateTolerations(tolerations []v1.Toleration, fldPath *field.Path) field.ErrorList {
	return podValidateTolerations(tolerations, fldPath)
}

// ValidateResourceRequirements checks resource names and quantities as a container's
// are checked (RuntimeClass's overhead.podFixed is validated as limits).
func ValidateResourceRequirements(r *v1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	return podValidateResources(r, fldPath)
}
