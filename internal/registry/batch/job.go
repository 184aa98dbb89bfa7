package batch

import (
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// Labels the server puts on a Job's pod template when it generates the selector; the
// unprefixed ones are kept for compatibility, as Kubernetes does.
const (
	LegacyControllerUIDLabel = "controller-uid"
	LegacyJobNameLabel       = "job-name"
)

// JobResource serves batch/v1 jobs with their status subresource. Unless
// spec.manualSelector is true, creating a Job generates its selector
// (batch.kubernetes.io/controller-uid=<uid>) and labels its pod template with the uid and
// the job name; status.successful is selectable in field selectors.
func JobResource() registry.Resource {
	return registry.Resource{
		GVK:             batchv1.SchemeGroupVersion.WithKind("Job"),
		Plural:          "jobs",
		Singular:        "job",
		Categories:      []string{"all"},
		Namespaced:      true,
		New:             func() runtime.Object { return &batchv1.Job{} },
		NewList:         func() runtime.Object { return &batchv1.JobList{} },
		TrackGeneration: true,
		PrepareForCreate: registry.Hook(func(j *batchv1.Job) {
			j.Status = batchv1.JobStatus{}
			if j.Spec.ManualSelector == nil || !*j.Spec.ManualSelector {
				generateSelector(j)
			}
		}),
		Default: registry.Hook(func(j *batchv1.Job) {
			DefaultJob(j)
		}),
		Validate: registry.Func(func(j *batchv1.Job) field.ErrorList {
			return validateJob(j, jobOptions{requirePrefixedLabels: true})
		}),
		ValidateUpdate: registry.FuncUpdate(func(j, o *batchv1.Job) field.ErrorList {
			opts := updateOptions(o)
			errs := validateJob(j, opts)
			return append(errs, validateJobSpecUpdate(&j.Spec, &o.Spec, field.NewPath("spec"), opts)...)
		}),
		Warnings: registry.FuncUpdate(func(j, old *batchv1.Job) []string {
			if old != nil {
				return nil
			}
			return nameWarnings(j.Name)
		}),
		Status: &registry.StatusStrategy{
			ValidateUpdate: registry.FuncUpdate(func(j, _ *batchv1.Job) field.ErrorList {
				return validateJobStatus(&j.Status, field.NewPath("status"))
			}),
		},
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Status", Type: "string", Description: "Status of the job."},
			{Name: "Completions", Type: "string", Description: batchv1.JobStatus{}.SwaggerDoc()["succeeded"]},
			{Name: "Duration", Type: "string", Description: "Time required to complete the job."},
			registry.AgeColumn,
			containersColumn,
			imagesColumn,
			{Name: "Selector", Type: "string", Priority: 1, Description: batchv1.JobSpec{}.SwaggerDoc()["selector"]},
		},
		Row: registry.FuncWith(func(j *batchv1.Job, now time.Time) []interface{} {
			names, images := containerCells(j.Spec.Template.Spec.Containers)
			return []interface{}{
				j.Name, jobStatusCell(j), completionsCell(j), durationCell(j, now),
				registry.HumanAge(j.CreationTimestamp, now),
				names, images, metav1.FormatLabelSelector(j.Spec.Selector),
			}
		}),
		Fields: registry.Func(func(j *batchv1.Job) fields.Set {
			return fields.Set{"status.successful": strconv.Itoa(int(j.Status.Succeeded))}
		}),
	}
}

// DefaultJob applies batch/v1's Job defaults: parallelism and completions 1 when both are
// unset (parallelism 1 when only it is), backoffLimit 6 (MaxInt32 with a per-index limit),
// the job's labels from its template when it has none, completionMode NonIndexed, suspend
// false, podReplacementPolicy TerminatingOrFailed (Failed with a pod failure policy),
// manualSelector false, and the pod template's defaults.
func DefaultJob(j *batchv1.Job) {
	s := &j.Spec
	if s.Completions == nil && s.Parallelism == nil {
		s.Completions = ptrTo[int32](1)
		s.Parallelism = ptrTo[int32](1)
	}
	if s.Parallelism == nil {
		s.Parallelism = ptrTo[int32](1)
	}
	if s.BackoffLimit == nil {
		if s.BackoffLimitPerIndex != nil {
			s.BackoffLimit = ptrTo[int32](1<<31 - 1)
		} else {
			s.BackoffLimit = ptrTo[int32](6)
		}
	}
	if s.Template.Labels != nil && len(j.Labels) == 0 {
		j.Labels = make(map[string]string, len(s.Template.Labels))
		for k, v := range s.Template.Labels {
			j.Labels[k] = v
		}
	}
	if s.CompletionMode == nil {
		s.CompletionMode = ptrTo(batchv1.NonIndexedCompletion)
	}
	if s.Suspend == nil {
		s.Suspend = ptrTo(false)
	}
	if s.PodReplacementPolicy == nil {
		if s.PodFailurePolicy != nil {
			s.PodReplacementPolicy = ptrTo(batchv1.Failed)
		} else {
			s.PodReplacementPolicy = ptrTo(batchv1.TerminatingOrFailed)
		}
	}
	if s.ManualSelector == nil {
		s.ManualSelector = ptrTo(false)
	}
	defaultJobSpecTemplate(s)
}

// generateSelector labels the template with the job's uid and name (keeping labels the
// user set, which validation then checks) and selects the uid label.
func generateSelector(j *batchv1.Job) {
	t := &j.Spec.Template
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	for _, k := range []string{LegacyJobNameLabel, batchv1.JobNameLabel} {
		if _, found := t.Labels[k]; !found {
			t.Labels[k] = j.Name
		}
	}
	for _, k := range []string{LegacyControllerUIDLabel, batchv1.ControllerUidLabel} {
		if _, found := t.Labels[k]; !found {
			t.Labels[k] = string(j.UID)
		}
	}
	if j.Spec.Selector == nil {
		j.Spec.Selector = &metav1.LabelSelector{}
	}
	if j.Spec.Selector.MatchLabels == nil {
		j.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, found := j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel]; !found {
		j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] = string(j.UID)
	}
}

// jobOptions are the switches Kubernetes' job strategy derives from the stored object.
type jobOptions struct {
	// requirePrefixedLabels checks the batch.kubernetes.io/ labels too (always on create).
	requirePrefixedLabels bool
	// allowInvalidSelectorValues keeps accepting a stored selector with relaxed values.
	allowInvalidSelectorValues bool
	// allowMutableSchedulingDirectives lets a suspended, never started job change its
	// template's node affinity, node selector, tolerations, labels, annotations and
	// scheduling gates.
	allowMutableSchedulingDirectives bool
}

func updateOptions(old *batchv1.Job) jobOptions {
	_, hadName := old.Spec.Template.Labels[batchv1.JobNameLabel]
	_, hadUID := old.Spec.Template.Labels[batchv1.ControllerUidLabel]
	return jobOptions{
		requirePrefixedLabels:            hadName && hadUID,
		allowInvalidSelectorValues:       metav1validation.LabelSelectorHasInvalidLabelValue(old.Spec.Selector),
		allowMutableSchedulingDirectives: old.Spec.Suspend != nil && *old.Spec.Suspend && old.Status.StartTime == nil,
	}
}

func validateJob(j *batchv1.Job, opts jobOptions) field.ErrorList {
	errs := validateGeneratedSelector(j, opts.requirePrefixedLabels)
	errs = append(errs, validateJobSpec(&j.Spec, field.NewPath("spec"), opts)...)
	if isIndexed(&j.Spec) && j.Spec.Completions != nil && *j.Spec.Completions > 0 {
		// Indexed pods get "-<index>" hostnames; the largest must still be a DNS label.
		host := fmt.Sprintf("%s-%d", j.Name, *j.Spec.Completions-1)
		if len(validation.IsDNS1123Label(host)) > 0 {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), j.Name, fmt.Sprintf("will not able to create pod with invalid DNS label: %s", host)))
		}
	}
	return errs
}

// validateGeneratedSelector checks, for a generated selector, that the uid is set, that the
// template carries the generated labels and that the selector selects them.
func validateGeneratedSelector(j *batchv1.Job, prefixed bool) field.ErrorList {
	if (j.Spec.ManualSelector != nil && *j.Spec.ManualSelector) || j.Spec.Selector == nil {
		return nil
	}
	var errs field.ErrorList
	if j.UID == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "uid"), ""))
	}
	metaPath := field.NewPath("spec", "template", "metadata")
	expected := map[string]string{LegacyControllerUIDLabel: string(j.UID), LegacyJobNameLabel: j.Name}
	keys := []string{LegacyControllerUIDLabel, LegacyJobNameLabel}
	if prefixed {
		expected[batchv1.ControllerUidLabel] = string(j.UID)
		expected[batchv1.JobNameLabel] = j.Name
		keys = append(keys, batchv1.ControllerUidLabel, batchv1.JobNameLabel)
	}
	for _, k := range keys {
		errs = append(errs, hasLabel(j.Spec.Template.ObjectMeta, metaPath, k, expected[k])...)
	}
	if sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector); err == nil && !sel.Matches(labels.Set(expected)) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "selector"), j.Spec.Selector, "`selector` not auto-generated"))
	}
	return errs
}

// hasLabel is Kubernetes' ValidateHasLabel.
func hasLabel(m metav1.ObjectMeta, fldPath *field.Path, key, want string) field.ErrorList {
	got, ok := m.Labels[key]
	if !ok {
		return field.ErrorList{field.Required(fldPath.Child("labels").Key(key), want)}
	}
	if got != want {
		return field.ErrorList{field.Invalid(fldPath.Child("labels").Key(key), m.Labels, fmt.Sprintf("must be '%s'", want))}
	}
	return nil
}

func validateJobSpec(s *batchv1.JobSpec, fldPath *field.Path, opts jobOptions) field.ErrorList {
	errs := validateJobSpecCommon(s, fldPath)
	if s.Selector == nil {
		errs = append(errs, field.Required(fldPath.Child("selector"), ""))
	} else {
		errs = append(errs, selectorErrors(s, fldPath.Child("selector"), opts.allowInvalidSelectorValues)...)
	}
	if sel, err := metav1.LabelSelectorAsSelector(s.Selector); err == nil && !sel.Matches(labels.Set(s.Template.Labels)) {
		errs = append(errs, field.Invalid(fldPath.Child("template", "metadata", "labels"), s.Template.Labels, "`selector` does not match template `labels`"))
	}
	return errs
}

func validateJobSpecUpdate(s, old *batchv1.JobSpec, fldPath *field.Path, opts jobOptions) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateCompletionsUpdate(s, old, fldPath.Child("completions"))...)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(s.Selector, old.Selector, fldPath.Child("selector"))...)
	errs = append(errs, validateTemplateUpdate(s, old, fldPath, opts)...)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(s.CompletionMode, old.CompletionMode, fldPath.Child("completionMode"))...)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(s.PodFailurePolicy, old.PodFailurePolicy, fldPath.Child("podFailurePolicy"))...)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(s.BackoffLimitPerIndex, old.BackoffLimitPerIndex, fldPath.Child("backoffLimitPerIndex"))...)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(s.ManagedBy, old.ManagedBy, fldPath.Child("managedBy"))...)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(s.SuccessPolicy, old.SuccessPolicy, fldPath.Child("successPolicy"))...)
	return errs
}

// validateCompletionsUpdate keeps completions fixed, except that an Indexed job may scale
// completions together with parallelism (elastic indexed jobs).
func validateCompletionsUpdate(s, old *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	if !isIndexed(s) {
		return apimachineryvalidation.ValidateImmutableField(s.Completions, old.Completions, fldPath)
	}
	if apiequality.Semantic.DeepEqual(s.Completions, old.Completions) || s.Completions == nil {
		return nil
	}
	if s.Parallelism == nil || *s.Completions != *s.Parallelism {
		return field.ErrorList{field.Invalid(fldPath, s.Completions, "can only be modified in tandem with spec.parallelism")}
	}
	return nil
}

// validateTemplateUpdate refuses template changes, except the scheduling directives of a
// suspended job that never started.
func validateTemplateUpdate(s, old *batchv1.JobSpec, fldPath *field.Path, opts jobOptions) field.ErrorList {
	oldTemplate := &old.Template
	if opts.allowMutableSchedulingDirectives {
		oldTemplate = old.Template.DeepCopy()
		t := &s.Template
		switch {
		case t.Spec.Affinity == nil && oldTemplate.Spec.Affinity != nil:
			// Clearing is allowed when node affinity was the only directive.
			oldTemplate.Spec.Affinity.NodeAffinity = nil
			if apiequality.Semantic.DeepEqual(*oldTemplate.Spec.Affinity, v1.Affinity{}) {
				oldTemplate.Spec.Affinity = nil
			}
		case t.Spec.Affinity != nil && oldTemplate.Spec.Affinity == nil:
			oldTemplate.Spec.Affinity = &v1.Affinity{NodeAffinity: t.Spec.Affinity.NodeAffinity}
		case t.Spec.Affinity != nil && oldTemplate.Spec.Affinity != nil:
			oldTemplate.Spec.Affinity.NodeAffinity = t.Spec.Affinity.NodeAffinity
		}
		oldTemplate.Spec.NodeSelector = t.Spec.NodeSelector
		oldTemplate.Spec.Tolerations = t.Spec.Tolerations
		oldTemplate.Annotations = t.Annotations
		oldTemplate.Labels = t.Labels
		oldTemplate.Spec.SchedulingGates = t.Spec.SchedulingGates
	}
	return apimachineryvalidation.ValidateImmutableField(&s.Template, oldTemplate, fldPath.Child("template"))
}

func validateJobStatus(s *batchv1.JobStatus, fldPath *field.Path) field.ErrorList {
	errs := nonNegative(s.Active, fldPath.Child("active"))
	errs = append(errs, nonNegative(s.Succeeded, fldPath.Child("succeeded"))...)
	errs = append(errs, nonNegative(s.Failed, fldPath.Child("failed"))...)
	errs = append(errs, nonNegativePtr(s.Ready, fldPath.Child("ready"))...)
	errs = append(errs, nonNegativePtr(s.Terminating, fldPath.Child("terminating"))...)
	if u := s.UncountedTerminatedPods; u != nil {
		p := fldPath.Child("uncountedTerminatedPods")
		seen := map[string]bool{}
		for _, list := range []struct {
			name string
			uids []string
		}{{"succeeded", uidStrings(u.Succeeded)}, {"failed", uidStrings(u.Failed)}} {
			for i, uid := range list.uids {
				ip := p.Child(list.name).Index(i)
				switch {
				case uid == "":
					errs = append(errs, field.Invalid(ip, uid, "must not be empty"))
				case seen[uid]:
					errs = append(errs, field.Duplicate(ip, uid))
				default:
					seen[uid] = true
				}
			}
		}
	}
	return errs
}

// jobStatusCell is the STATUS column: the terminal condition, then Terminating, Suspended
// and FailureTarget, else Running.
func jobStatusCell(j *batchv1.Job) string {
	switch {
	case hasJobCondition(j.Status.Conditions, batchv1.JobComplete):
		return "Complete"
	case hasJobCondition(j.Status.Conditions, batchv1.JobFailed):
		return "Failed"
	case j.DeletionTimestamp != nil:
		return "Terminating"
	case hasJobCondition(j.Status.Conditions, batchv1.JobSuspended):
		return "Suspended"
	case hasJobCondition(j.Status.Conditions, batchv1.JobFailureTarget):
		return "FailureTarget"
	}
	return "Running"
}

// hasJobCondition reports whether the first condition of type t is True.
func hasJobCondition(conds []batchv1.JobCondition, t batchv1.JobConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// completionsCell is "succeeded/completions", or for a work-queue job "succeeded/1" with
// " of <parallelism>" when more than one pod runs at once.
func completionsCell(j *batchv1.Job) string {
	if j.Spec.Completions != nil {
		return fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
	}
	if j.Spec.Parallelism != nil && *j.Spec.Parallelism > 1 {
		return fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, *j.Spec.Parallelism)
	}
	return fmt.Sprintf("%d/1", j.Status.Succeeded)
}

// durationCell is empty before the job starts, the running time until it completes, then
// the time it took.
func durationCell(j *batchv1.Job, now time.Time) string {
	switch {
	case j.Status.StartTime == nil:
		return ""
	case j.Status.CompletionTime == nil:
		return registry.HumanDuration(now.Sub(j.Status.StartTime.Time))
	}
	return registry.HumanDuration(j.Status.CompletionTime.Sub(j.Status.StartTime.Time))
}

// nameWarnings recommends a DNS label name, since the name becomes part of pod names and
// hostnames.
func nameWarnings(name string) []string {
	if msgs := validation.IsDNS1123Label(name); len(msgs) != 0 {
		return []string{fmt.Sprintf("metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: %v", msgs)}
	}
	return nil
}
