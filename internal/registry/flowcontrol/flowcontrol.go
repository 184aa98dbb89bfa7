// Package flowcontrol serves flowcontrol.apiserver.k8s.io/v1 FlowSchemas and
// PriorityLevelConfigurations: API priority and fairness configuration, stored and
// validated as kube-apiserver does (the mandatory objects' specs fixed), with status
// subresources. tranche does not queue requests by them.
package flowcontrol

import (
	"fmt"
	"slices"
	"strings"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	flowcontrolv1beta3 "k8s.io/api/flowcontrol/v1beta3"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/apiserver/pkg/util/shufflesharding"

	"github.com/tranche/tranche/internal/registry"
)

// v1 defaults (k8s.io/kubernetes/pkg/apis/flowcontrol/v1).
const (
	defaultMatchingPrecedence       int32 = 1000
	defaultHandSize                 int32 = 8
	defaultQueues                   int32 = 64
	defaultQueueLengthLimit         int32 = 50
	defaultNominalConcurrencyShares int32 = 30
	maxQueues                       int32 = 10 * 1000 * 1000
)

var (
	supportedDistinguisherMethods = []string{string(flowcontrolv1.FlowDistinguisherMethodByNamespaceType), string(flowcontrolv1.FlowDistinguisherMethodByUserType)}
	supportedVerbs                = sets.New("get", "list", "create", "update", "delete", "deletecollection", "patch", "watch", "proxy")
	supportedSubjectKinds         = []string{string(flowcontrolv1.SubjectKindGroup), string(flowcontrolv1.SubjectKindServiceAccount), string(flowcontrolv1.SubjectKindUser)}
	supportedPriorityLevelTypes   = []string{string(flowcontrolv1.PriorityLevelEnablementExempt), string(flowcontrolv1.PriorityLevelEnablementLimited)}
	supportedLimitResponseTypes   = []string{string(flowcontrolv1.LimitResponseTypeQueue), string(flowcontrolv1.LimitResponseTypeReject)}
)

// FlowSchemaResource serves flowschemas: cluster-scoped, matchingPrecedence defaulted
// to 1000, generation tracked, a status subresource (the Dangling condition), and the
// NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL table.
func FlowSchemaResource() registry.Resource {
	return registry.Strategy[*flowcontrolv1.FlowSchema]{
		PrepareForCreate: func(fs *flowcontrolv1.FlowSchema) { fs.Status = flowcontrolv1.FlowSchemaStatus{} },
		Default:          DefaultFlowSchema,
		Validate:         ValidateFlowSchema,
		ValidateUpdate:   func(fs, _ *flowcontrolv1.FlowSchema) field.ErrorList { return ValidateFlowSchema(fs) },
		StatusValidateUpdate: func(fs, _ *flowcontrolv1.FlowSchema) field.ErrorList {
			var types []string
			for _, c := range fs.Status.Conditions {
				types = append(types, string(c.Type))
			}
			return validateConditionTypes(types, field.NewPath("status", "conditions"))
		},
		Row: func(fs *flowcontrolv1.FlowSchema, now time.Time) []interface{} {
			method := "<none>"
			if fs.Spec.DistinguisherMethod != nil {
				method = string(fs.Spec.DistinguisherMethod.Type)
			}
			missing := "?"
			for _, c := range fs.Status.Conditions {
				if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
					missing = string(c.Status)
					break
				}
			}
			return []interface{}{fs.Name, fs.Spec.PriorityLevelConfiguration.Name, int64(fs.Spec.MatchingPrecedence), method,
				registry.HumanAge(fs.CreationTimestamp, now), missing}
		},
	}.Apply(registry.Resource{
		GVK:             flowcontrolv1.SchemeGroupVersion.WithKind("FlowSchema"),
		Plural:          "flowschemas",
		Singular:        "flowschema",
		New:             func() runtime.Object { return &flowcontrolv1.FlowSchema{} },
		NewList:         func() runtime.Object { return &flowcontrolv1.FlowSchemaList{} },
		TrackGeneration: true,
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "PriorityLevel", Type: "string", Description: flowcontrolv1.PriorityLevelConfigurationReference{}.SwaggerDoc()["name"]},
			{Name: "MatchingPrecedence", Type: "string", Description: flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["matchingPrecedence"]},
			{Name: "DistinguisherMethod", Type: "string", Description: flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["distinguisherMethod"]},
			registry.AgeColumn,
			{Name: "MissingPL", Type: "string", Description: "references a broken or non-existent PriorityLevelConfiguration"},
		},
	})
}

// DefaultFlowSchema sets matchingPrecedence 1000 when it is 0.
func DefaultFlowSchema(fs *flowcontrolv1.FlowSchema) {
	if fs.Spec.MatchingPrecedence == 0 {
		fs.Spec.MatchingPrecedence = defaultMatchingPrecedence
	}
}

// ValidateFlowSchema is Kubernetes' check of a FlowSchema: its spec, the fixed spec of a
// mandatory schema (exempt, catch-all), and its status.
func ValidateFlowSchema(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateFlowSchemaSpec(fs.Name, &fs.Spec, spec)
	for _, mand := range bootstrap.MandatoryFlowSchemas {
		if mand.Name != fs.Name {
			continue
		}
		want := mand.DeepCopy()
		DefaultFlowSchema(want)
		if !apiequality.Semantic.DeepEqual(fs.Spec, want.Spec) {
			errs = append(errs, field.Invalid(spec, fs.Spec, fmt.Sprintf("spec of '%s' must equal the fixed value", fs.Name)))
		}
	}
	var types []string
	for _, c := range fs.Status.Conditions {
		types = append(types, string(c.Type))
	}
	return append(errs, validateConditionTypes(types, field.NewPath("status", "conditions"))...)
}

func validateFlowSchemaSpec(name string, spec *flowcontrolv1.FlowSchemaSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	mp := fldPath.Child("matchingPrecedence")
	if spec.MatchingPrecedence <= 0 {
		errs = append(errs, field.Invalid(mp, spec.MatchingPrecedence, "must be a positive value"))
	}
	if spec.MatchingPrecedence > flowcontrolv1.FlowSchemaMaxMatchingPrecedence {
		errs = append(errs, field.Invalid(mp, spec.MatchingPrecedence, fmt.Sprintf("must not be greater than %v", flowcontrolv1.FlowSchemaMaxMatchingPrecedence)))
	}
	if spec.MatchingPrecedence == 1 && name != flowcontrolv1.FlowSchemaNameExempt {
		errs = append(errs, field.Invalid(mp, spec.MatchingPrecedence, "only the schema named 'exempt' may have matchingPrecedence 1"))
	}
	if dm := spec.DistinguisherMethod; dm != nil && !slices.Contains(supportedDistinguisherMethods, string(dm.Type)) {
		errs = append(errs, field.NotSupported(fldPath.Child("distinguisherMethod", "type"), dm, supportedDistinguisherMethods))
	}
	plName := fldPath.Child("priorityLevelConfiguration", "name")
	if n := spec.PriorityLevelConfiguration.Name; n != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(n, false) {
			errs = append(errs, field.Invalid(plName, n, msg))
		}
	} else {
		errs = append(errs, field.Required(plName, "must reference a priority level"))
	}
	for i := range spec.Rules {
		errs = append(errs, validateRule(&spec.Rules[i], fldPath.Child("rules").Index(i))...)
	}
	return errs
}

func validateRule(rule *flowcontrolv1.PolicyRulesWithSubjects, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Subjects) == 0 {
		errs = append(errs, field.Required(fldPath.Child("subjects"), "subjects must contain at least one value"))
	}
	for i := range rule.Subjects {
		errs = append(errs, validateSubject(&rule.Subjects[i], fldPath.Child("subjects").Index(i))...)
	}
	if len(rule.ResourceRules) == 0 && len(rule.NonResourceRules) == 0 {
		errs = append(errs, field.Required(fldPath, "at least one of resourceRules and nonResourceRules has to be non-empty"))
	}
	for i, r := range rule.ResourceRules {
		p := fldPath.Child("resourceRules").Index(i)
		errs = append(errs, validateVerbs(r.Verbs, p.Child("verbs"))...)
		if len(r.APIGroups) == 0 {
			errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
		} else if len(r.APIGroups) > 1 && slices.Contains(r.APIGroups, "*") {
			errs = append(errs, field.Invalid(p.Child("apiGroups"), r.APIGroups, "if '*' is present, must not specify other api groups"))
		}
		if len(r.Resources) == 0 {
			errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
		} else if len(r.Resources) > 1 && slices.Contains(r.Resources, "*") {
			errs = append(errs, field.Invalid(p.Child("resources"), r.Resources, "if '*' is present, must not specify other resources"))
		}
		switch {
		case len(r.Namespaces) == 0 && !r.ClusterScope:
			errs = append(errs, field.Required(p.Child("namespaces"), "resource rules that are not cluster scoped must supply at least one namespace"))
		case slices.Contains(r.Namespaces, "*"):
			if len(r.Namespaces) > 1 {
				errs = append(errs, field.Invalid(p.Child("namespaces"), r.Namespaces, "if '*' is present, must not specify other namespaces"))
			}
		default:
			for j, ns := range r.Namespaces {
				for _, msg := range apivalidation.ValidateNamespaceName(ns, false) {
					errs = append(errs, field.Invalid(p.Child("namespaces").Index(j), ns, "each member of this list must be '*' or a DNS-1123 label; "+msg))
				}
			}
		}
	}
	for i, r := range rule.NonResourceRules {
		p := fldPath.Child("nonResourceRules").Index(i)
		errs = append(errs, validateVerbs(r.Verbs, p.Child("verbs"))...)
		switch {
		case len(r.NonResourceURLs) == 0:
			errs = append(errs, field.Required(p.Child("nonResourceURLs"), "nonResourceURLs must contain at least one value"))
		case slices.Contains(r.NonResourceURLs, "*"):
			if len(r.NonResourceURLs) > 1 {
				errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs, "if '*' is present, must not specify other non-resource URLs"))
			}
		default:
			for j, u := range r.NonResourceURLs {
				if msg := nonResourceURLError(u); msg != "" {
					errs = append(errs, field.Invalid(p.Child("nonResourceURLs").Index(j), u, msg))
				}
			}
		}
	}
	return errs
}

func validateVerbs(verbs []string, fldPath *field.Path) field.ErrorList {
	switch {
	case len(verbs) == 0:
		return field.ErrorList{field.Required(fldPath, "verbs must contain at least one value")}
	case slices.Contains(verbs, "*"):
		if len(verbs) > 1 {
			return field.ErrorList{field.Invalid(fldPath, verbs, "if '*' is present, must not specify other verbs")}
		}
	case !supportedVerbs.HasAll(verbs...):
		return field.ErrorList{field.NotSupported(fldPath, verbs, sets.List(supportedVerbs))}
	}
	return nil
}

// nonResourceURLError says what is wrong with a non-resource URL path: it must start
// with a slash, hold no white-space or double slash, and use "*" only as a final
// "/*" segment.
func nonResourceURLError(path string) string {
	switch {
	case path == "":
		return "must not be empty"
	case path == "/":
		return ""
	case !strings.HasPrefix(path, "/"):
		return "must start with slash"
	case strings.Contains(path, " "):
		return "must not contain white-space"
	case strings.Contains(path, "//"):
		return "must not contain double slash"
	}
	if n := strings.Count(path, "*"); n > 1 || (n == 1 && path[len(path)-2:] != "/*") {
		return "wildcard can only do suffix matching"
	}
	return ""
}

func validateSubject(s *flowcontrolv1.Subject, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	forbid := func(set bool, name, kind string) {
		if set {
			errs = append(errs, field.Forbidden(fldPath.Child(name), fmt.Sprintf("%s is forbidden when subject kind is not '%s'", name, kind)))
		}
	}
	switch s.Kind {
	case flowcontrolv1.SubjectKindServiceAccount:
		p := fldPath.Child("serviceAccount")
		if sa := s.ServiceAccount; sa == nil {
			errs = append(errs, field.Required(p, "serviceAccount is required when subject kind is 'ServiceAccount'"))
		} else {
			if sa.Name == "" {
				errs = append(errs, field.Required(p.Child("name"), ""))
			} else if sa.Name != flowcontrolv1.NameAll {
				for _, msg := range apivalidation.ValidateServiceAccountName(sa.Name, false) {
					errs = append(errs, field.Invalid(p.Child("name"), sa.Name, msg))
				}
			}
			if sa.Namespace == "" {
				errs = append(errs, field.Required(p.Child("namespace"), "must specify namespace for service account"))
			} else {
				for _, msg := range apivalidation.ValidateNamespaceName(sa.Namespace, false) {
					errs = append(errs, field.Invalid(p.Child("namespace"), sa.Namespace, msg))
				}
			}
		}
		forbid(s.User != nil, "user", "User")
		forbid(s.Group != nil, "group", "Group")
	case flowcontrolv1.SubjectKindUser:
		if s.User == nil {
			errs = append(errs, field.Required(fldPath.Child("user"), "user is required when subject kind is 'User'"))
		} else if s.User.Name == "" {
			errs = append(errs, field.Required(fldPath.Child("user", "name"), ""))
		}
		forbid(s.ServiceAccount != nil, "serviceAccount", "ServiceAccount")
		forbid(s.Group != nil, "group", "Group")
	case flowcontrolv1.SubjectKindGroup:
		if s.Group == nil {
			errs = append(errs, field.Required(fldPath.Child("group"), "group is required when subject kind is 'Group'"))
		} else if s.Group.Name == "" {
			errs = append(errs, field.Required(fldPath.Child("group", "name"), ""))
		}
		forbid(s.ServiceAccount != nil, "serviceAccount", "ServiceAccount")
		forbid(s.User != nil, "user", "User")
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("kind"), s.Kind, supportedSubjectKinds))
	}
	return errs
}

// validateConditionTypes requires every condition to have a type, none twice.
func validateConditionTypes(types []string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, t := range types {
		p := fldPath.Index(i)
		if seen.Has(t) {
			errs = append(errs, field.Duplicate(p.Child("type"), t))
		}
		seen.Insert(t)
		if t == "" {
			errs = append(errs, field.Required(p.Child("type"), ""))
		}
	}
	return errs
}

// PriorityLevelConfigurationResource serves prioritylevelconfigurations: cluster-scoped,
// defaulted as flowcontrol/v1 does (30 nominal shares, 0% lendable, 64 queues of hand
// size 8 and length 50), generation tracked, a status subresource, and the
// NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE QUEUELENGTHLIMIT AGE table.
func PriorityLevelConfigurationResource() registry.Resource {
	desc := flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()
	return registry.Strategy[*flowcontrolv1.PriorityLevelConfiguration]{
		PrepareForCreate: func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Status = flowcontrolv1.PriorityLevelConfigurationStatus{}
		},
		Default:  DefaultPriorityLevelConfiguration,
		Validate: ValidatePriorityLevelConfiguration,
		ValidateUpdate: func(pl, _ *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
			return ValidatePriorityLevelConfiguration(pl)
		},
		StatusValidateUpdate: func(pl, _ *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
			var types []string
			for _, c := range pl.Status.Conditions {
				types = append(types, string(c.Type))
			}
			return validateConditionTypes(types, field.NewPath("status", "conditions"))
		},
		Row: func(pl *flowcontrolv1.PriorityLevelConfiguration, now time.Time) []interface{} {
			var ncs, queues, handSize, queueLength interface{} = "<none>", "<none>", "<none>", "<none>"
			if l := pl.Spec.Limited; l != nil {
				if l.NominalConcurrencyShares != nil {
					ncs = int64(*l.NominalConcurrencyShares)
				}
				if q := l.LimitResponse.Queuing; q != nil {
					queues, handSize, queueLength = int64(q.Queues), int64(q.HandSize), int64(q.QueueLengthLimit)
				}
			}
			return []interface{}{pl.Name, string(pl.Spec.Type), ncs, queues, handSize, queueLength, registry.HumanAge(pl.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:             flowcontrolv1.SchemeGroupVersion.WithKind("PriorityLevelConfiguration"),
		Plural:          "prioritylevelconfigurations",
		Singular:        "prioritylevelconfiguration",
		New:             func() runtime.Object { return &flowcontrolv1.PriorityLevelConfiguration{} },
		NewList:         func() runtime.Object { return &flowcontrolv1.PriorityLevelConfigurationList{} },
		TrackGeneration: true,
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Type", Type: "string", Description: flowcontrolv1.PriorityLevelConfigurationSpec{}.SwaggerDoc()["type"]},
			{Name: "NominalConcurrencyShares", Type: "string", Description: flowcontrolv1.LimitedPriorityLevelConfiguration{}.SwaggerDoc()["nominalConcurrencyShares"]},
			{Name: "Queues", Type: "string", Description: desc["queues"]},
			{Name: "HandSize", Type: "string", Description: desc["handSize"]},
			{Name: "QueueLengthLimit", Type: "string", Description: desc["queueLengthLimit"]},
			registry.AgeColumn,
		},
	})
}

// DefaultPriorityLevelConfiguration fills flowcontrol/v1's defaults.
func DefaultPriorityLevelConfiguration(pl *flowcontrolv1.PriorityLevelConfiguration) {
	if e := pl.Spec.Exempt; e != nil {
		if e.NominalConcurrencyShares == nil {
			e.NominalConcurrencyShares = new(int32(0))
		}
		if e.LendablePercent == nil {
			e.LendablePercent = new(int32(0))
		}
	}
	if l := pl.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares == nil {
			l.NominalConcurrencyShares = new(defaultNominalConcurrencyShares)
		}
		if l.LendablePercent == nil {
			l.LendablePercent = new(int32(0))
		}
		if q := l.LimitResponse.Queuing; q != nil {
			if q.HandSize == 0 {
				q.HandSize = defaultHandSize
			}
			if q.Queues == 0 {
				q.Queues = defaultQueues
			}
			if q.QueueLengthLimit == 0 {
				q.QueueLengthLimit = defaultQueueLengthLimit
			}
		}
	}
}

// ValidatePriorityLevelConfiguration is Kubernetes' check of a priority level: no
// v1beta3 round-trip annotation, type Exempt exactly for "exempt", the limited or exempt
// settings in range, a queuing configuration shuffle sharding can use, the mandatory
// levels' fixed specs (only exempt's spec.exempt may change), and its status.
func ValidatePriorityLevelConfiguration(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	var errs field.ErrorList
	if _, ok := pl.Annotations[flowcontrolv1beta3.PriorityLevelPreserveZeroConcurrencySharesKey]; ok {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations"),
			fmt.Sprintf("annotation '%s' is forbidden", flowcontrolv1beta3.PriorityLevelPreserveZeroConcurrencySharesKey)))
	}
	spec := field.NewPath("spec")
	errs = append(errs, validatePriorityLevelSpec(pl.Name, &pl.Spec, spec)...)
	for _, mand := range bootstrap.MandatoryPriorityLevelConfigurations {
		if mand.Name != pl.Name {
			continue
		}
		want := mand.DeepCopy()
		DefaultPriorityLevelConfiguration(want)
		have := pl.Spec.DeepCopy()
		msg := fmt.Sprintf("spec of '%s' must equal the fixed value", pl.Name)
		if pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt {
			have.Exempt = want.Spec.Exempt
			msg = fmt.Sprintf("spec of '%s' except the 'spec.exempt' field must equal the fixed value", pl.Name)
		}
		if !apiequality.Semantic.DeepEqual(&want.Spec, have) {
			errs = append(errs, field.Invalid(spec, pl.Spec, msg))
		}
	}
	var types []string
	for _, c := range pl.Status.Conditions {
		types = append(types, string(c.Type))
	}
	return append(errs, validateConditionTypes(types, field.NewPath("status", "conditions"))...)
}

func validatePriorityLevelSpec(name string, spec *flowcontrolv1.PriorityLevelConfigurationSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if (name == flowcontrolv1.PriorityLevelConfigurationNameExempt) != (spec.Type == flowcontrolv1.PriorityLevelEnablementExempt) {
		errs = append(errs, field.Invalid(fldPath.Child("type"), spec.Type, "must be 'Exempt' if and only if `name` is 'exempt'"))
	}
	switch spec.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if spec.Limited != nil {
			errs = append(errs, field.Forbidden(fldPath.Child("limited"), "must be nil if the type is not Limited"))
		}
		if e := spec.Exempt; e != nil {
			p := fldPath.Child("exempt")
			if e.NominalConcurrencyShares != nil && *e.NominalConcurrencyShares < 0 {
				errs = append(errs, field.Invalid(p.Child("nominalConcurrencyShares"), *e.NominalConcurrencyShares, "must be a non-negative integer"))
			}
			errs = append(errs, validateLendablePercent(e.LendablePercent, p)...)
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if spec.Exempt != nil {
			errs = append(errs, field.Forbidden(fldPath.Child("exempt"), "must be nil if the type is Limited"))
		}
		if spec.Limited == nil {
			errs = append(errs, field.Required(fldPath.Child("limited"), "must not be empty when type is Limited"))
		} else {
			errs = append(errs, validateLimited(spec.Limited, fldPath.Child("limited"))...)
		}
	case "":
		errs = append(errs, field.Required(fldPath.Child("type"), ""))
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("type"), spec.Type, supportedPriorityLevelTypes))
	}
	return errs
}

func validateLendablePercent(p *int32, fldPath *field.Path) field.ErrorList {
	if p != nil && (*p < 0 || *p > 100) {
		return field.ErrorList{field.Invalid(fldPath.Child("lendablePercent"), *p, "must be between 0 and 100, inclusive")}
	}
	return nil
}

func validateLimited(l *flowcontrolv1.LimitedPriorityLevelConfiguration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if l.NominalConcurrencyShares != nil && *l.NominalConcurrencyShares < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("nominalConcurrencyShares"), *l.NominalConcurrencyShares, "must be a non-negative integer"))
	}
	lr, lrPath := l.LimitResponse, fldPath.Child("limitResponse")
	switch lr.Type {
	case flowcontrolv1.LimitResponseTypeReject:
		if lr.Queuing != nil {
			errs = append(errs, field.Forbidden(lrPath.Child("queuing"), "must be nil if limited.limitResponse.type is not Limited"))
		}
	case flowcontrolv1.LimitResponseTypeQueue:
		if lr.Queuing == nil {
			errs = append(errs, field.Required(lrPath.Child("queuing"), "must not be empty if limited.limitResponse.type is Limited"))
		} else {
			errs = append(errs, validateQueuing(lr.Queuing, lrPath.Child("queuing"))...)
		}
	case "":
		errs = append(errs, field.Required(lrPath.Child("type"), ""))
	default:
		errs = append(errs, field.NotSupported(lrPath.Child("type"), lr.Type, supportedLimitResponseTypes))
	}
	errs = append(errs, validateLendablePercent(l.LendablePercent, fldPath)...)
	if b := l.BorrowingLimitPercent; b != nil && *b < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("borrowingLimitPercent"), *b, "if specified, must be a non-negative integer"))
	}
	return errs
}

func validateQueuing(q *flowcontrolv1.QueuingConfiguration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.QueueLengthLimit <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
	}
	if q.Queues <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("queues"), q.Queues, "must be positive"))
	} else if q.Queues > maxQueues {
		errs = append(errs, field.Invalid(fldPath.Child("queues"), q.Queues, fmt.Sprintf("must not be greater than %d", maxQueues)))
	}
	switch {
	case q.HandSize <= 0:
		errs = append(errs, field.Invalid(fldPath.Child("handSize"), q.HandSize, "must be positive"))
	case q.HandSize > q.Queues:
		errs = append(errs, field.Invalid(fldPath.Child("handSize"), q.HandSize, fmt.Sprintf("should not be greater than queues (%d)", q.Queues)))
	default:
		if bits := shufflesharding.RequiredEntropyBits(int(q.Queues), int(q.HandSize)); bits > shufflesharding.MaxHashBits {
			errs = append(errs, field.Invalid(fldPath.Child("handSize"), q.HandSize,
				fmt.Sprintf("required entropy bits of deckSize %d and handSize %d should not be greater than %d", q.Queues, q.HandSize, shufflesharding.MaxHashBits)))
		}
	}
	return errs
}
