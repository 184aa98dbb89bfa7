package batch

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	batchv1beta1 "k8s.io/api/batch/v1beta1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// maxCronJobNameLength leaves room for the 11-character "-<timestamp>" suffix of the Jobs a
// CronJob creates, whose names must stay within 63 characters.
const maxCronJobNameLength = validation.DNS1035LabelMaxLength - 11

// CronJobResource serves batch/v1 cronjobs with their status subresource.
func CronJobResource() registry.Resource {
	return registry.Resource{
		GVK:             batchv1.SchemeGroupVersion.WithKind("CronJob"),
		Plural:          "cronjobs",
		Singular:        "cronjob",
		ShortNames:      []string{"cj"},
		Categories:      []string{"all"},
		Namespaced:      true,
		New:             func() runtime.Object { return &batchv1.CronJob{} },
		NewList:         func() runtime.Object { return &batchv1.CronJobList{} },
		TrackGeneration: true,
		PrepareForCreate: registry.Hook(func(c *batchv1.CronJob) {
			c.Status = batchv1.CronJobStatus{}
		}),
		Default: registry.Hook(func(c *batchv1.CronJob) {
			DefaultCronJob(c)
		}),
		Validate: registry.Func(func(c *batchv1.CronJob) field.ErrorList {
			errs := validateCronJobSpec(&c.Spec, nil, field.NewPath("spec"))
			if len(c.Name) > maxCronJobNameLength {
				errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), c.Name, fmt.Sprintf("must be no more than %d characters", maxCronJobNameLength)))
			}
			return errs
		}),
		ValidateUpdate: registry.FuncUpdate(func(c, o *batchv1.CronJob) field.ErrorList {
			// The name length limit is not rechecked, so older long-named CronJobs stay editable.
			return validateCronJobSpec(&c.Spec, &o.Spec, field.NewPath("spec"))
		}),
		Warnings: registry.FuncUpdate(func(c, old *batchv1.CronJob) []string {
			if old != nil {
				return nil
			}
			return nameWarnings(c.Name)
		}),
		Status: &registry.StatusStrategy{},
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Schedule", Type: "string", Description: batchv1beta1.CronJobSpec{}.SwaggerDoc()["schedule"]},
			{Name: "Timezone", Type: "string", Description: batchv1beta1.CronJobSpec{}.SwaggerDoc()["timeZone"]},
			{Name: "Suspend", Type: "boolean", Description: batchv1beta1.CronJobSpec{}.SwaggerDoc()["suspend"]},
			{Name: "Active", Type: "integer", Description: batchv1beta1.CronJobStatus{}.SwaggerDoc()["active"]},
			{Name: "Last Schedule", Type: "string", Description: batchv1beta1.CronJobStatus{}.SwaggerDoc()["lastScheduleTime"]},
			registry.AgeColumn,
			containersColumn,
			imagesColumn,
			{Name: "Selector", Type: "string", Priority: 1, Description: batchv1.JobSpec{}.SwaggerDoc()["selector"]},
		},
		Row: registry.FuncWith(func(c *batchv1.CronJob, now time.Time) []interface{} {
			last := "<none>"
			if c.Status.LastScheduleTime != nil {
				last = registry.HumanAge(*c.Status.LastScheduleTime, now)
			}
			tz := "<none>"
			if c.Spec.TimeZone != nil {
				tz = *c.Spec.TimeZone
			}
			// The printer shows suspend as text ("True", "False", "<unset>") despite the
			// column's boolean type.
			suspend := "<unset>"
			if c.Spec.Suspend != nil {
				suspend = map[bool]string{true: "True", false: "False"}[*c.Spec.Suspend]
			}
			names, images := containerCells(c.Spec.JobTemplate.Spec.Template.Spec.Containers)
			return []interface{}{
				c.Name, c.Spec.Schedule, tz, suspend, int64(len(c.Status.Active)), last,
				registry.HumanAge(c.CreationTimestamp, now),
				names, images, metav1.FormatLabelSelector(c.Spec.JobTemplate.Spec.Selector),
			}
		}),
	}
}

// DefaultCronJob applies batch/v1's CronJob defaults: concurrencyPolicy Allow, suspend
// false, three successful and one failed job kept, and the job template's pod defaults
// (the job spec defaults apply when the controller creates the Job).
func DefaultCronJob(c *batchv1.CronJob) {
	s := &c.Spec
	if s.ConcurrencyPolicy == "" {
		s.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if s.Suspend == nil {
		s.Suspend = ptrTo(false)
	}
	if s.SuccessfulJobsHistoryLimit == nil {
		s.SuccessfulJobsHistoryLimit = ptrTo[int32](3)
	}
	if s.FailedJobsHistoryLimit == nil {
		s.FailedJobsHistoryLimit = ptrTo[int32](1)
	}
	defaultJobSpecTemplate(&s.JobTemplate.Spec)
}

// validateCronJobSpec checks a CronJob spec; old is nil on create. A TZ prefix already in
// the stored schedule stays accepted, and timeZone is rechecked only when it changes.
func validateCronJobSpec(s, old *batchv1.CronJobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Schedule == "" {
		errs = append(errs, field.Required(fldPath.Child("schedule"), ""))
	} else {
		allowTZ := old != nil && strings.Contains(old.Schedule, "TZ")
		errs = append(errs, validateSchedule(s.Schedule, allowTZ, s.TimeZone, fldPath.Child("schedule"))...)
	}
	if s.StartingDeadlineSeconds != nil {
		errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(*s.StartingDeadlineSeconds, fldPath.Child("startingDeadlineSeconds"))...)
	}
	if old == nil || !equalStringPtr(old.TimeZone, s.TimeZone) {
		errs = append(errs, validateTimeZone(s.TimeZone, fldPath.Child("timeZone"))...)
	}
	switch p := fldPath.Child("concurrencyPolicy"); s.ConcurrencyPolicy {
	case batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	case "":
		errs = append(errs, field.Required(p, ""))
	default:
		errs = append(errs, field.NotSupported(p, s.ConcurrencyPolicy, []batchv1.ConcurrencyPolicy{batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent}))
	}
	errs = append(errs, validateJobTemplateSpec(&s.JobTemplate, fldPath.Child("jobTemplate"))...)
	errs = append(errs, nonNegativePtr(s.SuccessfulJobsHistoryLimit, fldPath.Child("successfulJobsHistoryLimit"))...)
	errs = append(errs, nonNegativePtr(s.FailedJobsHistoryLimit, fldPath.Child("failedJobsHistoryLimit"))...)
	return errs
}

func validateSchedule(schedule string, allowTZ bool, timeZone *string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, err := ParseSchedule(schedule); err != nil {
		errs = append(errs, field.Invalid(fldPath, schedule, err.Error()))
	}
	switch hasTZ := strings.Contains(schedule, "TZ"); {
	case allowTZ && hasTZ && timeZone != nil:
		errs = append(errs, field.Invalid(fldPath, schedule, "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
	case !allowTZ && hasTZ:
		errs = append(errs, field.Invalid(fldPath, schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
	}
	return errs
}

// validTimeZonePart follows the IANA naming rules, tolerating digits and '+' for legacy
// names.
var validTimeZonePart = regexp.MustCompile(`^[A-Za-z\.\-_0-9+]{1,14}$`)

func validateTimeZone(tz *string, fldPath *field.Path) field.ErrorList {
	if tz == nil {
		return nil
	}
	if *tz == "" {
		return field.ErrorList{field.Invalid(fldPath, tz, "timeZone must be nil or non-empty string")}
	}
	for _, part := range strings.Split(*tz, "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, "-") || !validTimeZonePart.MatchString(part) {
			return field.ErrorList{field.Invalid(fldPath, tz, fmt.Sprintf("unknown time zone %s", *tz))}
		}
	}
	var errs field.ErrorList
	if strings.EqualFold(*tz, "Local") {
		errs = append(errs, field.Invalid(fldPath, tz, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"))
	}
	if _, err := time.LoadLocation(*tz); err != nil {
		errs = append(errs, field.Invalid(fldPath, tz, err.Error()))
	}
	return errs
}

// validateJobTemplateSpec validates a CronJob's job template like a Job spec, except that
// the selector is generated when each Job is created and so may not be set.
func validateJobTemplateSpec(t *batchv1.JobTemplateSpec, fldPath *field.Path) field.ErrorList {
	specPath := fldPath.Child("spec")
	errs := validateJobSpecCommon(&t.Spec, specPath)
	if t.Spec.Selector != nil {
		errs = append(errs, field.Invalid(specPath.Child("selector"), t.Spec.Selector, "`selector` will be auto-generated"))
	}
	if t.Spec.ManualSelector != nil && *t.Spec.ManualSelector {
		errs = append(errs, field.NotSupported(specPath.Child("manualSelector"), t.Spec.ManualSelector, []string{"nil", "false"}))
	}
	return errs
}

func equalStringPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
