package openapi

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Extension keys Kubernetes puts on schemas.
const (
	extGVK           = "x-kubernetes-group-version-kind"
	extPatchStrategy = "x-kubernetes-patch-strategy"
	extPatchMergeKey = "x-kubernetes-patch-merge-key"
	extListType      = "x-kubernetes-list-type"
	extListMapKeys   = "x-kubernetes-list-map-keys"
	extMapType       = "x-kubernetes-map-type"
)

// v2RefPrefix is where v2 keeps named schemas; v3 documents are derived from v2 schemas by
// rewriting this prefix (see toV3Schema).
const v2RefPrefix = "#/definitions/"

// atomicStructs are the types k8s.io/api and apimachinery mark +structType=atomic: a client
// replaces them whole in server-side apply, so Kubernetes publishes x-kubernetes-map-type.
// Reflection cannot see the marker comments, hence this table.
var atomicStructs = map[string]bool{
	"io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector":  true,
	"io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference": true,
	"io.k8s.api.core.v1.ConfigMapKeySelector":             true,
	"io.k8s.api.core.v1.LocalObjectReference":             true,
	"io.k8s.api.core.v1.NodeSelector":                     true,
	"io.k8s.api.core.v1.NodeSelectorTerm":                 true,
	"io.k8s.api.core.v1.ObjectFieldSelector":              true,
	"io.k8s.api.core.v1.ObjectReference":                  true,
	"io.k8s.api.core.v1.ResourceFieldSelector":            true,
	"io.k8s.api.core.v1.SecretKeySelector":                true,
	"io.k8s.api.core.v1.SecretReference":                  true,
	"io.k8s.api.core.v1.TopologySelectorTerm":             true,
	"io.k8s.api.core.v1.TypedLocalObjectReference":        true,
	"io.k8s.api.rbac.v1.RoleRef":                          true,
	"io.k8s.api.rbac.v1.Subject":                          true,
	"io.k8s.api.networking.v1.ServiceBackendPort":         true,
}

// typeDescriptions describe the apimachinery types whose documentation lives only in Go
// comments (they have no SwaggerDoc method).
var typeDescriptions = map[string]string{
	"io.k8s.apimachinery.pkg.api.resource.Quantity": "Quantity is a fixed-point representation of a number, serialised as a string " +
		"with an optional suffix: binary SI (Ki, Mi, Gi, Ti, Pi, Ei), decimal SI (n, u, m, \"\", k, M, G, T, P, E) " +
		"or a decimal exponent (e3, E-6). Examples: 500m, 1.5Gi, 2.",
	"io.k8s.apimachinery.pkg.apis.meta.v1.Time":      "Time is a timestamp serialised in RFC 3339 form with second precision, e.g. 2024-01-02T15:04:05Z.",
	"io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": "MicroTime is a timestamp serialised in RFC 3339 form with microsecond precision.",
	"io.k8s.apimachinery.pkg.apis.meta.v1.Duration":  "Duration is a time span serialised as a Go duration string, e.g. 1h30m or 15s.",
	"io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent": "WatchEvent is one event of a watch stream: its type " +
		"(ADDED, MODIFIED, DELETED, BOOKMARK or ERROR) and the object concerned.",
	"io.k8s.apimachinery.pkg.runtime.RawExtension": "RawExtension holds a complete embedded object (with its own apiVersion " +
		"and kind) whose type the enclosing object does not fix.",
	"io.k8s.apimachinery.pkg.util.intstr.IntOrString": "IntOrString holds either an integer or a string; in JSON and YAML it " +
		"is written as whichever of the two it holds, so a field can take a number (8080) or a name (http).",
}

// Go types whose JSON form is not their struct layout.
var (
	rawExtensionType = reflect.TypeOf(runtime.RawExtension{})
	fieldsV1Type     = reflect.TypeOf(metav1.FieldsV1{})
)

// schemaBuilder turns Go types into named v2 schemas. It is used by one Build call only.
type schemaBuilder struct {
	// defs holds the v2 schema of every named type reached so far.
	defs map[string]spec.Schema
	// v3 holds the v3 form of definitions whose v3 schema is not a rewrite of the v2 one
	// (IntOrString and Quantity are oneOf in v3, plain strings in v2).
	v3 map[string]spec.Schema
	// names caches the definition name of each Go type; a name is present before its
	// schema is complete so that recursive types terminate.
	names map[reflect.Type]string
}

// newSchemaBuilder returns a builder with no definitions.
func newSchemaBuilder() *schemaBuilder {
	return &schemaBuilder{
		defs:  map[string]spec.Schema{},
		v3:    map[string]spec.Schema{},
		names: map[reflect.Type]string{},
	}
}

// modelName returns the definition name Kubernetes gives a named Go type: the type's
// OpenAPIModelName when it has one, else its package path with the domain reversed
// ("k8s.io/api/core/v1".Service → "io.k8s.api.core.v1.Service").
func modelName(t reflect.Type) string {
	if n, ok := reflect.New(t).Elem().Interface().(interface{ OpenAPIModelName() string }); ok {
		return n.OpenAPIModelName()
	}
	parts := strings.Split(t.PkgPath(), "/")
	domain := strings.Split(parts[0], ".")
	for i, j := 0, len(domain)-1; i < j; i, j = i+1, j-1 {
		domain[i], domain[j] = domain[j], domain[i]
	}
	parts[0] = strings.Join(domain, ".")
	name := strings.Join(parts, ".") + "." + t.Name()
	return strings.NewReplacer("/", ".", "-", "_").Replace(name)
}

// swaggerDoc returns the field descriptions of t ("" is the type's own), or nil.
func swaggerDoc(t reflect.Type) map[string]string {
	if d, ok := reflect.New(t).Elem().Interface().(interface{ SwaggerDoc() map[string]string }); ok {
		return d.SwaggerDoc()
	}
	return nil
}

// define makes sure t (a named struct type) has a definition and returns its name.
func (b *schemaBuilder) define(t reflect.Type) (string, error) {
	if name, ok := b.names[t]; ok {
		return name, nil
	}
	name := modelName(t)
	b.names[t] = name
	doc := swaggerDoc(t)
	s := spec.Schema{SchemaProps: spec.SchemaProps{Description: doc[""]}}
	if s.Description == "" {
		s.Description = typeDescriptions[name]
	}
	value := reflect.New(t).Elem().Interface()
	switch {
	case t == rawExtensionType || t == fieldsV1Type:
		s.Type = spec.StringOrArray{"object"}
	case hasSchemaType(value):
		s.Type = value.(interface{ OpenAPISchemaType() []string }).OpenAPISchemaType()
		if f, ok := value.(interface{ OpenAPISchemaFormat() string }); ok {
			s.Format = f.OpenAPISchemaFormat()
		}
		if oneOf, ok := value.(interface{ OpenAPIV3OneOfTypes() []string }); ok {
			v3 := spec.Schema{SchemaProps: spec.SchemaProps{Description: s.Description, Format: s.Format}}
			for _, typ := range oneOf.OpenAPIV3OneOfTypes() {
				v3.OneOf = append(v3.OneOf, spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}}})
			}
			b.v3[name] = v3
		}
	default:
		s.Type = spec.StringOrArray{"object"}
		if err := b.addFields(&s, t, doc); err != nil {
			return "", fmt.Errorf("definition %s: %w", name, err)
		}
		if atomicStructs[name] {
			s.AddExtension(extMapType, "atomic")
		}
	}
	b.defs[name] = s
	return name, nil
}

func hasSchemaType(v interface{}) bool {
	_, ok := v.(interface{ OpenAPISchemaType() []string })
	return ok
}

// addFields adds the JSON fields of struct type t to s, flattening embedded and
// json:",inline" structs the way encoding/json does.
func (b *schemaBuilder) addFields(s *spec.Schema, t reflect.Type, doc map[string]string) error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && (f.Anonymous && name == "" || hasOpt(opts, "inline")) {
			if err := b.addFields(s, ft, swaggerDoc(ft)); err != nil {
				return err
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if !hasTag || name == "" {
			name = f.Name
		}
		prop, err := b.schemaOf(f.Type)
		if err != nil {
			return fmt.Errorf("field %s: %w", name, err)
		}
		prop.Description = doc[name]
		addPatchExtensions(&prop, f)
		if s.Properties == nil {
			s.Properties = map[string]spec.Schema{}
		}
		s.Properties[name] = prop
		if !hasOpt(opts, "omitempty") && !hasOpt(opts, "omitzero") {
			s.Required = append(s.Required, name)
		}
	}
	sort.Strings(s.Required)
	return nil
}

func hasOpt(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// addPatchExtensions publishes the strategic-merge-patch tags of a field, and the list type
// server-side apply uses: a list with a merge key is a map keyed by it, a merged list of
// scalars is a set, any other list is replaced whole.
func addPatchExtensions(prop *spec.Schema, f reflect.StructField) {
	strategy := f.Tag.Get("patchStrategy")
	key := f.Tag.Get("patchMergeKey")
	if strategy != "" {
		prop.AddExtension(extPatchStrategy, strategy)
	}
	if key != "" {
		prop.AddExtension(extPatchMergeKey, key)
	}
	if prop.Items == nil {
		return
	}
	switch {
	case key != "":
		prop.AddExtension(extListType, "map")
		prop.AddExtension(extListMapKeys, []interface{}{key})
	case strings.Contains(strategy, "merge"):
		prop.AddExtension(extListType, "set")
	default:
		prop.AddExtension(extListType, "atomic")
	}
}

// schemaOf returns the schema of a value of type t: a $ref for named structs, an inline
// schema for everything else.
func (b *schemaBuilder) schemaOf(t reflect.Type) (spec.Schema, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if t.Name() == "" {
			s := spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}}
			return s, b.addFields(&s, t, nil)
		}
		name, err := b.define(t)
		if err != nil {
			return spec.Schema{}, err
		}
		return refSchema(name), nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return typed("string", "byte"), nil
		}
		items, err := b.schemaOf(t.Elem())
		if err != nil {
			return spec.Schema{}, err
		}
		s := typed("array", "")
		s.Items = &spec.SchemaOrArray{Schema: &items}
		return s, nil
	case reflect.Map:
		values, err := b.schemaOf(t.Elem())
		if err != nil {
			return spec.Schema{}, err
		}
		s := typed("object", "")
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: &values}
		return s, nil
	case reflect.Interface:
		return typed("object", ""), nil
	}
	typ, format := common.OpenAPITypeFormat(t.Kind().String())
	if typ == "" {
		return spec.Schema{}, fmt.Errorf("type %s has no OpenAPI form", t)
	}
	return typed(typ, format), nil
}

func typed(typ, format string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}, Format: format}}
}

func refSchema(name string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(v2RefPrefix + name)}}
}

// refName returns the definition a schema refers to, or "".
func refName(s *spec.Schema) string {
	ref := s.Ref.String()
	if ref == "" {
		return ""
	}
	return ref[strings.LastIndex(ref, "/")+1:]
}

// closure returns the names of the definitions reachable from roots, sorted.
func closure(defs map[string]spec.Schema, roots []string) []string {
	seen := map[string]bool{}
	var visit func(s *spec.Schema)
	var visitName func(name string)
	visitName = func(name string) {
		if name == "" || seen[name] {
			return
		}
		seen[name] = true
		if d, ok := defs[name]; ok {
			visit(&d)
		}
	}
	visit = func(s *spec.Schema) {
		visitName(refName(s))
		for _, p := range s.Properties {
			visit(&p)
		}
		if s.Items != nil && s.Items.Schema != nil {
			visit(s.Items.Schema)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			visit(s.AdditionalProperties.Schema)
		}
		for i := range s.AllOf {
			visit(&s.AllOf[i])
		}
	}
	for _, r := range roots {
		visitName(r)
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// toV3Schema rewrites a v2 schema into Kubernetes' v3 form: references point into
// components/schemas, and a reference with siblings (a field's description) is wrapped in
// allOf because OpenAPI 3.0 ignores siblings of $ref.
func toV3Schema(s spec.Schema) spec.Schema {
	if name := refName(&s); name != "" {
		ref := spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(v3RefPrefix + name)}}
		s.Ref = spec.Ref{}
		if s.Description == "" && len(s.Extensions) == 0 {
			return ref
		}
		s.AllOf = []spec.Schema{ref}
		return s
	}
	if s.Properties != nil {
		props := make(map[string]spec.Schema, len(s.Properties))
		for k, p := range s.Properties {
			props[k] = toV3Schema(p)
		}
		s.Properties = props
	}
	if s.Items != nil && s.Items.Schema != nil {
		items := toV3Schema(*s.Items.Schema)
		s.Items = &spec.SchemaOrArray{Schema: &items}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		values := toV3Schema(*s.AdditionalProperties.Schema)
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: &values}
	}
	return s
}

// v3RefPrefix is where v3 keeps named schemas.
const v3RefPrefix = "#/components/schemas/"
