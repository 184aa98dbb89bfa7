// Package crd serves the custom resources CustomResourceDefinitions declare: it turns a
// definition into the registry.Resource of each served version (upstream's strategy,
// schema validation, pruning, defaulting, subresources and printer columns, from
// k8s.io/apiextensions-apiserver), and runs in every API server the controller that
// writes the definitions' status (names, Established, Terminating), deletes the custom
// resources of a definition being deleted, and adds and removes the served resources as
// definitions come and go in storage.
package crd

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/registry"
	regext "github.com/tranche/tranche/internal/registry/apiextensions"
)

// Resources returns the resources crd serves: one per served version, the preferred
// version (highest by Kubernetes' version order) first, as discovery lists them. Every
// version keeps its objects under the same key prefix; a version other than the storage
// version writes them as the storage version (conversion strategy None rewrites
// apiVersion only).
func Resources(crd *apiextv1.CustomResourceDefinition) ([]registry.Resource, apiserver.DynamicOptions, error) {
	opts := apiserver.DynamicOptions{UnknownFields: map[schema.GroupVersionResource]func(runtime.Object) []string{}}
	internal, err := regext.ToInternal(crd)
	if err != nil {
		return nil, opts, err
	}
	storageVersion := ""
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			storageVersion = v.Name
		}
	}
	names := crd.Status.AcceptedNames
	var out []registry.Resource
	storageServed := false
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		if v.Name == storageVersion {
			storageServed = true
		}
		r, unknown, err := versionResource(crd, internal, v, names)
		if err != nil {
			return nil, opts, fmt.Errorf("customresourcedefinition %s version %s: %w", crd.Name, v.Name, err)
		}
		out = append(out, r)
		if unknown != nil {
			opts.UnknownFields[r.GVR()] = unknown
		}
	}
	if storageServed {
		// Every version writes the storage version's form.
		storage := schema.GroupVersionResource{Group: crd.Spec.Group, Version: storageVersion, Resource: names.Plural}
		for i := range out {
			out[i].Storage.GVR = storage
		}
	}
	opts.TypeConverter = typeConverter(crd)
	sort.SliceStable(out, func(i, j int) bool {
		return version.CompareKubeAwareVersionStrings(out[i].GVK.Version, out[j].GVK.Version) > 0
	})
	return out, opts, nil
}

func identity(obj runtime.Object) runtime.Object { return obj }

func versionResource(crd *apiextv1.CustomResourceDefinition, internal *apiext.CustomResourceDefinition, v apiextv1.CustomResourceDefinitionVersion,
	names apiextv1.CustomResourceDefinitionNames) (registry.Resource, func(runtime.Object) []string, error) {
	ctx := context.Background()
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: names.Kind}
	namespaced := crd.Spec.Scope == apiextv1.NamespaceScoped
	r := registry.Unstructured(gvk, names.Plural, names.Singular, namespaced)
	listKind := names.ListKind
	r.NewList = func() runtime.Object {
		l := &unstructured.UnstructuredList{Object: map[string]interface{}{}}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(listKind))
		return l
	}
	r.ShortNames = names.ShortNames
	r.Categories = names.Categories
	if v.Deprecated {
		r.DeprecationWarning = fmt.Sprintf("%s %s is deprecated", gvk.GroupVersion(), gvk.Kind)
		if v.DeprecationWarning != nil {
			r.DeprecationWarning = *v.DeprecationWarning
		}
	}

	// The internal type keeps what all versions share at the top.
	val, err := apiext.GetSchemaForVersion(internal, v.Name)
	if err != nil {
		return r, nil, err
	}
	subresources, err := apiext.GetSubresourcesForVersion(internal, v.Name)
	if err != nil {
		return r, nil, err
	}
	var props *apiext.JSONSchemaProps
	if val != nil {
		props = val.OpenAPIV3Schema
	}
	var structural *structuralschema.Structural
	if props != nil {
		s, err := structuralschema.NewStructural(props)
		if err != nil && !crd.Spec.PreserveUnknownFields {
			return r, nil, fmt.Errorf("schema is not structural: %w", err)
		}
		if s != nil && !crd.Spec.PreserveUnknownFields {
			s = s.DeepCopy()
			if err := structuraldefaulting.PruneDefaults(s); err != nil {
				return r, nil, fmt.Errorf("pruning defaults: %w", err)
			}
		}
		structural = s
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		return r, nil, err
	}
	var statusSpec *apiext.CustomResourceSubresourceStatus
	var statusValidator apiservervalidation.SchemaValidator
	var scaleSpec *apiext.CustomResourceSubresourceScale
	if sub := subresources; sub != nil {
		if sub.Status != nil {
			statusSpec = sub.Status
			if props != nil && props.Properties != nil {
				if st, ok := props.Properties["status"]; ok {
					if statusValidator, _, err = apiservervalidation.NewSchemaValidator(&st); err != nil {
						return r, nil, err
					}
				}
			}
		}
		scaleSpec = sub.Scale
	}
	strategy := customresource.NewStrategy(scheme.Scheme, namespaced, gvk, validator, statusValidator, structural, statusSpec, scaleSpec, v.SelectableFields)
	statusStrategy := customresource.NewStatusStrategy(strategy)

	// The handlers own metadata.generation: set on create, bumped when anything but
	// metadata changes (upstream's strategy does the same).
	r.TrackGeneration = true
	r.PrepareForCreate = func(obj runtime.Object) { strategy.PrepareForCreate(ctx, obj) }
	r.PrepareForUpdate = func(obj, old runtime.Object) { strategy.PrepareForUpdate(ctx, obj, old) }
	var unknown func(runtime.Object) []string
	if structural != nil && !crd.Spec.PreserveUnknownFields {
		r.Default = func(obj runtime.Object) { coerce(obj, structural, false) }
		unknown = func(obj runtime.Object) []string { return coerce(obj.DeepCopyObject(), structural, true) }
	}
	// Objects read from storage are pruned and defaulted too, as upstream's storage
	// decoder does: a default added to the schema later shows in objects stored before.
	fromStorage := identity
	if r.Default != nil {
		fromStorage = func(obj runtime.Object) runtime.Object {
			coerce(obj, structural, false)
			return obj
		}
	}
	r.Storage = &registry.StorageView{GVR: r.GVR(), ToStorage: identity, FromStorage: fromStorage}
	r.Validate = func(obj runtime.Object) field.ErrorList { return strategy.Validate(ctx, obj) }
	r.ValidateUpdate = func(obj, old runtime.Object) field.ErrorList { return strategy.ValidateUpdate(ctx, obj, old) }
	r.Warnings = func(obj, old runtime.Object) []string {
		if old == nil {
			return strategy.WarningsOnCreate(ctx, obj)
		}
		return strategy.WarningsOnUpdate(ctx, obj, old)
	}
	r.Fields = func(obj runtime.Object) fields.Set {
		_, set, err := strategy.GetAttrs(obj)
		if err != nil {
			return nil
		}
		return set
	}
	if statusSpec != nil {
		r.Status = &registry.StatusStrategy{
			PrepareForUpdate: func(obj, old runtime.Object) { statusStrategy.PrepareForUpdate(ctx, obj, old) },
			ValidateUpdate:   func(obj, old runtime.Object) field.ErrorList { return statusStrategy.ValidateUpdate(ctx, obj, old) },
		}
	}
	if scaleSpec != nil {
		r.Scale = scaleStrategy(scaleSpec)
	}
	if err := setColumns(&r, v); err != nil {
		return r, nil, err
	}
	return r, unknown, nil
}

// coerce prunes the fields obj's schema does not know (in metadata too, and in embedded
// resources), drops nulls the schema does not allow and applies the schema's defaults,
// as kube-apiserver does when it decodes a custom resource; with track it returns the
// paths of the fields it pruned.
func coerce(obj runtime.Object, s *structuralschema.Structural, track bool) []string {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	apiVersion, kind := u.GetAPIVersion(), u.GetKind()
	om, foundMeta, paths, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object, schemaobjectmeta.ObjectMetaOptions{
		DropMalformedFields: true, ReturnUnknownFieldPaths: track})
	if err != nil {
		foundMeta = false
	}
	paths = append(paths, structuralpruning.PruneWithOptions(u.Object, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: track})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, s)
	_, embedded := schemaobjectmeta.CoerceWithOptions(nil, u.Object, s, false, schemaobjectmeta.CoerceOptions{
		DropInvalidFields: true, ReturnUnknownFieldPaths: track})
	paths = append(paths, embedded...)
	structuraldefaulting.Default(u.Object, s)
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	if foundMeta {
		_ = schemaobjectmeta.SetObjectMeta(u.Object, om)
	}
	return paths
}

// scaleStrategy reads and writes replicas at the paths the definition names.
func scaleStrategy(sc *apiext.CustomResourceSubresourceScale) *registry.ScaleStrategy {
	path := func(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }
	return &registry.ScaleStrategy{
		Get: func(obj runtime.Object) (int32, int32, string) {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return 0, 0, ""
			}
			spec, _, _ := unstructured.NestedInt64(u.Object, path(sc.SpecReplicasPath)...)
			status, _, _ := unstructured.NestedInt64(u.Object, path(sc.StatusReplicasPath)...)
			sel := ""
			if sc.LabelSelectorPath != nil {
				sel, _, _ = unstructured.NestedString(u.Object, path(*sc.LabelSelectorPath)...)
			}
			return int32(spec), int32(status), sel
		},
		Set: func(obj runtime.Object, replicas int32) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				_ = unstructured.SetNestedField(u.Object, int64(replicas), path(sc.SpecReplicasPath)...)
			}
		},
	}
}

// setColumns gives r the definition's printer columns (NAME and AGE when it has none),
// computed by upstream's table convertor.
func setColumns(r *registry.Resource, v apiextv1.CustomResourceDefinitionVersion) error {
	cols := v.AdditionalPrinterColumns
	if len(cols) == 0 {
		cols = []apiextv1.CustomResourceColumnDefinition{{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp",
			Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}}
	}
	conv, err := tableconvertor.New(cols)
	if err != nil {
		// As upstream, an unusable column falls back to the default table.
		return nil
	}
	probe := &unstructured.Unstructured{Object: map[string]interface{}{}}
	probe.SetName("probe")
	t, err := conv.ConvertToTable(context.Background(), probe, nil)
	if err != nil {
		return nil
	}
	r.Columns = t.ColumnDefinitions
	r.Row = func(obj runtime.Object, _ time.Time) []interface{} {
		t, err := conv.ConvertToTable(context.Background(), obj, nil)
		if err != nil || len(t.Rows) != 1 {
			cells := make([]interface{}, len(r.Columns))
			return cells
		}
		return t.Rows[0].Cells
	}
	return nil
}

func isTrue(crd *apiextv1.CustomResourceDefinition, t apiextv1.CustomResourceDefinitionConditionType) bool {
	c := regext.FindCondition(crd, t)
	return c != nil && c.Status == apiextv1.ConditionTrue
}

// typeConverter types crd's objects for managedFields and server-side apply with its
// versions' schemas (list types, map types, embedded resources), as kube-apiserver
// does; nil (objects' own shape) when the schemas cannot be built.
func typeConverter(crd *apiextv1.CustomResourceDefinition) managedfields.TypeConverter {
	var specs []*spec3.OpenAPI
	for _, v := range crd.Spec.Versions {
		s, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
		if err != nil {
			return nil
		}
		specs = append(specs, s)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil || merged.Components == nil {
		return nil
	}
	tc, err := managedfields.NewTypeConverter(merged.Components.Schemas, crd.Spec.PreserveUnknownFields)
	if err != nil {
		return nil
	}
	return tc
}
