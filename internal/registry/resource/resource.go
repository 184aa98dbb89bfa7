// Package resource serves the resource.k8s.io/v1 dynamic resource allocation kinds
// (DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice, DeviceTaintRule)
// as API objects. tranche allocates no devices: nothing schedules by them and no node
// prepares them. Validation covers the structure kube-apiserver checks (names, the
// one-of choices, counts, immutability); CEL selectors are stored without being
// compiled.
package resource

import (
	"fmt"
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/registry/storage"
)

// DeviceClassResource serves deviceclasses: cluster-scoped, generation tracked, each
// selector a CEL expression, each config naming its driver; the NAME AGE table.
func DeviceClassResource() registry.Resource {
	return registry.Strategy[*resourcev1.DeviceClass]{
		Validate: validateDeviceClass,
		ValidateUpdate: func(c, _ *resourcev1.DeviceClass) field.ErrorList {
			return validateDeviceClass(c)
		},
	}.Apply(registry.Resource{
		GVK:             resourcev1.SchemeGroupVersion.WithKind("DeviceClass"),
		Plural:          "deviceclasses",
		Singular:        "deviceclass",
		New:             func() runtime.Object { return &resourcev1.DeviceClass{} },
		NewList:         func() runtime.Object { return &resourcev1.DeviceClassList{} },
		TrackGeneration: true,
	})
}

func validateDeviceClass(c *resourcev1.DeviceClass) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateSelectors(c.Spec.Selectors, spec.Child("selectors"))
	for i, cfg := range c.Spec.Config {
		errs = append(errs, validateOpaque(cfg.Opaque, spec.Child("config").Index(i))...)
	}
	return errs
}

func validateSelectors(selectors []resourcev1.DeviceSelector, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range selectors {
		p := fldPath.Index(i)
		if s.CEL == nil {
			errs = append(errs, field.Required(p.Child("cel"), ""))
		} else if strings.TrimSpace(s.CEL.Expression) == "" {
			errs = append(errs, field.Required(p.Child("cel", "expression"), ""))
		}
	}
	return errs
}

func validateOpaque(o *resourcev1.OpaqueDeviceConfiguration, fldPath *field.Path) field.ErrorList {
	if o == nil {
		return field.ErrorList{field.Required(fldPath.Child("opaque"), "")}
	}
	errs := storage.ValidateCSIDriverName(o.Driver, fldPath.Child("opaque", "driver"))
	if len(o.Parameters.Raw) == 0 {
		errs = append(errs, field.Required(fldPath.Child("opaque", "parameters"), ""))
	}
	return errs
}

// DefaultExactRequest sets allocationMode ExactCount and count 1 when unset, as
// resource/v1's defaults do.
func defaultRequests(spec *resourcev1.ResourceClaimSpec) {
	for i := range spec.Devices.Requests {
		r := &spec.Devices.Requests[i]
		if r.Exactly != nil {
			defaultMode(&r.Exactly.AllocationMode, &r.Exactly.Count)
			defaultTolerations(r.Exactly.Tolerations)
		}
		for j := range r.FirstAvailable {
			defaultMode(&r.FirstAvailable[j].AllocationMode, &r.FirstAvailable[j].Count)
			defaultTolerations(r.FirstAvailable[j].Tolerations)
		}
	}
}

func defaultMode(mode *resourcev1.DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = resourcev1.DeviceAllocationModeExactCount
	}
	if *mode == resourcev1.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}

func defaultTolerations(ts []resourcev1.DeviceToleration) {
	for i := range ts {
		if ts[i].Operator == "" {
			ts[i].Operator = resourcev1.DeviceTolerationOpEqual
		}
	}
}

// validateClaimSpec checks the requests of a claim: each named by a unique DNS label,
// with exactly one of exactly and firstAvailable, naming a device class and asking
// for a positive count or all devices.
func validateClaimSpec(spec *resourcev1.ResourceClaimSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	reqPath := fldPath.Child("devices", "requests")
	for i, r := range spec.Devices.Requests {
		p := reqPath.Index(i)
		errs = append(errs, validateRequestName(r.Name, p.Child("name"))...)
		if names.Has(r.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), r.Name))
		}
		names.Insert(r.Name)
		switch {
		case r.Exactly == nil && len(r.FirstAvailable) == 0:
			errs = append(errs, field.Required(p, "exactly one of `exactly` or `firstAvailable` is required"))
		case r.Exactly != nil && len(r.FirstAvailable) > 0:
			errs = append(errs, field.Invalid(p, nil, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
		case r.Exactly != nil:
			e := r.Exactly
			errs = append(errs, validateRequest(e.DeviceClassName, e.Selectors, e.AllocationMode, e.Count, p.Child("exactly"))...)
		default:
			subNames := sets.New[string]()
			for j, s := range r.FirstAvailable {
				sp := p.Child("firstAvailable").Index(j)
				errs = append(errs, validateRequestName(s.Name, sp.Child("name"))...)
				if subNames.Has(s.Name) {
					errs = append(errs, field.Duplicate(sp.Child("name"), s.Name))
				}
				subNames.Insert(s.Name)
				errs = append(errs, validateRequest(s.DeviceClassName, s.Selectors, s.AllocationMode, s.Count, sp)...)
			}
		}
	}
	for i, cfg := range spec.Devices.Config {
		errs = append(errs, validateOpaque(cfg.Opaque, fldPath.Child("devices", "config").Index(i))...)
	}
	return errs
}

func validateRequestName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

func validateRequest(class string, selectors []resourcev1.DeviceSelector, mode resourcev1.DeviceAllocationMode, count int64, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if class == "" {
		errs = append(errs, field.Required(fldPath.Child("deviceClassName"), ""))
	} else {
		for _, msg := range apivalidation.NameIsDNSSubdomain(class, false) {
			errs = append(errs, field.Invalid(fldPath.Child("deviceClassName"), class, msg))
		}
	}
	errs = append(errs, validateSelectors(selectors, fldPath.Child("selectors"))...)
	switch mode {
	case resourcev1.DeviceAllocationModeAll:
		if count != 0 {
			errs = append(errs, field.Invalid(fldPath.Child("count"), count, fmt.Sprintf("must not be specified when allocationMode is '%s'", mode)))
		}
	case resourcev1.DeviceAllocationModeExactCount:
		if count <= 0 {
			errs = append(errs, field.Invalid(fldPath.Child("count"), count, "must be greater than zero"))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("allocationMode"), mode,
			[]resourcev1.DeviceAllocationMode{resourcev1.DeviceAllocationModeAll, resourcev1.DeviceAllocationModeExactCount}))
	}
	return errs
}

// ResourceClaimResource serves resourceclaims: namespaced, an immutable spec of device
// requests, a status subresource holding the allocation, and the NAME STATE AGE table.
func ResourceClaimResource() registry.Resource {
	return registry.Strategy[*resourcev1.ResourceClaim]{
		PrepareForCreate: func(c *resourcev1.ResourceClaim) { c.Status = resourcev1.ResourceClaimStatus{} },
		Default:          func(c *resourcev1.ResourceClaim) { defaultRequests(&c.Spec) },
		Validate: func(c *resourcev1.ResourceClaim) field.ErrorList {
			return validateClaimSpec(&c.Spec, field.NewPath("spec"))
		},
		ValidateUpdate: func(c, old *resourcev1.ResourceClaim) field.ErrorList {
			return apivalidation.ValidateImmutableField(c.Spec, old.Spec, field.NewPath("spec"))
		},
		StatusValidateUpdate: func(c, _ *resourcev1.ResourceClaim) field.ErrorList {
			if c.Status.Allocation == nil && len(c.Status.ReservedFor) > 0 {
				return field.ErrorList{field.Forbidden(field.NewPath("status", "reservedFor"), "may not be specified when `allocated` is not set")}
			}
			return nil
		},
		Row: func(c *resourcev1.ResourceClaim, now time.Time) []interface{} {
			return []interface{}{c.Name, claimState(c), registry.HumanAge(c.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:        resourcev1.SchemeGroupVersion.WithKind("ResourceClaim"),
		Plural:     "resourceclaims",
		Singular:   "resourceclaim",
		Namespaced: true,
		New:        func() runtime.Object { return &resourcev1.ResourceClaim{} },
		NewList:    func() runtime.Object { return &resourcev1.ResourceClaimList{} },
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "State", Type: "string", Description: "A summary of the current state (allocated, pending, reserved, etc.)."},
			registry.AgeColumn,
		},
	})
}

func claimState(c *resourcev1.ResourceClaim) string {
	var states []string
	if c.DeletionTimestamp != nil {
		states = append(states, "deleted")
	}
	if c.Status.Allocation == nil {
		if c.DeletionTimestamp == nil {
			states = append(states, "pending")
		}
	} else {
		states = append(states, "allocated")
		if len(c.Status.ReservedFor) > 0 {
			states = append(states, "reserved")
		}
	}
	return strings.Join(states, ",")
}

// ResourceClaimTemplateResource serves resourceclaimtemplates: namespaced, the claim
// spec validated as a claim's and immutable; the NAME AGE table.
func ResourceClaimTemplateResource() registry.Resource {
	return registry.Strategy[*resourcev1.ResourceClaimTemplate]{
		Default: func(t *resourcev1.ResourceClaimTemplate) { defaultRequests(&t.Spec.Spec) },
		Validate: func(t *resourcev1.ResourceClaimTemplate) field.ErrorList {
			p := field.NewPath("spec")
			errs := metav1validation.ValidateLabels(t.Spec.Labels, p.Child("metadata", "labels"))
			errs = append(errs, apivalidation.ValidateAnnotations(t.Spec.Annotations, p.Child("metadata", "annotations"))...)
			return append(errs, validateClaimSpec(&t.Spec.Spec, p.Child("spec"))...)
		},
		ValidateUpdate: func(t, old *resourcev1.ResourceClaimTemplate) field.ErrorList {
			return apivalidation.ValidateImmutableField(t.Spec, old.Spec, field.NewPath("spec"))
		},
	}.Apply(registry.Resource{
		GVK:        resourcev1.SchemeGroupVersion.WithKind("ResourceClaimTemplate"),
		Plural:     "resourceclaimtemplates",
		Singular:   "resourceclaimtemplate",
		Namespaced: true,
		New:        func() runtime.Object { return &resourcev1.ResourceClaimTemplate{} },
		NewList:    func() runtime.Object { return &resourcev1.ResourceClaimTemplateList{} },
	})
}

// ResourceSliceResource serves resourceslices: cluster-scoped, a driver's pool of
// devices on one node, a node selector, all nodes or per device; field selectors
// spec.nodeName, spec.driver and spec.pool.name; the NAME NODE DRIVER POOL AGE table.
func ResourceSliceResource() registry.Resource {
	return registry.Strategy[*resourcev1.ResourceSlice]{
		Validate: validateSlice,
		ValidateUpdate: func(s, old *resourcev1.ResourceSlice) field.ErrorList {
			errs := validateSlice(s)
			spec := field.NewPath("spec")
			errs = append(errs, apivalidation.ValidateImmutableField(s.Spec.NodeName, old.Spec.NodeName, spec.Child("nodeName"))...)
			return append(errs, apivalidation.ValidateImmutableField(s.Spec.Driver, old.Spec.Driver, spec.Child("driver"))...)
		},
		Row: func(s *resourcev1.ResourceSlice, now time.Time) []interface{} {
			node := ""
			if s.Spec.NodeName != nil {
				node = *s.Spec.NodeName
			}
			return []interface{}{s.Name, node, s.Spec.Driver, s.Spec.Pool.Name, registry.HumanAge(s.CreationTimestamp, now)}
		},
		Fields: func(s *resourcev1.ResourceSlice) fields.Set {
			node := ""
			if s.Spec.NodeName != nil {
				node = *s.Spec.NodeName
			}
			return fields.Set{"spec.nodeName": node, "spec.driver": s.Spec.Driver, "spec.pool.name": s.Spec.Pool.Name}
		},
	}.Apply(registry.Resource{
		GVK:             resourcev1.SchemeGroupVersion.WithKind("ResourceSlice"),
		Plural:          "resourceslices",
		Singular:        "resourceslice",
		New:             func() runtime.Object { return &resourcev1.ResourceSlice{} },
		NewList:         func() runtime.Object { return &resourcev1.ResourceSliceList{} },
		TrackGeneration: true,
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Node", Type: "string", Description: resourcev1.ResourceSliceSpec{}.SwaggerDoc()["nodeName"]},
			{Name: "Driver", Type: "string", Description: resourcev1.ResourceSliceSpec{}.SwaggerDoc()["driver"]},
			{Name: "Pool", Type: "string", Description: resourcev1.ResourcePool{}.SwaggerDoc()["name"]},
			registry.AgeColumn,
		},
	})
}

func validateSlice(s *resourcev1.ResourceSlice) field.ErrorList {
	spec := field.NewPath("spec")
	errs := storage.ValidateCSIDriverName(s.Spec.Driver, spec.Child("driver"))
	pool := spec.Child("pool")
	if s.Spec.Pool.Name == "" {
		errs = append(errs, field.Required(pool.Child("name"), ""))
	} else {
		for _, part := range strings.Split(s.Spec.Pool.Name, "/") {
			for _, msg := range validation.IsDNS1123Subdomain(part) {
				errs = append(errs, field.Invalid(pool.Child("name"), s.Spec.Pool.Name, msg))
			}
		}
	}
	if s.Spec.Pool.ResourceSliceCount <= 0 {
		errs = append(errs, field.Invalid(pool.Child("resourceSliceCount"), s.Spec.Pool.ResourceSliceCount, "must be greater than zero"))
	}
	if s.Spec.Pool.Generation < 0 {
		errs = append(errs, field.Invalid(pool.Child("generation"), s.Spec.Pool.Generation, "must be greater than or equal to zero"))
	}
	set := 0
	if n := s.Spec.NodeName; n != nil {
		set++
		if *n == "" {
			errs = append(errs, field.Invalid(spec.Child("nodeName"), "", "must be either unset or set to a non-empty string"))
		} else {
			for _, msg := range apivalidation.NameIsDNSSubdomain(*n, false) {
				errs = append(errs, field.Invalid(spec.Child("nodeName"), *n, msg))
			}
		}
	}
	if ns := s.Spec.NodeSelector; ns != nil {
		set++
		if len(ns.NodeSelectorTerms) != 1 {
			errs = append(errs, field.Invalid(spec.Child("nodeSelector", "nodeSelectorTerms"), ns.NodeSelectorTerms, "must have exactly one node selector term"))
		}
	}
	for _, b := range []struct {
		name string
		v    *bool
	}{{"allNodes", s.Spec.AllNodes}, {"perDeviceNodeSelection", s.Spec.PerDeviceNodeSelection}} {
		if b.v != nil {
			set++
			if !*b.v {
				errs = append(errs, field.Invalid(spec.Child(b.name), *b.v, "must be either unset or set to true"))
			}
		}
	}
	switch {
	case set == 0:
		errs = append(errs, field.Required(spec, "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"))
	case set > 1:
		errs = append(errs, field.Invalid(spec, nil, "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set"))
	}
	names := sets.New[string]()
	for i, d := range s.Spec.Devices {
		p := spec.Child("devices").Index(i).Child("name")
		errs = append(errs, validateRequestName(d.Name, p)...)
		if names.Has(d.Name) {
			errs = append(errs, field.Duplicate(p, d.Name))
		}
		names.Insert(d.Name)
	}
	return errs
}

var supportedTaintEffects = []resourcev1.DeviceTaintEffect{resourcev1.DeviceTaintEffectNoExecute, resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNone}

// DeviceTaintRuleResource serves devicetaintrules: cluster-scoped, generation tracked,
// a taint with a qualified key and a known effect (timeAdded set when created), a
// status subresource with conditions; the NAME KEY VALUE EFFECT TIMEADDED AGE table.
func DeviceTaintRuleResource() registry.Resource {
	return registry.Strategy[*resourcev1.DeviceTaintRule]{
		PrepareForCreate: func(r *resourcev1.DeviceTaintRule) {
			r.Status = resourcev1.DeviceTaintRuleStatus{}
			if r.Spec.Taint.TimeAdded == nil {
				r.Spec.Taint.TimeAdded = new(metav1.Now().Rfc3339Copy())
			}
		},
		PrepareForUpdate: func(r, old *resourcev1.DeviceTaintRule) {
			if r.Spec.Taint.TimeAdded == nil {
				r.Spec.Taint.TimeAdded = old.Spec.Taint.TimeAdded
			}
		},
		Validate:       validateTaintRule,
		ValidateUpdate: func(r, _ *resourcev1.DeviceTaintRule) field.ErrorList { return validateTaintRule(r) },
		StatusValidateUpdate: func(r, _ *resourcev1.DeviceTaintRule) field.ErrorList {
			return metav1validation.ValidateConditions(r.Status.Conditions, field.NewPath("status", "conditions"))
		},
		Row: func(r *resourcev1.DeviceTaintRule, now time.Time) []interface{} {
			added := "<unknown>"
			if r.Spec.Taint.TimeAdded != nil {
				added = registry.HumanAge(*r.Spec.Taint.TimeAdded, now)
			}
			return []interface{}{r.Name, r.Spec.Taint.Key, r.Spec.Taint.Value, string(r.Spec.Taint.Effect), added, registry.HumanAge(r.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:             resourcev1.SchemeGroupVersion.WithKind("DeviceTaintRule"),
		Plural:          "devicetaintrules",
		Singular:        "devicetaintrule",
		New:             func() runtime.Object { return &resourcev1.DeviceTaintRule{} },
		NewList:         func() runtime.Object { return &resourcev1.DeviceTaintRuleList{} },
		TrackGeneration: true,
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Key", Type: "string", Description: resourcev1.DeviceTaint{}.SwaggerDoc()["key"]},
			{Name: "Value", Type: "string", Description: resourcev1.DeviceTaint{}.SwaggerDoc()["value"]},
			{Name: "Effect", Type: "string", Description: resourcev1.DeviceTaint{}.SwaggerDoc()["effect"]},
			{Name: "TimeAdded", Type: "string", Description: resourcev1.DeviceTaint{}.SwaggerDoc()["timeAdded"]},
			registry.AgeColumn,
		},
	})
}

func validateTaintRule(r *resourcev1.DeviceTaintRule) field.ErrorList {
	p := field.NewPath("spec", "taint")
	var errs field.ErrorList
	if r.Spec.Taint.Key == "" {
		errs = append(errs, field.Required(p.Child("key"), ""))
	} else {
		for _, msg := range validation.IsQualifiedName(r.Spec.Taint.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), r.Spec.Taint.Key, msg))
		}
	}
	if v := r.Spec.Taint.Value; v != "" {
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p.Child("value"), v, msg))
		}
	}
	switch e := r.Spec.Taint.Effect; {
	case e == "":
		errs = append(errs, field.Required(p.Child("effect"), ""))
	case !sets.New(supportedTaintEffects...).Has(e):
		errs = append(errs, field.NotSupported(p.Child("effect"), e, supportedTaintEffects))
	}
	return errs
}
