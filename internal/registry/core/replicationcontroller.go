package core

import (
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

var (
	rcSpecDoc   = v1.ReplicationControllerSpec{}.SwaggerDoc()
	rcStatusDoc = v1.ReplicationControllerStatus{}.SwaggerDoc()
)

// ReplicationControllerResource serves core/v1 replicationcontrollers (short name rc) with
// their status and scale subresources, Kubernetes' defaults and validation, and kubectl's
// NAME DESIRED CURRENT READY AGE table (CONTAINERS IMAGES SELECTOR in -o wide);
// status.replicas is selectable in field selectors.
func ReplicationControllerResource() registry.Resource {
	return registry.Resource{
		GVK:             v1.SchemeGroupVersion.WithKind("ReplicationController"),
		Plural:          "replicationcontrollers",
		Singular:        "replicationcontroller",
		ShortNames:      []string{"rc"},
		Categories:      []string{"all"},
		Namespaced:      true,
		New:             func() runtime.Object { return &v1.ReplicationController{} },
		NewList:         func() runtime.Object { return &v1.ReplicationControllerList{} },
		TrackGeneration: true,
		PrepareForCreate: registry.Hook(func(rc *v1.ReplicationController) {
			rc.Status = v1.ReplicationControllerStatus{}
		}),
		Default: registry.Hook(func(rc *v1.ReplicationController) {
			DefaultReplicationController(rc)
		}),
		Validate: registry.Func(func(rc *v1.ReplicationController) field.ErrorList {
			return ValidateReplicationControllerSpec(&rc.Spec, field.NewPath("spec"))
		}),
		ValidateUpdate: registry.FuncUpdate(func(rc, _ *v1.ReplicationController) field.ErrorList {
			// Unlike a ReplicaSet's, a ReplicationController's selector may change.
			return ValidateReplicationControllerSpec(&rc.Spec, field.NewPath("spec"))
		}),
		Status: &registry.StatusStrategy{
			ValidateUpdate: registry.FuncUpdate(func(rc, _ *v1.ReplicationController) field.ErrorList {
				return ValidateReplicationControllerStatus(&rc.Status, field.NewPath("status"))
			}),
		},
		Scale: registry.Scale(func(rc *v1.ReplicationController) (int32, int32, string) {
			return deref32(rc.Spec.Replicas), rc.Status.Replicas, labels.SelectorFromSet(rc.Spec.Selector).String()
		}, func(rc *v1.ReplicationController, replicas int32) { rc.Spec.Replicas = &replicas }),
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Desired", Type: "integer", Description: rcSpecDoc["replicas"]},
			{Name: "Current", Type: "integer", Description: rcStatusDoc["replicas"]},
			{Name: "Ready", Type: "integer", Description: rcStatusDoc["readyReplicas"]},
			registry.AgeColumn,
			{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
			{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
			{Name: "Selector", Type: "string", Priority: 1, Description: rcSpecDoc["selector"]},
		},
		Row: registry.FuncWith(func(rc *v1.ReplicationController, now time.Time) []interface{} {
			var names, images []string
			if rc.Spec.Template != nil {
				for _, c := range rc.Spec.Template.Spec.Containers {
					names, images = append(names, c.Name), append(images, c.Image)
				}
			}
			return []interface{}{
				rc.Name,
				int64(deref32(rc.Spec.Replicas)),
				int64(rc.Status.Replicas),
				int64(rc.Status.ReadyReplicas),
				registry.HumanAge(rc.CreationTimestamp, now),
				strings.Join(names, ","), strings.Join(images, ","), labels.FormatLabels(rc.Spec.Selector),
			}
		}),
		Fields: registry.Func(func(rc *v1.ReplicationController) fields.Set {
			return fields.Set{"status.replicas": strconv.Itoa(int(rc.Status.Replicas))}
		}),
	}
}

// DefaultReplicationController applies core/v1's defaults: the selector and the object's
// labels default to the template's labels, replicas to 1, and the template gets the pod
// defaults.
func DefaultReplicationController(rc *v1.ReplicationController) {
	if t := rc.Spec.Template; t != nil {
		if len(rc.Spec.Selector) == 0 && len(t.Labels) > 0 {
			rc.Spec.Selector = make(map[string]string, len(t.Labels))
			for k, v := range t.Labels {
				rc.Spec.Selector[k] = v
			}
		}
		if len(rc.Labels) == 0 && len(t.Labels) > 0 {
			rc.Labels = make(map[string]string, len(t.Labels))
			for k, v := range t.Labels {
				rc.Labels[k] = v
			}
		}
		DefaultPodSpec(&t.Spec)
	}
	if rc.Spec.Replicas == nil {
		one := int32(1)
		rc.Spec.Replicas = &one
	}
}

// ValidateReplicationControllerSpec is Kubernetes' check of a ReplicationController's spec,
// field paths and wording included: a non-empty selector of valid labels matching the
// template's labels, non-negative replicas and minReadySeconds, and a template whose pods
// restart Always and have no activeDeadlineSeconds.
func ValidateReplicationControllerSpec(s *v1.ReplicationControllerSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(int64(s.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	if len(s.Selector) == 0 {
		errs = append(errs, field.Required(fldPath.Child("selector"), ""))
	}
	errs = append(errs, metav1validation.ValidateLabels(s.Selector, fldPath.Child("selector"))...)
	errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(int64(deref32(s.Replicas)), fldPath.Child("replicas"))...)
	errs = append(errs, validateRCTemplate(s.Template, s.Selector, fldPath.Child("template"))...)
	return errs
}

func validateRCTemplate(t *v1.PodTemplateSpec, selector map[string]string, fldPath *field.Path) field.ErrorList {
	if t == nil {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	if sel := labels.SelectorFromSet(selector); !sel.Empty() && !sel.Matches(labels.Set(t.Labels)) {
		errs = append(errs, field.Invalid(fldPath.Child("metadata", "labels"), t.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, ValidatePodTemplateSpec(t, fldPath)...)
	if t.Spec.RestartPolicy != v1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(fldPath.Child("spec", "restartPolicy"), t.Spec.RestartPolicy, []string{string(v1.RestartPolicyAlways)}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicationController is not Supported"))
	}
	return errs
}

// ValidateReplicationControllerStatus refuses negative counters and counters above
// status.replicas (availableReplicas also above readyReplicas), as Kubernetes does.
func ValidateReplicationControllerStatus(s *v1.ReplicationControllerStatus, fldPath *field.Path) field.ErrorList {
	nonNeg := func(v int64, name string) field.ErrorList {
		return apimachineryvalidation.ValidateNonnegativeField(v, fldPath.Child(name))
	}
	errs := nonNeg(int64(s.Replicas), "replicas")
	errs = append(errs, nonNeg(int64(s.FullyLabeledReplicas), "fullyLabeledReplicas")...)
	errs = append(errs, nonNeg(int64(s.ReadyReplicas), "readyReplicas")...)
	errs = append(errs, nonNeg(int64(s.AvailableReplicas), "availableReplicas")...)
	errs = append(errs, nonNeg(s.ObservedGeneration, "observedGeneration")...)
	const msg = "cannot be greater than status.replicas"
	if s.FullyLabeledReplicas > s.Replicas {
		errs = append(errs, field.Invalid(fldPath.Child("fullyLabeledReplicas"), s.FullyLabeledReplicas, msg))
	}
	if s.ReadyReplicas > s.Replicas {
		errs = append(errs, field.Invalid(fldPath.Child("readyReplicas"), s.ReadyReplicas, msg))
	}
	if s.AvailableReplicas > s.Replicas {
		errs = append(errs, field.Invalid(fldPath.Child("availableReplicas"), s.AvailableReplicas, msg))
	}
	if s.AvailableReplicas > s.ReadyReplicas {
		errs = append(errs, field.Invalid(fldPath.Child("availableReplicas"), s.AvailableReplicas, "cannot be greater than readyReplicas"))
	}
	return errs
}

func deref32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
