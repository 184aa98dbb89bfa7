package registry

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Unstructured returns a resource with no Go type and no code of its own: objects are
// unstructured.Unstructured, the strategy is the generic handlers' (metadata rules
// only), the table is NAME, AGE. It is what a CustomResourceDefinition without a
// schema serves; hooks may be added to the returned value.
func Unstructured(gvk schema.GroupVersionKind, plural, singular string, namespaced bool) Resource {
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return Resource{
		GVK: gvk, Plural: plural, Singular: singular, Namespaced: namespaced,
		New: func() runtime.Object {
			u := &unstructured.Unstructured{Object: map[string]interface{}{}}
			u.SetAPIVersion(apiVersion)
			u.SetKind(kind)
			return u
		},
		NewList: func() runtime.Object {
			l := &unstructured.UnstructuredList{Object: map[string]interface{}{}}
			l.SetAPIVersion(apiVersion)
			l.SetKind(kind + "List")
			return l
		},
	}
}
