package core

import (
	"encoding/json"
	"reflect"
	"time"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// SecretResource returns the core/v1 Secret resource: stringData folded into data, type
// defaulting and type-specific keys, immutability, the "type" field selector and
// kubectl's NAME TYPE DATA AGE table.
func SecretResource() registry.Resource {
	return registry.Resource{
		GVK:            schema.GroupVersionKind{Version: "v1", Kind: "Secret"},
		Plural:         "secrets",
		Singular:       "secret",
		Namespaced:     true,
		New:            func() runtime.Object { return &v1.Secret{} },
		NewList:        func() runtime.Object { return &v1.SecretList{} },
		Default:        registry.Hook(DefaultSecret),
		Validate:       registry.Func(ValidateSecret),
		ValidateUpdate: registry.FuncUpdate(ValidateSecretUpdate),
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Type", Type: "string", Description: v1.Secret{}.SwaggerDoc()["type"]},
			{Name: "Data", Type: "string", Description: v1.Secret{}.SwaggerDoc()["data"]},
			registry.AgeColumn,
		},
		Row: registry.FuncWith(func(s *v1.Secret, now time.Time) []interface{} {
			return []interface{}{s.Name, string(s.Type), int64(len(s.Data)), registry.HumanAge(s.CreationTimestamp, now)}
		}),
		Fields: registry.Func(func(s *v1.Secret) fields.Set {
			return fields.Set{"type": string(s.Type)}
		}),
	}
}

// DefaultSecret folds stringData into data (stringData wins, and is never stored, as
// Kubernetes' conversion does) and defaults the type to Opaque.
func DefaultSecret(s *v1.Secret) {
	if s == nil {
		return
	}
	if len(s.StringData) > 0 && s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
	if s.Type == "" {
		s.Type = v1.SecretTypeOpaque
	}
}

// ValidateSecret checks keys, the 1 MiB size limit and the keys each well-known type
// requires.
func ValidateSecret(s *v1.Secret) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	dataPath := field.NewPath("data")
	total := 0
	for key, value := range s.Data {
		for _, msg := range utilvalidation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(dataPath.Key(key), key, msg))
		}
		total += len(value)
	}
	if total > cmMaxSize {
		errs = append(errs, field.TooLong(dataPath, "", cmMaxSize))
	}
	switch s.Type {
	case v1.SecretTypeServiceAccountToken:
		// Only the account name is required; a controller adds the uid and token later.
		if s.Annotations[v1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(v1.ServiceAccountNameKey), ""))
		}
	case v1.SecretTypeDockercfg:
		errs = append(errs, secretValidateJSONKey(s, v1.DockerConfigKey)...)
	case v1.SecretTypeDockerConfigJson:
		errs = append(errs, secretValidateJSONKey(s, v1.DockerConfigJsonKey)...)
	case v1.SecretTypeBasicAuth:
		_, user := s.Data[v1.BasicAuthUsernameKey]
		_, pass := s.Data[v1.BasicAuthPasswordKey]
		if !user && !pass {
			errs = append(errs, field.Required(dataPath.Key(v1.BasicAuthUsernameKey), ""),
				field.Required(dataPath.Key(v1.BasicAuthPasswordKey), ""))
		}
	case v1.SecretTypeSSHAuth:
		if len(s.Data[v1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(dataPath.Key(v1.SSHAuthPrivateKey), ""))
		}
	case v1.SecretTypeTLS:
		if _, ok := s.Data[v1.TLSCertKey]; !ok {
			errs = append(errs, field.Required(dataPath.Key(v1.TLSCertKey), ""))
		}
		if _, ok := s.Data[v1.TLSPrivateKeyKey]; !ok {
			errs = append(errs, field.Required(dataPath.Key(v1.TLSPrivateKeyKey), ""))
		}
	}
	return errs
}

// secretValidateJSONKey requires key in data and its value to be well-formed JSON.
func secretValidateJSONKey(s *v1.Secret, key string) field.ErrorList {
	p := field.NewPath("data").Key(key)
	value, ok := s.Data[key]
	if !ok {
		return field.ErrorList{field.Required(p, "")}
	}
	if err := json.Unmarshal(value, &map[string]interface{}{}); err != nil {
		return field.ErrorList{field.Invalid(p, "<secret contents redacted>", err.Error())}
	}
	return nil
}

// ValidateSecretUpdate checks an update: the type never changes, and once immutable is
// true neither data nor immutable may change.
func ValidateSecretUpdate(s, old *v1.Secret) field.ErrorList {
	if s == nil || old == nil {
		return ValidateSecret(s)
	}
	errs := apivalidation.ValidateImmutableField(s.Type, old.Type, field.NewPath("type"))
	if old.Immutable != nil && *old.Immutable {
		if s.Immutable == nil || !*s.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(s.Data, old.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
	}
	return append(errs, ValidateSecret(s)...)
}
