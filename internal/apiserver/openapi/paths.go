package openapi

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/registry"
)

// param is a path or query parameter, rendered into v2 and v3 form.
type param struct {
	name, in, description, typ string
	required                   bool
}

// response is one status code of an operation and the definition it returns.
type response struct {
	code int
	def  string
}

// operation is one HTTP method on a path, independent of the OpenAPI version.
type operation struct {
	method      string // get, put, post, patch, delete
	id          string
	description string
	tag         string
	action      string // x-kubernetes-action
	gvk         schema.GroupVersionKind
	query       []param
	body        string // definition of the request body; "" for none
	bodyNeeded  bool
	patch       bool // the body is a patch in one of the patch media types
	stream      bool // the response can be a watch stream
	responses   []response
}

// pathItem is one URL path with its path-level parameters and operations.
type pathItem struct {
	path   string
	params []param
	ops    []operation
}

// Media types, as Kubernetes lists them on its operations.
var (
	producesObject = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}
	producesStream = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf",
		"application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch"}
	patchTypes = []string{"application/json-patch+json", "application/merge-patch+json",
		"application/strategic-merge-patch+json", "application/apply-patch+yaml"}
)

// Names of the meta definitions operations refer to.
var (
	statusDef        = modelName(reflect.TypeOf(metav1.Status{}))
	deleteOptionsDef = modelName(reflect.TypeOf(metav1.DeleteOptions{}))
	watchEventDef    = modelName(reflect.TypeOf(metav1.WatchEvent{}))
	patchDef         = modelName(reflect.TypeOf(metav1.Patch{}))
	scaleDef         = modelName(reflect.TypeOf(autoscalingv1.Scale{}))
	scaleGVK         = autoscalingv1.SchemeGroupVersion.WithKind("Scale")
)

// queryParams holds the query parameters, with descriptions taken from the option types'
// documentation the way Kubernetes derives them.
type queryParams struct {
	list, create, update, patch, delete, deleteCollection []param
}

func newQueryParams() (queryParams, error) {
	pick := func(obj interface{}, names ...string) ([]param, error) {
		t := reflect.TypeOf(obj)
		doc := swaggerDoc(t)
		var out []param
		for _, n := range names {
			f, ok := jsonField(t, n)
			if !ok {
				return nil, fmt.Errorf("%s has no field %q", t, n)
			}
			out = append(out, param{name: n, in: "query", description: doc[n], typ: paramType(f.Type)})
		}
		return out, nil
	}
	var q queryParams
	var err error
	listNames := []string{"allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit",
		"resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch"}
	if q.list, err = pick(metav1.ListOptions{}, listNames...); err != nil {
		return q, err
	}
	if q.create, err = pick(metav1.CreateOptions{}, "dryRun", "fieldManager", "fieldValidation"); err != nil {
		return q, err
	}
	if q.update, err = pick(metav1.UpdateOptions{}, "dryRun", "fieldManager", "fieldValidation"); err != nil {
		return q, err
	}
	if q.patch, err = pick(metav1.PatchOptions{}, "dryRun", "fieldManager", "fieldValidation", "force"); err != nil {
		return q, err
	}
	deleteNames := []string{"dryRun", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential",
		"orphanDependents", "propagationPolicy"}
	if q.delete, err = pick(metav1.DeleteOptions{}, deleteNames...); err != nil {
		return q, err
	}
	listForDelete, err := pick(metav1.ListOptions{}, "continue", "fieldSelector", "labelSelector", "limit",
		"resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds")
	if err != nil {
		return q, err
	}
	q.deleteCollection = append(append([]param{}, q.delete...), listForDelete...)
	return q, nil
}

// jsonField finds the field of struct t serialised under name, looking into inline structs.
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		n, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if n == name {
			return f, true
		}
		if n == "" && (f.Anonymous || hasOpt(opts, "inline")) && f.Type.Kind() == reflect.Struct {
			if sub, ok := jsonField(f.Type, name); ok {
				return sub, true
			}
		}
	}
	return reflect.StructField{}, false
}

// paramType is the OpenAPI type of a query parameter of Go type t; repeated parameters
// (dryRun) are strings, as Kubernetes publishes them.
func paramType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "integer"
	}
	return "string"
}

var prettyParam = param{name: "pretty", in: "query", typ: "string",
	description: "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget)."}

func namespaceParam() param {
	return param{name: "namespace", in: "path", typ: "string", required: true,
		description: "object name and auth scope, such as for teams and projects"}
}

func nameParam(what string) param {
	return param{name: "name", in: "path", typ: "string", required: true, description: "name of the " + what}
}

// operationID converts s into the camel case Kubernetes uses in operation ids and tags:
// every run of characters that are not letters or digits starts a new word.
func operationID(s string, upperFirst bool) string {
	var b strings.Builder
	upper := upperFirst
	for i, r := range s {
		if unicode.IsLetter(r) || r == '_' || (i != 0 && unicode.IsDigit(r)) {
			if upper {
				r = unicode.ToUpper(r)
				upper = false
			}
			b.WriteRune(r)
		} else {
			upper = true
		}
	}
	return b.String()
}

// groupWord is the group's name in operation ids: "core" for the legacy group, the group
// without its ".k8s.io" suffix otherwise.
func groupWord(group string) string {
	if group == "" {
		return "core"
	}
	return strings.TrimSuffix(group, ".k8s.io")
}

// gvPath returns the URL prefix of a group version and its key in the v3 index.
func gvPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// resourcePaths returns the paths Kubernetes serves for one resource.
func resourcePaths(r *registry.Resource, kindDef, listDef string, q queryParams) []pathItem {
	gvk := r.GVK
	gvWord := operationID(groupWord(gvk.Group), true) + operationID(gvk.Version, true)
	tag := operationID(groupWord(gvk.Group), false) + "_" + gvk.Version
	prefix := "/" + gvPath(gvk.GroupVersion())
	kind := gvk.Kind
	scope, nsPath := "", ""
	var scopeParams []param
	if r.Namespaced {
		scope, nsPath = "Namespaced", "/namespaces/{namespace}"
		scopeParams = []param{namespaceParam()}
	}
	itemParams := append([]param{nameParam(kind)}, scopeParams...)
	itemParams = append(itemParams, prettyParam)
	collParams := append(append([]param{}, scopeParams...), prettyParam)
	mk := func(method, verb, rest, action, desc string) operation {
		return operation{method: method, id: verb + gvWord + rest, description: desc, tag: tag, action: action, gvk: gvk}
	}

	var coll, item []operation
	if r.HasVerb("list") {
		o := mk("get", "list", scope+kind, "list", "list or watch objects of kind "+kind)
		o.query, o.stream, o.responses = q.list, true, []response{{200, listDef}}
		coll = append(coll, o)
	}
	if r.HasVerb("create") {
		o := mk("post", "create", scope+kind, "post", "create a "+kind)
		o.query, o.body, o.bodyNeeded = q.create, kindDef, true
		o.responses = []response{{200, kindDef}, {201, kindDef}, {202, kindDef}}
		coll = append(coll, o)
	}
	if r.HasVerb("deletecollection") {
		o := mk("delete", "delete", "Collection"+scope+kind, "deletecollection", "delete collection of "+kind)
		o.query, o.body, o.responses = q.deleteCollection, deleteOptionsDef, []response{{200, statusDef}}
		coll = append(coll, o)
	}
	if r.HasVerb("get") {
		o := mk("get", "read", scope+kind, "get", "read the specified "+kind)
		o.responses = []response{{200, kindDef}}
		item = append(item, o)
	}
	if r.HasVerb("update") {
		o := mk("put", "replace", scope+kind, "put", "replace the specified "+kind)
		o.query, o.body, o.bodyNeeded = q.update, kindDef, true
		o.responses = []response{{200, kindDef}, {201, kindDef}}
		item = append(item, o)
	}
	if r.HasVerb("patch") {
		o := mk("patch", "patch", scope+kind, "patch", "partially update the specified "+kind)
		o.query, o.body, o.bodyNeeded, o.patch = q.patch, patchDef, true, true
		o.responses = []response{{200, kindDef}, {201, kindDef}}
		item = append(item, o)
	}
	if r.HasVerb("delete") {
		o := mk("delete", "delete", scope+kind, "delete", "delete a "+kind)
		o.query, o.body = q.delete, deleteOptionsDef
		o.responses = []response{{200, statusDef}, {202, statusDef}}
		item = append(item, o)
	}

	base := prefix + nsPath + "/" + r.Plural
	var out []pathItem
	if len(coll) > 0 {
		out = append(out, pathItem{path: base, params: collParams, ops: coll})
	}
	if len(item) > 0 {
		out = append(out, pathItem{path: base + "/{name}", params: itemParams, ops: item})
	}
	if r.Status != nil {
		out = appendPath(out, subresourcePath(r, base, "status", kindDef, gvk, itemParams, q, mk))
	}
	if r.Scale != nil {
		out = appendPath(out, subresourcePath(r, base, "scale", scaleDef, scaleGVK, itemParams, q, mk))
	}
	for _, name := range slices.Sorted(maps.Keys(r.Subresources)) {
		out = appendPath(out, subresourcePath(r, base, name, kindDef, gvk, itemParams, q, mk))
	}
	if r.Namespaced && r.HasVerb("list") {
		o := mk("get", "list", kind+"ForAllNamespaces", "list", "list or watch objects of kind "+kind)
		o.query, o.stream, o.responses = q.list, true, []response{{200, listDef}}
		out = append(out, pathItem{path: prefix + "/" + r.Plural, params: []param{prettyParam}, ops: []operation{o}})
	}
	if r.HasVerb("watch") {
		const deprecated = ". deprecated: use the 'watch' parameter with a list operation instead"
		watchList := mk("get", "watch", scope+kind+"List", "watchlist", "watch individual changes to a list of "+kind+deprecated+".")
		watchList.query, watchList.stream, watchList.responses = q.list, true, []response{{200, watchEventDef}}
		watchOne := mk("get", "watch", scope+kind, "watch", "watch changes to an object of kind "+kind+deprecated+
			", filtered to a single item with the 'fieldSelector' parameter.")
		watchOne.query, watchOne.stream, watchOne.responses = q.list, true, []response{{200, watchEventDef}}
		watchBase := prefix + "/watch" + nsPath + "/" + r.Plural
		out = append(out,
			pathItem{path: watchBase, params: collParams, ops: []operation{watchList}},
			pathItem{path: watchBase + "/{name}", params: itemParams, ops: []operation{watchOne}})
		if r.Namespaced {
			all := mk("get", "watch", kind+"ListForAllNamespaces", "watchlist", "watch individual changes to a list of "+kind+deprecated+".")
			all.query, all.stream, all.responses = q.list, true, []response{{200, watchEventDef}}
			out = append(out, pathItem{path: prefix + "/watch/" + r.Plural, params: []param{prettyParam}, ops: []operation{all}})
		}
	}
	return out
}

// appendPath appends p unless the resource's verbs left it without operations.
func appendPath(paths []pathItem, p pathItem) []pathItem {
	if len(p.ops) == 0 {
		return paths
	}
	return append(paths, p)
}

// subresourcePath is the get/put/patch path of the status, scale or another
// subresource (registry.Resource.Subresources).
func subresourcePath(r *registry.Resource, base, sub, def string, gvk schema.GroupVersionKind, params []param, q queryParams,
	mk func(method, verb, rest, action, desc string) operation) pathItem {
	scope := ""
	if r.Namespaced {
		scope = "Namespaced"
	}
	rest := scope + r.GVK.Kind + operationID(sub, true)
	what := sub + " of the specified " + r.GVK.Kind
	var ops []operation
	if r.HasVerb("get") {
		o := mk("get", "read", rest, "get", "read "+what)
		o.gvk, o.responses = gvk, []response{{200, def}}
		ops = append(ops, o)
	}
	if r.HasVerb("update") {
		o := mk("put", "replace", rest, "put", "replace "+what)
		o.gvk, o.query, o.body, o.bodyNeeded = gvk, q.update, def, true
		o.responses = []response{{200, def}, {201, def}}
		ops = append(ops, o)
	}
	if r.HasVerb("patch") {
		o := mk("patch", "patch", rest, "patch", "partially update "+what)
		o.gvk, o.query, o.body, o.bodyNeeded, o.patch = gvk, q.patch, patchDef, true, true
		o.responses = []response{{200, def}, {201, def}}
		ops = append(ops, o)
	}
	return pathItem{path: base + "/{name}/" + sub, params: params, ops: ops}
}

// gvkExtension is the value of x-kubernetes-group-version-kind for one GVK, in the shape
// kubectl compares (a map with group, kind and version).
func gvkExtension(gvk schema.GroupVersionKind) map[string]interface{} {
	return map[string]interface{}{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}
}
