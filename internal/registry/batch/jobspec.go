// Package batch holds the batch/v1 resources, Job and CronJob, and the cron schedule parser
// the CronJob controller shares with validation. Defaults, validation and tables follow
// Kubernetes' batch/v1 defaulters, validators and printers, wording included.
package batch

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry/core"
)

// Limits Kubernetes places on a job spec.
const (
	maxParallelismForIndexedJob                = 100000
	maxFailedIndexesForIndexedJob              = 100_000
	completionsSoftLimit                       = 100_000
	parallelismLimitForHighCompletions         = 10_000
	maxFailedIndexesLimitForHighCompletions    = 10_000
	maxPodFailurePolicyRules                   = 20
	maxPodFailurePolicyOnExitCodesValues       = 255
	maxPodFailurePolicyOnPodConditionsPatterns = 20
	maxManagedByLength                         = 63
	maxSuccessPolicySucceededIndexesLength     = 64 * 1024
	maxSuccessPolicyRules                      = 20
)

// defaultJobSpecTemplate fills what a job spec's defaulters set whether it sits in a Job or
// in a CronJob's job template: the pod template and the pod failure policy patterns.
func defaultJobSpecTemplate(s *batchv1.JobSpec) {
	core.DefaultPodSpec(&s.Template.Spec)
	if s.PodFailurePolicy == nil {
		return
	}
	for i := range s.PodFailurePolicy.Rules {
		for j := range s.PodFailurePolicy.Rules[i].OnPodConditions {
			if p := &s.PodFailurePolicy.Rules[i].OnPodConditions[j]; p.Status == "" {
				p.Status = v1.ConditionTrue
			}
		}
	}
}

func nonNegative(v int32, fldPath *field.Path) field.ErrorList {
	return apimachineryvalidation.ValidateNonnegativeField(int64(v), fldPath)
}

func nonNegativePtr(v *int32, fldPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	return nonNegative(*v, fldPath)
}

func isIndexed(s *batchv1.JobSpec) bool {
	return s.CompletionMode != nil && *s.CompletionMode == batchv1.IndexedCompletion
}

// validateJobSpecCommon checks what a Job and a CronJob's job template share (Kubernetes'
// validateJobSpec): counters, completion mode limits, policies and the pod template.
func validateJobSpecCommon(s *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	errs := nonNegativePtr(s.Parallelism, fldPath.Child("parallelism"))
	errs = append(errs, nonNegativePtr(s.Completions, fldPath.Child("completions"))...)
	if s.ActiveDeadlineSeconds != nil {
		errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(*s.ActiveDeadlineSeconds, fldPath.Child("activeDeadlineSeconds"))...)
	}
	errs = append(errs, nonNegativePtr(s.BackoffLimit, fldPath.Child("backoffLimit"))...)
	errs = append(errs, nonNegativePtr(s.TTLSecondsAfterFinished, fldPath.Child("ttlSecondsAfterFinished"))...)
	errs = append(errs, nonNegativePtr(s.BackoffLimitPerIndex, fldPath.Child("backoffLimitPerIndex"))...)
	if s.MaxFailedIndexes != nil {
		errs = append(errs, nonNegative(*s.MaxFailedIndexes, fldPath.Child("maxFailedIndexes"))...)
		if s.BackoffLimitPerIndex == nil {
			errs = append(errs, field.Required(fldPath.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
		}
	}
	if s.ManagedBy != nil {
		errs = append(errs, validation.IsDomainPrefixedPath(fldPath.Child("managedBy"), *s.ManagedBy)...)
		if len(*s.ManagedBy) > maxManagedByLength {
			errs = append(errs, field.TooLong(fldPath.Child("managedBy"), *s.ManagedBy, maxManagedByLength))
		}
	}
	errs = append(errs, validateCompletionMode(s, fldPath)...)
	if s.PodFailurePolicy != nil {
		errs = append(errs, validatePodFailurePolicy(s, fldPath.Child("podFailurePolicy"))...)
	}
	if s.SuccessPolicy != nil {
		if !isIndexed(s) {
			errs = append(errs, field.Invalid(fldPath.Child("successPolicy"), *s.SuccessPolicy, "requires indexed completion mode"))
		} else {
			errs = append(errs, validateSuccessPolicy(s, fldPath.Child("successPolicy"))...)
		}
	}
	errs = append(errs, validatePodReplacementPolicy(s, fldPath.Child("podReplacementPolicy"))...)

	errs = append(errs, core.ValidatePodTemplateSpec(&s.Template, fldPath.Child("template"))...)
	rpPath := fldPath.Child("template", "spec", "restartPolicy")
	switch rp := s.Template.Spec.RestartPolicy; {
	case rp == v1.RestartPolicyAlways || rp == "":
		// Pod defaulting turns an unset policy into Always, so both mean "not chosen".
		errs = append(errs, field.Required(rpPath, fmt.Sprintf("valid values: %q, %q", v1.RestartPolicyOnFailure, v1.RestartPolicyNever)))
	case rp != v1.RestartPolicyOnFailure && rp != v1.RestartPolicyNever:
		errs = append(errs, field.NotSupported(rpPath, rp, []v1.RestartPolicy{v1.RestartPolicyOnFailure, v1.RestartPolicyNever}))
	case s.PodFailurePolicy != nil && rp != v1.RestartPolicyNever:
		errs = append(errs, field.Invalid(rpPath, rp, fmt.Sprintf("only %q is supported when podFailurePolicy is specified", v1.RestartPolicyNever)))
	}
	return errs
}

func validateCompletionMode(s *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.CompletionMode != nil {
		if *s.CompletionMode != batchv1.NonIndexedCompletion && *s.CompletionMode != batchv1.IndexedCompletion {
			errs = append(errs, field.NotSupported(fldPath.Child("completionMode"), s.CompletionMode, []batchv1.CompletionMode{batchv1.NonIndexedCompletion, batchv1.IndexedCompletion}))
		}
		if isIndexed(s) {
			errs = append(errs, validateIndexedLimits(s, fldPath)...)
		}
	}
	if !isIndexed(s) {
		if s.BackoffLimitPerIndex != nil {
			errs = append(errs, field.Invalid(fldPath.Child("backoffLimitPerIndex"), *s.BackoffLimitPerIndex, "requires indexed completion mode"))
		}
		if s.MaxFailedIndexes != nil {
			errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *s.MaxFailedIndexes, "requires indexed completion mode"))
		}
	}
	return errs
}

func validateIndexedLimits(s *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Completions == nil {
		errs = append(errs, field.Required(fldPath.Child("completions"), fmt.Sprintf("when completion mode is %s", batchv1.IndexedCompletion)))
	}
	if s.Parallelism != nil && *s.Parallelism > maxParallelismForIndexedJob {
		errs = append(errs, field.Invalid(fldPath.Child("parallelism"), *s.Parallelism, fmt.Sprintf("must be less than or equal to %d when completion mode is %s", maxParallelismForIndexedJob, batchv1.IndexedCompletion)))
	}
	if s.Completions != nil && s.MaxFailedIndexes != nil && *s.MaxFailedIndexes > *s.Completions {
		errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *s.MaxFailedIndexes, "must be less than or equal to completions"))
	}
	if s.MaxFailedIndexes != nil && *s.MaxFailedIndexes > maxFailedIndexesForIndexedJob {
		errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *s.MaxFailedIndexes, fmt.Sprintf("must be less than or equal to %d", maxFailedIndexesForIndexedJob)))
	}
	if s.Completions != nil && *s.Completions > completionsSoftLimit && s.BackoffLimitPerIndex != nil {
		if s.MaxFailedIndexes == nil {
			errs = append(errs, field.Required(fldPath.Child("maxFailedIndexes"), fmt.Sprintf("must be specified when completions is above %d", completionsSoftLimit)))
		}
		if s.Parallelism != nil && *s.Parallelism > parallelismLimitForHighCompletions {
			errs = append(errs, field.Invalid(fldPath.Child("parallelism"), *s.Parallelism, fmt.Sprintf("must be less than or equal to %d when completions are above %d and used with backoff limit per index", parallelismLimitForHighCompletions, completionsSoftLimit)))
		}
		if s.MaxFailedIndexes != nil && *s.MaxFailedIndexes > maxFailedIndexesLimitForHighCompletions {
			errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *s.MaxFailedIndexes, fmt.Sprintf("must be less than or equal to %d when completions are above %d and used with backoff limit per index", maxFailedIndexesLimitForHighCompletions, completionsSoftLimit)))
		}
	}
	return errs
}

func validatePodReplacementPolicy(s *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	if s.PodReplacementPolicy == nil {
		return nil
	}
	p := *s.PodReplacementPolicy
	if s.PodFailurePolicy != nil {
		if p != batchv1.Failed {
			return field.ErrorList{field.NotSupported(fldPath, p, []batchv1.PodReplacementPolicy{batchv1.Failed})}
		}
		return nil
	}
	if p != batchv1.Failed && p != batchv1.TerminatingOrFailed {
		return field.ErrorList{field.NotSupported(fldPath, p, []batchv1.PodReplacementPolicy{batchv1.Failed, batchv1.TerminatingOrFailed})}
	}
	return nil
}

var (
	podFailurePolicyActions = []batchv1.PodFailurePolicyAction{
		batchv1.PodFailurePolicyActionCount, batchv1.PodFailurePolicyActionFailIndex,
		batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionIgnore,
	}
	exitCodesOperators = []batchv1.PodFailurePolicyOnExitCodesOperator{batchv1.PodFailurePolicyOnExitCodesOpIn, batchv1.PodFailurePolicyOnExitCodesOpNotIn}
	conditionStatuses  = []v1.ConditionStatus{v1.ConditionFalse, v1.ConditionTrue, v1.ConditionUnknown}
)

func validatePodFailurePolicy(s *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	rulesPath := fldPath.Child("rules")
	rules := s.PodFailurePolicy.Rules
	if len(rules) > maxPodFailurePolicyRules {
		errs = append(errs, field.TooMany(rulesPath, len(rules), maxPodFailurePolicyRules))
	}
	containers := map[string]bool{}
	for _, c := range s.Template.Spec.Containers {
		containers[c.Name] = true
	}
	for _, c := range s.Template.Spec.InitContainers {
		containers[c.Name] = true
	}
	for i := range rules {
		errs = append(errs, validatePodFailurePolicyRule(s, &rules[i], rulesPath.Index(i), containers)...)
	}
	return errs
}

func validatePodFailurePolicyRule(s *batchv1.JobSpec, r *batchv1.PodFailurePolicyRule, p *field.Path, containers map[string]bool) field.ErrorList {
	var errs field.ErrorList
	actionPath := p.Child("action")
	switch {
	case r.Action == "":
		errs = append(errs, field.Required(actionPath, fmt.Sprintf("valid values: %q", podFailurePolicyActions)))
	case r.Action == batchv1.PodFailurePolicyActionFailIndex:
		if s.BackoffLimitPerIndex == nil {
			errs = append(errs, field.Invalid(actionPath, r.Action, "requires the backoffLimitPerIndex to be set"))
		}
	case !slices.Contains(podFailurePolicyActions, r.Action):
		errs = append(errs, field.NotSupported(actionPath, r.Action, podFailurePolicyActions))
	}
	if ec := r.OnExitCodes; ec != nil {
		ecPath := p.Child("onExitCodes")
		opPath := ecPath.Child("operator")
		if ec.Operator == "" {
			errs = append(errs, field.Required(opPath, fmt.Sprintf("valid values: %q", exitCodesOperators)))
		} else if !slices.Contains(exitCodesOperators, ec.Operator) {
			errs = append(errs, field.NotSupported(opPath, ec.Operator, exitCodesOperators))
		}
		if ec.ContainerName != nil && !containers[*ec.ContainerName] {
			errs = append(errs, field.Invalid(ecPath.Child("containerName"), *ec.ContainerName, "must be one of the container or initContainer names in the pod template"))
		}
		valuesPath := ecPath.Child("values")
		if len(ec.Values) == 0 {
			errs = append(errs, field.Invalid(valuesPath, ec.Values, "at least one value is required"))
		} else if len(ec.Values) > maxPodFailurePolicyOnExitCodesValues {
			errs = append(errs, field.TooMany(valuesPath, len(ec.Values), maxPodFailurePolicyOnExitCodesValues))
		}
		seen := map[int32]bool{}
		ordered := true
		for j, v := range ec.Values {
			if ec.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && v == 0 {
				errs = append(errs, field.Invalid(valuesPath.Index(j), v, "must not be 0 for the In operator"))
			}
			if seen[v] {
				errs = append(errs, field.Duplicate(valuesPath.Index(j), v))
			}
			seen[v] = true
			if j > 0 && ec.Values[j-1] > v {
				ordered = false
			}
		}
		if !ordered {
			errs = append(errs, field.Invalid(valuesPath, ec.Values, "must be ordered"))
		}
	}
	if n := len(r.OnPodConditions); n > 0 {
		pcPath := p.Child("onPodConditions")
		if n > maxPodFailurePolicyOnPodConditionsPatterns {
			errs = append(errs, field.TooMany(pcPath, n, maxPodFailurePolicyOnPodConditionsPatterns))
		}
		for j, pattern := range r.OnPodConditions {
			pp := pcPath.Index(j)
			for _, msg := range validation.IsQualifiedName(string(pattern.Type)) {
				errs = append(errs, field.Invalid(pp.Child("type"), string(pattern.Type), msg))
			}
			if pattern.Status == "" {
				errs = append(errs, field.Required(pp.Child("status"), fmt.Sprintf("valid values: %q", conditionStatuses)))
			} else if !slices.Contains(conditionStatuses, pattern.Status) {
				errs = append(errs, field.NotSupported(pp.Child("status"), pattern.Status, conditionStatuses))
			}
		}
	}
	if r.OnExitCodes != nil && len(r.OnPodConditions) > 0 {
		errs = append(errs, field.Invalid(p, field.OmitValueType{}, "specifying both OnExitCodes and OnPodConditions is not supported"))
	}
	if r.OnExitCodes == nil && len(r.OnPodConditions) == 0 {
		errs = append(errs, field.Invalid(p, field.OmitValueType{}, "specifying one of OnExitCodes and OnPodConditions is required"))
	}
	return errs
}

func validateSuccessPolicy(s *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	rulesPath := fldPath.Child("rules")
	rules := s.SuccessPolicy.Rules
	if len(rules) == 0 {
		errs = append(errs, field.Required(rulesPath, "at least one rules must be specified when the successPolicy is specified"))
	}
	if len(rules) > maxSuccessPolicyRules {
		errs = append(errs, field.TooMany(rulesPath, len(rules), maxSuccessPolicyRules))
	}
	var completions int32
	if s.Completions != nil {
		completions = *s.Completions
	}
	for i, r := range rules {
		p := rulesPath.Index(i)
		if r.SucceededCount == nil && r.SucceededIndexes == nil {
			errs = append(errs, field.Required(p, "at least one of succeededCount or succeededIndexes must be specified"))
		}
		var total int32
		if r.SucceededIndexes != nil {
			ip := p.Child("succeededIndexes")
			if len(*r.SucceededIndexes) > maxSuccessPolicySucceededIndexesLength {
				errs = append(errs, field.TooLong(ip, *r.SucceededIndexes, maxSuccessPolicySucceededIndexesLength))
			}
			var err error
			if total, err = countIndexes(*r.SucceededIndexes, completions); err != nil {
				errs = append(errs, field.Invalid(ip, *r.SucceededIndexes, fmt.Sprintf("error parsing succeededIndexes: %s", err)))
			}
		}
		if r.SucceededCount != nil {
			cp := p.Child("succeededCount")
			errs = append(errs, nonNegative(*r.SucceededCount, cp)...)
			if *r.SucceededCount > completions {
				errs = append(errs, field.Invalid(cp, *r.SucceededCount, fmt.Sprintf("must be less than or equal to %d (the number of specified completions)", completions)))
			}
			if r.SucceededIndexes != nil && *r.SucceededCount > total {
				errs = append(errs, field.Invalid(cp, *r.SucceededCount, fmt.Sprintf("must be less than or equal to %d (the number of indexes in the specified succeededIndexes field)", total)))
			}
		}
	}
	return errs
}

// countIndexes parses an index set such as "1,3-5,7" whose indexes must be increasing and
// below completions, and returns how many indexes it holds.
func countIndexes(s string, completions int32) (int32, error) {
	if s == "" {
		return 0, nil
	}
	var total int32
	last := int64(-1)
	for _, interval := range strings.Split(s, ",") {
		limits := strings.Split(interval, "-")
		if len(limits) > 2 {
			return 0, fmt.Errorf("the fragment %q violates the requirement that an index interval can have at most two parts separated by '-'", interval)
		}
		var xy [2]int64
		for i, l := range limits {
			v, err := strconv.Atoi(l)
			if err != nil {
				return 0, fmt.Errorf("cannot convert string to integer for index: %q", l)
			}
			if v >= int(completions) {
				return 0, fmt.Errorf("too large index: %q", l)
			}
			xy[i] = int64(v)
		}
		if len(limits) == 1 {
			xy[1] = xy[0]
		} else if xy[0] >= xy[1] {
			return 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", xy[0], xy[1])
		}
		if last >= xy[0] {
			return 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", last, xy[0])
		}
		total += int32(min(xy[1]-xy[0]+1, math.MaxInt32))
		last = xy[1]
	}
	return total, nil
}

// selectorErrors validates a job selector; relaxed label values are allowed only when
// the stored object already had them.
func selectorErrors(s *batchv1.JobSpec, fldPath *field.Path, allowInvalidValues bool) field.ErrorList {
	return metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: allowInvalidValues}, fldPath)
}

// Column definitions shared by the Job and CronJob tables.
var (
	containersColumn = metav1.TableColumnDefinition{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."}
	imagesColumn     = metav1.TableColumnDefinition{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."}
)

// containerCells lays out container names and images comma separated, as kubectl does.
func containerCells(containers []v1.Container) (names, images string) {
	n := make([]string, len(containers))
	im := make([]string, len(containers))
	for i, c := range containers {
		n[i], im[i] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

func uidStrings(uids []types.UID) []string {
	out := make([]string, len(uids))
	for i, u := range uids {
		out[i] = string(u)
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
