// Package admissionregistration serves admissionregistration.k8s.io/v1: webhook
// configurations, ValidatingAdmissionPolicies and MutatingAdmissionPolicies with their
// bindings. Defaults and validation are Kubernetes' own (k8s.io/kubernetes
// pkg/apis/admissionregistration), run on the internal types the served objects convert to.
package admissionregistration

import (
	"time"

	arv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	upstreamv1 "k8s.io/kubernetes/pkg/apis/admissionregistration/v1"
	"k8s.io/kubernetes/pkg/apis/admissionregistration/validation"

	"github.com/tranche/tranche/internal/registry"
)

var (
	webhooksColumn   = metav1.TableColumnDefinition{Name: "Webhooks", Type: "integer", Description: "Webhooks indicates the number of webhooks registered in this configuration"}
	paramKindColumn  = metav1.TableColumnDefinition{Name: "ParamKind", Type: "string", Description: "ParamKind specifies the kind of resources used to parameterize this policy"}
	policyNameColumn = metav1.TableColumnDefinition{Name: "PolicyName", Type: "string", Description: "PolicyName indicates the policy definition which the policy binding binded to"}
	paramRefColumn   = metav1.TableColumnDefinition{Name: "ParamRef", Type: "string", Description: "ParamRef indicates the param resource which sets the configuration param"}
)

// ValidatingWebhookConfigurationResource serves validatingwebhookconfigurations:
// cluster-scoped, NAME WEBHOOKS AGE.
func ValidatingWebhookConfigurationResource() registry.Resource {
	return registry.Strategy[*arv1.ValidatingWebhookConfiguration]{
		Default:        upstreamv1.SetObjectDefaults_ValidatingWebhookConfiguration,
		Validate:       checked(upstreamv1.Convert_v1_ValidatingWebhookConfiguration_To_admissionregistration_ValidatingWebhookConfiguration, validation.ValidateValidatingWebhookConfiguration),
		ValidateUpdate: checkedUpdate(upstreamv1.Convert_v1_ValidatingWebhookConfiguration_To_admissionregistration_ValidatingWebhookConfiguration, validation.ValidateValidatingWebhookConfigurationUpdate),
		Row: func(c *arv1.ValidatingWebhookConfiguration, now time.Time) []interface{} {
			return []interface{}{c.Name, int64(len(c.Webhooks)), registry.HumanAge(c.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:             arv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"),
		Plural:          "validatingwebhookconfigurations",
		Singular:        "validatingwebhookconfiguration",
		Categories:      []string{"api-extensions"},
		TrackGeneration: true,
		New:             func() runtime.Object { return &arv1.ValidatingWebhookConfiguration{} },
		NewList:         func() runtime.Object { return &arv1.ValidatingWebhookConfigurationList{} },
		Columns:         []metav1.TableColumnDefinition{registry.NameColumn, webhooksColumn, registry.AgeColumn},
	})
}

// MutatingWebhookConfigurationResource serves mutatingwebhookconfigurations:
// cluster-scoped, NAME WEBHOOKS AGE.
func MutatingWebhookConfigurationResource() registry.Resource {
	return registry.Strategy[*arv1.MutatingWebhookConfiguration]{
		Default:        upstreamv1.SetObjectDefaults_MutatingWebhookConfiguration,
		Validate:       checked(upstreamv1.Convert_v1_MutatingWebhookConfiguration_To_admissionregistration_MutatingWebhookConfiguration, validation.ValidateMutatingWebhookConfiguration),
		ValidateUpdate: checkedUpdate(upstreamv1.Convert_v1_MutatingWebhookConfiguration_To_admissionregistration_MutatingWebhookConfiguration, validation.ValidateMutatingWebhookConfigurationUpdate),
		Row: func(c *arv1.MutatingWebhookConfiguration, now time.Time) []interface{} {
			return []interface{}{c.Name, int64(len(c.Webhooks)), registry.HumanAge(c.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:             arv1.SchemeGroupVersion.WithKind("MutatingWebhookConfiguration"),
		Plural:          "mutatingwebhookconfigurations",
		Singular:        "mutatingwebhookconfiguration",
		Categories:      []string{"api-extensions"},
		TrackGeneration: true,
		New:             func() runtime.Object { return &arv1.MutatingWebhookConfiguration{} },
		NewList:         func() runtime.Object { return &arv1.MutatingWebhookConfigurationList{} },
		Columns:         []metav1.TableColumnDefinition{registry.NameColumn, webhooksColumn, registry.AgeColumn},
	})
}

// ValidatingAdmissionPolicyResource serves validatingadmissionpolicies with their status
// subresource (where the type checker writes its warnings): NAME VALIDATIONS PARAMKIND AGE.
func ValidatingAdmissionPolicyResource() registry.Resource {
	return registry.Strategy[*arv1.ValidatingAdmissionPolicy]{
		PrepareForCreate: func(p *arv1.ValidatingAdmissionPolicy) { p.Status = arv1.ValidatingAdmissionPolicyStatus{} },
		PrepareForUpdate: func(p, old *arv1.ValidatingAdmissionPolicy) { p.Status = old.Status },
		Default:          upstreamv1.SetObjectDefaults_ValidatingAdmissionPolicy,
		Validate:         checked(upstreamv1.Convert_v1_ValidatingAdmissionPolicy_To_admissionregistration_ValidatingAdmissionPolicy, validation.ValidateValidatingAdmissionPolicy),
		ValidateUpdate:   checkedUpdate(upstreamv1.Convert_v1_ValidatingAdmissionPolicy_To_admissionregistration_ValidatingAdmissionPolicy, validation.ValidateValidatingAdmissionPolicyUpdate),
		StatusValidateUpdate: checkedUpdate(upstreamv1.Convert_v1_ValidatingAdmissionPolicy_To_admissionregistration_ValidatingAdmissionPolicy,
			validation.ValidateValidatingAdmissionPolicyStatusUpdate),
		Row: func(p *arv1.ValidatingAdmissionPolicy, now time.Time) []interface{} {
			return []interface{}{p.Name, int64(len(p.Spec.Validations)), paramKind(p.Spec.ParamKind), registry.HumanAge(p.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:             arv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicy"),
		Plural:          "validatingadmissionpolicies",
		Singular:        "validatingadmissionpolicy",
		Categories:      []string{"api-extensions"},
		TrackGeneration: true,
		New:             func() runtime.Object { return &arv1.ValidatingAdmissionPolicy{} },
		NewList:         func() runtime.Object { return &arv1.ValidatingAdmissionPolicyList{} },
		Columns: []metav1.TableColumnDefinition{registry.NameColumn,
			{Name: "Validations", Type: "integer", Description: "Validations indicates the number of validation rules defined in this configuration"},
			paramKindColumn, registry.AgeColumn},
	})
}

// ValidatingAdmissionPolicyBindingResource serves validatingadmissionpolicybindings:
// NAME POLICYNAME PARAMREF AGE.
func ValidatingAdmissionPolicyBindingResource() registry.Resource {
	return registry.Strategy[*arv1.ValidatingAdmissionPolicyBinding]{
		Default:        upstreamv1.SetObjectDefaults_ValidatingAdmissionPolicyBinding,
		Validate:       checked(upstreamv1.Convert_v1_ValidatingAdmissionPolicyBinding_To_admissionregistration_ValidatingAdmissionPolicyBinding, validation.ValidateValidatingAdmissionPolicyBinding),
		ValidateUpdate: checkedUpdate(upstreamv1.Convert_v1_ValidatingAdmissionPolicyBinding_To_admissionregistration_ValidatingAdmissionPolicyBinding, validation.ValidateValidatingAdmissionPolicyBindingUpdate),
		Row: func(b *arv1.ValidatingAdmissionPolicyBinding, now time.Time) []interface{} {
			return []interface{}{b.Name, b.Spec.PolicyName, paramRef(b.Spec.ParamRef), registry.HumanAge(b.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:             arv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicyBinding"),
		Plural:          "validatingadmissionpolicybindings",
		Singular:        "validatingadmissionpolicybinding",
		Categories:      []string{"api-extensions"},
		TrackGeneration: true,
		New:             func() runtime.Object { return &arv1.ValidatingAdmissionPolicyBinding{} },
		NewList:         func() runtime.Object { return &arv1.ValidatingAdmissionPolicyBindingList{} },
		Columns:         []metav1.TableColumnDefinition{registry.NameColumn, policyNameColumn, paramRefColumn, registry.AgeColumn},
	})
}

// MutatingAdmissionPolicyResource serves mutatingadmissionpolicies (v1: GA and on by
// default since Kubernetes 1.36): NAME MUTATIONS PARAMKIND AGE.
func MutatingAdmissionPolicyResource() registry.Resource {
	return registry.Strategy[*arv1.MutatingAdmissionPolicy]{
		Default:        upstreamv1.SetObjectDefaults_MutatingAdmissionPolicy,
		Validate:       checked(upstreamv1.Convert_v1_MutatingAdmissionPolicy_To_admissionregistration_MutatingAdmissionPolicy, validation.ValidateMutatingAdmissionPolicy),
		ValidateUpdate: checkedUpdate(upstreamv1.Convert_v1_MutatingAdmissionPolicy_To_admissionregistration_MutatingAdmissionPolicy, validation.ValidateMutatingAdmissionPolicyUpdate),
		Row: func(p *arv1.MutatingAdmissionPolicy, now time.Time) []interface{} {
			return []interface{}{p.Name, int64(len(p.Spec.Mutations)), paramKind(p.Spec.ParamKind), registry.HumanAge(p.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:             arv1.SchemeGroupVersion.WithKind("MutatingAdmissionPolicy"),
		Plural:          "mutatingadmissionpolicies",
		Singular:        "mutatingadmissionpolicy",
		Categories:      []string{"api-extensions"},
		TrackGeneration: true,
		New:             func() runtime.Object { return &arv1.MutatingAdmissionPolicy{} },
		NewList:         func() runtime.Object { return &arv1.MutatingAdmissionPolicyList{} },
		Columns: []metav1.TableColumnDefinition{registry.NameColumn,
			{Name: "Mutations", Type: "integer", Description: "Mutation indicates the number of mutations rules defined in this configuration"},
			paramKindColumn, registry.AgeColumn},
	})
}

// MutatingAdmissionPolicyBindingResource serves mutatingadmissionpolicybindings:
// NAME POLICYNAME PARAMREF AGE.
func MutatingAdmissionPolicyBindingResource() registry.Resource {
	return registry.Strategy[*arv1.MutatingAdmissionPolicyBinding]{
		Default:        upstreamv1.SetObjectDefaults_MutatingAdmissionPolicyBinding,
		Validate:       checked(upstreamv1.Convert_v1_MutatingAdmissionPolicyBinding_To_admissionregistration_MutatingAdmissionPolicyBinding, validation.ValidateMutatingAdmissionPolicyBinding),
		ValidateUpdate: checkedUpdate(upstreamv1.Convert_v1_MutatingAdmissionPolicyBinding_To_admissionregistration_MutatingAdmissionPolicyBinding, validation.ValidateMutatingAdmissionPolicyBindingUpdate),
		Row: func(b *arv1.MutatingAdmissionPolicyBinding, now time.Time) []interface{} {
			return []interface{}{b.Name, b.Spec.PolicyName, paramRef(b.Spec.ParamRef), registry.HumanAge(b.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:             arv1.SchemeGroupVersion.WithKind("MutatingAdmissionPolicyBinding"),
		Plural:          "mutatingadmissionpolicybindings",
		Singular:        "mutatingadmissionpolicybinding",
		Categories:      []string{"api-extensions"},
		TrackGeneration: true,
		New:             func() runtime.Object { return &arv1.MutatingAdmissionPolicyBinding{} },
		NewList:         func() runtime.Object { return &arv1.MutatingAdmissionPolicyBindingList{} },
		Columns:         []metav1.TableColumnDefinition{registry.NameColumn, policyNameColumn, paramRefColumn, registry.AgeColumn},
	})
}

// checked runs an upstream validation on the internal form of a served object. The
// handlers validate metadata themselves, so upstream's metadata errors are dropped rather
// than reported twice.
func checked[V, I any](convert func(*V, *I, conversion.Scope) error, validate func(*I) field.ErrorList) func(*V) field.ErrorList {
	return func(obj *V) field.ErrorList {
		in, err := toInternal(convert, obj)
		if err != nil {
			return field.ErrorList{field.InternalError(nil, err)}
		}
		return registry.WithoutMetadata(validate(in))
	}
}

// checkedUpdate is checked for an update's validation against the stored object.
func checkedUpdate[V, I any](convert func(*V, *I, conversion.Scope) error, validate func(obj, old *I) field.ErrorList) func(obj, old *V) field.ErrorList {
	return func(obj, old *V) field.ErrorList {
		in, err := toInternal(convert, obj)
		if err != nil {
			return field.ErrorList{field.InternalError(nil, err)}
		}
		oldIn, err := toInternal(convert, old)
		if err != nil {
			return field.ErrorList{field.InternalError(nil, err)}
		}
		return registry.WithoutMetadata(validate(in, oldIn))
	}
}

func toInternal[V, I any](convert func(*V, *I, conversion.Scope) error, obj *V) (*I, error) {
	out := new(I)
	return out, convert(obj, out, nil)
}

// paramKind is the ParamKind cell: apiVersion/kind, or <unset>.
func paramKind(pk *arv1.ParamKind) string {
	if pk == nil {
		return "<unset>"
	}
	return pk.APIVersion + "/" + pk.Kind
}

// paramRef is the ParamRef cell: namespace/name, */name when no namespace is given,
// the selector, or <unset>.
func paramRef(pr *arv1.ParamRef) string {
	switch {
	case pr == nil:
		return "<unset>"
	case pr.Name != "" && pr.Namespace != "":
		return pr.Namespace + "/" + pr.Name
	case pr.Name != "":
		return "*/" + pr.Name
	case pr.Selector != nil:
		return pr.Selector.String()
	}
	return "<unset>"
}
