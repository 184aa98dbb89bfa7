package core

import (
	"reflect"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// cmMaxSize is Kubernetes' MaxSecretSize, the limit on the summed size of the values of
// a ConfigMap or a Secret.
const cmMaxSize = 1 * 1024 * 1024

// ConfigMapResource returns the core/v1 ConfigMap resource: key and size validation,
// immutability, and kubectl's NAME DATA AGE table.
func ConfigMapResource() registry.Resource {
	return registry.Strategy[*v1.ConfigMap]{
		Validate:       ValidateConfigMap,
		ValidateUpdate: ValidateConfigMapUpdate,
		Row: func(cm *v1.ConfigMap, now time.Time) []interface{} {
			return []interface{}{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), registry.HumanAge(cm.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:        schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Plural:     "configmaps",
		Singular:   "configmap",
		ShortNames: []string{"cm"},
		Namespaced: true,
		New:        func() runtime.Object { return &v1.ConfigMap{} },
		NewList:    func() runtime.Object { return &v1.ConfigMapList{} },
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Data", Type: "string", Description: v1.ConfigMap{}.SwaggerDoc()["data"]},
			registry.AgeColumn,
		},
	})
}

// ValidateConfigMap checks keys (valid config keys, none in both data and binaryData)
// and the total size (1 MiB).
func ValidateConfigMap(cm *v1.ConfigMap) field.ErrorList {
	if cm == nil {
		return nil
	}
	var errs field.ErrorList
	total := 0
	for key, value := range cm.Data {
		for _, msg := range utilvalidation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, msg))
		}
		if _, dup := cm.BinaryData[key]; dup {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, "duplicate of key present in binaryData"))
		}
		total += len(value)
	}
	for key, value := range cm.BinaryData {
		for _, msg := range utilvalidation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(key), key, msg))
		}
		total += len(value)
	}
	if total > cmMaxSize {
		// The empty path says the limit is on the whole object.
		errs = append(errs, field.TooLong(field.NewPath(""), "", cmMaxSize))
	}
	return errs
}

// ValidateConfigMapUpdate checks an update: once immutable is true, data, binaryData
// and immutable itself may not change.
func ValidateConfigMapUpdate(cm, old *v1.ConfigMap) field.ErrorList {
	if cm == nil || old == nil {
		return ValidateConfigMap(cm)
	}
	var errs field.ErrorList
	if old.Immutable != nil && *old.Immutable {
		if cm.Immutable == nil || !*cm.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(cm.Data, old.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(cm.BinaryData, old.BinaryData) {
			errs = append(errs, field.Forbidden(field.NewPath("binaryData"), "field is immutable when `immutable` is set"))
		}
	}
	return append(errs, ValidateConfigMap(cm)...)
}
