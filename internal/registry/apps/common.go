// Package apps holds the apps/v1 resources: Deployment, ReplicaSet, DaemonSet, StatefulSet
// and ControllerRevision. Each file exports one constructor returning the registry.Resource
// whose hooks default and validate objects the way Kubernetes' apps/v1 defaulters, validators
// and registry strategies do, with Kubernetes' field paths and error wording.
package apps

import (
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/registry/core"
)

// Column definitions shared by the workload tables; names, types and descriptions are the
// ones Kubernetes' printers publish.
var (
	containersColumn = metav1.TableColumnDefinition{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."}
	imagesColumn     = metav1.TableColumnDefinition{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."}
)

func selectorColumn(description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Selector", Type: "string", Priority: 1, Description: description}
}

func intColumn(name, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "integer", Description: description}
}

func stringColumn(name, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Description: description}
}

// The printers describe the workload columns with the extensions/v1beta1 documentation.
var (
	deploymentStatusDoc = extensionsv1beta1.DeploymentStatus{}.SwaggerDoc()
	deploymentSpecDoc   = extensionsv1beta1.DeploymentSpec{}.SwaggerDoc()
	replicaSetSpecDoc   = extensionsv1beta1.ReplicaSetSpec{}.SwaggerDoc()
	replicaSetStatusDoc = extensionsv1beta1.ReplicaSetStatus{}.SwaggerDoc()
	daemonSetSpecDoc    = extensionsv1beta1.DaemonSetSpec{}.SwaggerDoc()
	daemonSetStatusDoc  = extensionsv1beta1.DaemonSetStatus{}.SwaggerDoc()
)

// containerCells lays out a template's container names and images on one line each, comma
// separated, as kubectl's wide output does.
func containerCells(containers []v1.Container) (names, images string) {
	n := make([]string, len(containers))
	im := make([]string, len(containers))
	for i, c := range containers {
		n[i], im[i] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

// selectorString renders a selector like the Deployment printer: "<invalid>" when it does
// not convert, "" for nil (labels.Nothing prints empty), otherwise the selector syntax.
func selectorString(s *metav1.LabelSelector) string {
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return "<invalid>"
	}
	return sel.String()
}

func deref32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func derefIntOrString(p *intstr.IntOrString) intstr.IntOrString {
	if p == nil {
		return intstr.IntOrString{}
	}
	return *p
}

// templateSelectorErrors checks a workload selector the way Deployment, ReplicaSet and
// StatefulSet validation do: required, well formed, non-empty (emptyMsg) and able to select
// the template's labels. ok is false when the selector does not parse, in which case
// Kubernetes skips validating the template.
func templateSelectorErrors(sel *metav1.LabelSelector, tmpl *v1.PodTemplateSpec, fldPath *field.Path, emptyMsg, unparsableMsg string) (ok bool, errs field.ErrorList) {
	selPath := fldPath.Child("selector")
	if sel == nil {
		errs = append(errs, field.Required(selPath, ""))
	} else {
		errs = append(errs, strictSelectorErrors(sel, selPath)...)
		if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(selPath, sel, emptyMsg))
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, append(errs, field.Invalid(selPath, sel, unparsableMsg))
	}
	if !selector.Empty() && !selector.Matches(labels.Set(tmpl.Labels)) {
		errs = append(errs, field.Invalid(fldPath.Child("template", "metadata", "labels"), tmpl.Labels, "`selector` does not match template `labels`"))
	}
	return true, errs
}

// strictSelectorErrors validates a selector without the relaxed label-value rules, as the
// workload validators do.
func strictSelectorErrors(sel *metav1.LabelSelector, fldPath *field.Path) field.ErrorList {
	return metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, fldPath)
}

// replicaSetTemplateErrors is Kubernetes' ValidatePodTemplateSpecForReplicaSet minus the
// selector match (done by templateSelectorErrors): the pod template itself, restartPolicy
// Always and no activeDeadlineSeconds. Deployments share it, wording included.
func replicaSetTemplateErrors(tmpl *v1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	errs := core.ValidatePodTemplateSpec(tmpl, fldPath)
	errs = append(errs, alwaysRestartErrors(tmpl, fldPath, "ReplicaSet")...)
	return errs
}

// alwaysRestartErrors enforces what every long-running workload requires of its pods.
func alwaysRestartErrors(tmpl *v1.PodTemplateSpec, fldPath *field.Path, kind string) field.ErrorList {
	var errs field.ErrorList
	if tmpl.Spec.RestartPolicy != v1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(fldPath.Child("spec", "restartPolicy"), tmpl.Spec.RestartPolicy, []string{string(v1.RestartPolicyAlways)}))
	}
	if tmpl.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in "+kind+" is not Supported"))
	}
	return errs
}

// nonNegative wraps apimachinery's check for the many int32 counters.
func nonNegative(v int32, fldPath *field.Path) field.ErrorList {
	return apimachineryvalidation.ValidateNonnegativeField(int64(v), fldPath)
}

func nonNegativePtr(v *int32, fldPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	return nonNegative(*v, fldPath)
}

// positiveIntOrPercent accepts a non-negative integer or a valid percentage string.
func positiveIntOrPercent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch v.Type {
	case intstr.String:
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(fldPath, v, msg))
		}
	case intstr.Int:
		errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(int64(v.IntValue()), fldPath)...)
	default:
		errs = append(errs, field.Invalid(fldPath, v, "must be an integer or percentage (e.g '5%%')"))
	}
	return errs
}

// percentValue returns the number in a valid percentage string.
func percentValue(v intstr.IntOrString) (int, bool) {
	if v.Type != intstr.String || len(validation.IsValidPercent(v.StrVal)) != 0 {
		return 0, false
	}
	n, err := strconv.Atoi(v.StrVal[:len(v.StrVal)-1])
	if err != nil {
		return 0, false
	}
	return n, true
}

// intOrPercentValue is the number written in v, percentage or not; invalid strings count
// as 0, which is what Kubernetes' IntValue gives them.
func intOrPercentValue(v intstr.IntOrString) int {
	if n, ok := percentValue(v); ok {
		return n
	}
	if v.Type == intstr.String {
		n, err := strconv.Atoi(v.StrVal)
		if err != nil {
			return 0
		}
		return n
	}
	return int(v.IntVal)
}

func notMoreThan100Percent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if n, ok := percentValue(v); ok && n > 100 {
		return field.ErrorList{field.Invalid(fldPath, v, "must not be greater than 100%")}
	}
	return nil
}

// statusNotAbove reports a status counter that exceeds status.replicas (or another bound).
func statusNotAbove(v, limit int32, fldPath *field.Path, msg string) field.ErrorList {
	if v > limit {
		return field.ErrorList{field.Invalid(fldPath, v, msg)}
	}
	return nil
}

// collisionCountErrors refuses a decremented status.collisionCount.
func collisionCountErrors(n, old *int32) field.ErrorList {
	if old == nil {
		return nil
	}
	if n == nil || *n < *old {
		return field.ErrorList{field.Invalid(field.NewPath("status", "collisionCount"), deref32(n), "cannot be decremented")}
	}
	return nil
}

// ageCell is the AGE column every table ends its default columns with.
func ageCell(m metav1.ObjectMeta, now time.Time) string {
	return registry.HumanAge(m.CreationTimestamp, now)
}
