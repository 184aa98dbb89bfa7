package openapi

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/tranche/tranche/internal/registry"
)

// SchemaDefinitions returns the v3 definitions of the served kinds and of every type they
// refer to, each kind's carrying x-kubernetes-group-version-kind: the models server-side
// apply types objects with (k8s.io/apimachinery/pkg/util/managedfields.NewTypeConverter),
// the same schemas the documents publish, as kube-apiserver does.
func SchemaDefinitions(resources []registry.Resource) (map[string]*spec.Schema, error) {
	b := newSchemaBuilder()
	gvks := map[string][]interface{}{}
	seen := map[schema.GroupVersionKind]bool{}
	for i := range resources {
		r := &resources[i]
		if r.New == nil {
			return nil, fmt.Errorf("resource %s: New is required", r.GVR())
		}
		name, err := b.define(objectType(r.New()))
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", r.GVR(), err)
		}
		if !seen[r.GVK] {
			seen[r.GVK] = true
			gvks[name] = append(gvks[name], gvkExtension(r.GVK))
		}
	}
	out := make(map[string]*spec.Schema, len(b.defs))
	for name := range b.defs {
		s, ok := b.v3[name]
		if !ok {
			s = toV3Schema(b.defs[name])
		}
		if ext, ok := gvks[name]; ok {
			s.VendorExtensible = spec.VendorExtensible{Extensions: copyExtensions(s.Extensions)}
			s.AddExtension(extGVK, ext)
		}
		out[name] = &s
	}
	return out, nil
}

// copyExtensions returns a copy of e, so that adding to it leaves the original alone.
func copyExtensions(e spec.Extensions) spec.Extensions {
	out := make(spec.Extensions, len(e)+1)
	for k, v := range e {
		out[k] = v
	}
	return out
}
