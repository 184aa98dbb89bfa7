package openapi

import (
	"encoding/json"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/spec3"
	kubeproto "k8s.io/kube-openapi/pkg/util/proto"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/tranche/tranche/internal/registry"
)

func buildTestDocuments(t *testing.T) (*Documents, *spec.Swagger) {
	t.Helper()
	d, err := Build(testResources(), "v1.32.0-test")
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	var sw spec.Swagger
	if err := json.Unmarshal(d.V2JSON(), &sw); err != nil {
		t.Fatalf("v2 JSON does not parse: %v", err)
	}
	return d, &sw
}

func TestDefinitions(t *testing.T) {
	_, sw := buildTestDocuments(t)
	tests := []struct {
		name, def   string
		typ, format string
		descHas     string
		required    []string
	}{
		{name: "service", def: "io.k8s.api.core.v1.Service", typ: "object", descHas: "Service is a named abstraction"},
		{name: "service port", def: "io.k8s.api.core.v1.ServicePort", typ: "object", descHas: "ServicePort contains", required: []string{"port"}},
		{name: "deployment spec", def: "io.k8s.api.apps.v1.DeploymentSpec", typ: "object", required: []string{"selector", "template"}},
		{name: "list", def: "io.k8s.api.core.v1.ServiceList", typ: "object", required: []string{"items"}},
		{name: "object meta", def: "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", typ: "object", descHas: "ObjectMeta is metadata"},
		{name: "int or string", def: "io.k8s.apimachinery.pkg.util.intstr.IntOrString", typ: "string", format: "int-or-string", descHas: "IntOrString"},
		{name: "quantity", def: "io.k8s.apimachinery.pkg.api.resource.Quantity", typ: "string", descHas: "Quantity"},
		{name: "time", def: "io.k8s.apimachinery.pkg.apis.meta.v1.Time", typ: "string", format: "date-time"},
		{name: "raw extension", def: "io.k8s.apimachinery.pkg.runtime.RawExtension", typ: "object"},
		{name: "fields v1", def: "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1", typ: "object"},
		{name: "scale", def: "io.k8s.api.autoscaling.v1.Scale", typ: "object"},
		{name: "patch", def: "io.k8s.apimachinery.pkg.apis.meta.v1.Patch", typ: "object"},
		{name: "resource list", def: "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList", typ: "object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := sw.Definitions[tc.def]
			if !ok {
				t.Fatalf("no definition %s", tc.def)
			}
			if s.Description == "" || !strings.Contains(s.Description, tc.descHas) {
				t.Errorf("description = %q, want one containing %q", s.Description, tc.descHas)
			}
			if got := strings.Join(s.Type, ","); got != tc.typ || s.Format != tc.format {
				t.Errorf("type, format = %q, %q; want %q, %q", got, s.Format, tc.typ, tc.format)
			}
			for _, r := range tc.required {
				if !contains(s.Required, r) {
					t.Errorf("required = %q, want it to include %q", s.Required, r)
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func TestFieldSchemas(t *testing.T) {
	_, sw := buildTestDocuments(t)
	prop := func(def, field string) spec.Schema {
		t.Helper()
		p, ok := sw.Definitions[def].Properties[field]
		if !ok {
			t.Fatalf("%s has no property %s", def, field)
		}
		return p
	}
	tests := []struct {
		name       string
		schema     spec.Schema
		ref        string
		extensions map[string]interface{}
	}{
		{
			name:   "service ports patch by port, apply by port and protocol",
			schema: prop("io.k8s.api.core.v1.ServiceSpec", "ports"),
			extensions: map[string]interface{}{extPatchStrategy: "merge", extPatchMergeKey: "port",
				extListType: "map", extListMapKeys: []interface{}{"port", "protocol"}},
		},
		{
			name:       "containers merge by name",
			schema:     prop("io.k8s.api.core.v1.PodSpec", "containers"),
			extensions: map[string]interface{}{extPatchStrategy: "merge", extPatchMergeKey: "name", extListType: "map", extListMapKeys: []interface{}{"name"}},
		},
		{
			name:       "finalizers are a set",
			schema:     prop("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "finalizers"),
			extensions: map[string]interface{}{extPatchStrategy: "merge", extListType: "set"},
		},
		{
			name:       "plain lists are atomic",
			schema:     prop("io.k8s.api.core.v1.ServiceSpec", "externalIPs"),
			extensions: map[string]interface{}{extListType: "atomic"},
		},
		{
			name:   "metadata refers to ObjectMeta",
			schema: prop("io.k8s.api.core.v1.Service", "metadata"),
			ref:    "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
		},
		{
			name:   "inline TypeMeta is flattened",
			schema: prop("io.k8s.api.apps.v1.Deployment", "apiVersion"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.schema.Description == "" {
				t.Error("property has no description")
			}
			if got := tc.schema.Ref.String(); got != tc.ref {
				t.Errorf("$ref = %q, want %q", got, tc.ref)
			}
			for k, want := range tc.extensions {
				if diff := cmp.Diff(want, tc.schema.Extensions[k]); diff != "" {
					t.Errorf("%s (-want +got):\n%s", k, diff)
				}
			}
		})
	}
	if got := sw.Definitions["io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"].Extensions[extMapType]; got != "atomic" {
		t.Errorf("LabelSelector %s = %v, want atomic", extMapType, got)
	}
}

func TestGroupVersionKinds(t *testing.T) {
	_, sw := buildTestDocuments(t)
	tests := []struct {
		def  string
		want []interface{}
	}{
		{"io.k8s.api.core.v1.Service", []interface{}{map[string]interface{}{"group": "", "version": "v1", "kind": "Service"}}},
		{"io.k8s.api.core.v1.ServiceList", []interface{}{map[string]interface{}{"group": "", "version": "v1", "kind": "ServiceList"}}},
		{"io.k8s.api.apps.v1.Deployment", []interface{}{map[string]interface{}{"group": "apps", "version": "v1", "kind": "Deployment"}}},
		{"io.k8s.api.autoscaling.v1.Scale", []interface{}{map[string]interface{}{"group": "autoscaling", "version": "v1", "kind": "Scale"}}},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.Status", []interface{}{map[string]interface{}{"group": "", "version": "v1", "kind": "Status"}}},
	}
	for _, tc := range tests {
		t.Run(tc.def, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, sw.Definitions[tc.def].Extensions[extGVK]); diff != "" {
				t.Errorf("%s (-want +got):\n%s", extGVK, diff)
			}
		})
	}
	if n := len(sw.Definitions["io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"].Extensions[extGVK].([]interface{})); n != 3 {
		t.Errorf("DeleteOptions has %d GVKs, want one per group version (3)", n)
	}
}

func TestOperations(t *testing.T) {
	_, sw := buildTestDocuments(t)
	tests := []struct {
		path, method, id, action, kind string
		params                         []string
		consumes                       string
	}{
		{"/api/v1/namespaces/{namespace}/services/{name}", "get", "readCoreV1NamespacedService", "get", "Service", nil, "*/*"},
		{"/api/v1/namespaces/{namespace}/services/{name}", "put", "replaceCoreV1NamespacedService", "put", "Service",
			[]string{"body", "dryRun", "fieldManager", "fieldValidation"}, "*/*"},
		{"/api/v1/namespaces/{namespace}/services/{name}", "patch", "patchCoreV1NamespacedService", "patch", "Service",
			[]string{"body", "dryRun", "fieldManager", "fieldValidation", "force"}, "application/apply-patch+yaml"},
		{"/api/v1/namespaces/{namespace}/services/{name}", "delete", "deleteCoreV1NamespacedService", "delete", "Service",
			[]string{"body", "gracePeriodSeconds", "propagationPolicy", "orphanDependents"}, "*/*"},
		{"/api/v1/namespaces/{namespace}/services", "get", "listCoreV1NamespacedService", "list", "Service",
			[]string{"labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "resourceVersionMatch",
				"watch", "allowWatchBookmarks", "timeoutSeconds", "sendInitialEvents"}, "*/*"},
		{"/api/v1/namespaces/{namespace}/services", "post", "createCoreV1NamespacedService", "post", "Service",
			[]string{"body", "fieldValidation"}, "*/*"},
		{"/api/v1/namespaces/{namespace}/services", "delete", "deleteCoreV1CollectionNamespacedService", "deletecollection", "Service",
			[]string{"labelSelector", "gracePeriodSeconds"}, "*/*"},
		{"/api/v1/namespaces/{namespace}/services/{name}/status", "patch", "patchCoreV1NamespacedServiceStatus", "patch", "Service",
			[]string{"fieldValidation"}, "application/strategic-merge-patch+json"},
		{"/api/v1/services", "get", "listCoreV1ServiceForAllNamespaces", "list", "Service", []string{"watch"}, "*/*"},
		{"/api/v1/watch/namespaces/{namespace}/services", "get", "watchCoreV1NamespacedServiceList", "watchlist", "Service", nil, "*/*"},
		{"/api/v1/namespaces/{name}", "get", "readCoreV1Namespace", "get", "Namespace", nil, "*/*"},
		{"/api/v1/namespaces", "delete", "deleteCoreV1CollectionNamespace", "deletecollection", "Namespace", nil, "*/*"},
		{"/apis/apps/v1/namespaces/{namespace}/deployments", "get", "listAppsV1NamespacedDeployment", "list", "Deployment", nil, "*/*"},
		{"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale", "get", "readAppsV1NamespacedDeploymentScale", "get", "Scale", nil, "*/*"},
		{"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale", "patch", "patchAppsV1NamespacedDeploymentScale", "patch", "Scale",
			[]string{"fieldValidation"}, "application/json-patch+json"},
		{"/apis/authentication.k8s.io/v1/tokenreviews", "post", "createAuthenticationV1TokenReview", "post", "TokenReview",
			[]string{"fieldValidation"}, "*/*"},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			item, ok := sw.Paths.Paths[tc.path]
			if !ok {
				t.Fatalf("no path %s", tc.path)
			}
			op := map[string]*spec.Operation{"get": item.Get, "put": item.Put, "post": item.Post, "patch": item.Patch, "delete": item.Delete}[tc.method]
			if op == nil {
				t.Fatalf("no %s operation", tc.method)
			}
			if op.ID != tc.id {
				t.Errorf("operationId = %q, want %q", op.ID, tc.id)
			}
			if got := op.Extensions["x-kubernetes-action"]; got != tc.action {
				t.Errorf("x-kubernetes-action = %v, want %s", got, tc.action)
			}
			if gvk, _ := op.Extensions[extGVK].(map[string]interface{}); gvk["kind"] != tc.kind {
				t.Errorf("%s = %v, want kind %s", extGVK, op.Extensions[extGVK], tc.kind)
			}
			var names []string
			for _, p := range op.Parameters {
				names = append(names, p.Name)
			}
			for _, p := range tc.params {
				if !contains(names, p) {
					t.Errorf("parameters %q lack %q", names, p)
				}
			}
			if !contains(op.Consumes, tc.consumes) {
				t.Errorf("consumes %q, want it to include %q", op.Consumes, tc.consumes)
			}
		})
	}
	for _, absent := range []string{"/apis/authentication.k8s.io/v1/tokenreviews/{name}", "/apis/authentication.k8s.io/v1/watch/tokenreviews"} {
		if _, ok := sw.Paths.Paths[absent]; ok {
			t.Errorf("path %s served although TokenReview is create-only", absent)
		}
	}
	if item := sw.Paths.Paths["/apis/authentication.k8s.io/v1/tokenreviews"]; item.Get != nil || item.Delete != nil {
		t.Error("create-only TokenReview has list or deletecollection operations")
	}
}

func TestV2Protobuf(t *testing.T) {
	d, _ := buildTestDocuments(t)
	if _, err := openapi_v2.ParseDocument(d.V2JSON()); err != nil {
		t.Fatalf("gnostic does not parse the v2 JSON: %v", err)
	}
	var doc openapi_v2.Document
	if err := proto.Unmarshal(d.V2Protobuf(), &doc); err != nil {
		t.Fatalf("v2 protobuf does not unmarshal: %v", err)
	}
	// kubectl reads the protobuf through this parser (client-side validation, apply).
	models, err := kubeproto.NewOpenAPIData(&doc)
	if err != nil {
		t.Fatalf("kubectl's OpenAPI parser rejects the document: %v", err)
	}
	spec, ok := models.LookupModel("io.k8s.api.core.v1.ServiceSpec").(*kubeproto.Kind)
	if !ok {
		t.Fatal("ServiceSpec is not a kind")
	}
	if got := spec.Fields["ports"].GetExtensions()[extPatchMergeKey]; got != "port" {
		t.Errorf("ports %s = %v, want port", extPatchMergeKey, got)
	}
	if d.V2ETag() == "" || !strings.HasPrefix(d.V2ETag(), `"`) {
		t.Errorf("V2ETag = %q, want a quoted hash", d.V2ETag())
	}
}

func TestV3(t *testing.T) {
	d, _ := buildTestDocuments(t)
	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(d.V3Index(), &index); err != nil {
		t.Fatalf("index: %v", err)
	}
	want := []string{"api/v1", "apis/apps/v1", "apis/authentication.k8s.io/v1"}
	if len(index.Paths) != len(want) {
		t.Errorf("index has %d paths, want %q", len(index.Paths), want)
	}
	for _, gv := range want {
		t.Run(gv, func(t *testing.T) {
			data, hash, ok := d.V3(gv)
			if !ok {
				t.Fatalf("no document for %s", gv)
			}
			if got, want := index.Paths[gv].ServerRelativeURL, "/openapi/v3/"+gv+"?hash="+hash; got != want {
				t.Errorf("serverRelativeURL = %q, want %q", got, want)
			}
			var doc spec3.OpenAPI
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatalf("spec3 does not parse the document: %v", err)
			}
			var raw interface{}
			if err := json.Unmarshal(data, &raw); err != nil {
				t.Fatal(err)
			}
			for _, ref := range collectRefs(raw, nil) {
				name := strings.TrimPrefix(ref, "#/components/schemas/")
				if _, ok := doc.Components.Schemas[name]; !ok || name == ref {
					t.Errorf("$ref %s does not resolve", ref)
				}
			}
			pb, ok := d.V3Protobuf(gv)
			var pdoc openapi_v3.Document
			if !ok || proto.Unmarshal(pb, &pdoc) != nil {
				t.Errorf("v3 protobuf does not unmarshal")
			}
			for _, p := range doc.Paths.Paths {
				if p.Patch != nil && !hasQueryParam(p.Patch, "fieldValidation") {
					t.Errorf("PATCH %s lacks fieldValidation", p.Patch.OperationId)
				}
			}
		})
	}
	if _, _, ok := d.V3("apis/batch/v1"); ok {
		t.Error("a document for a group version with no resources")
	}

	data, _, _ := d.V3("api/v1")
	var doc spec3.OpenAPI
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	meta := doc.Components.Schemas["io.k8s.api.core.v1.Service"].Properties["metadata"]
	if len(meta.AllOf) != 1 || meta.AllOf[0].Ref.String() != "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" || meta.Description == "" {
		t.Errorf("Service.metadata = %+v, want allOf[$ref ObjectMeta] with a description", meta.SchemaProps)
	}
	ios := doc.Components.Schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
	if len(ios.OneOf) != 2 || ios.Format != "int-or-string" {
		t.Errorf("IntOrString = %+v, want oneOf integer, string", ios.SchemaProps)
	}
	if _, ok := doc.Components.Schemas["io.k8s.api.apps.v1.Deployment"]; ok {
		t.Error("api/v1 document carries apps/v1 schemas")
	}
}

// hasQueryParam reports what kubectl checks before leaving field validation to the server.
func hasQueryParam(op *spec3.Operation, name string) bool {
	for _, p := range op.Parameters {
		if p.Name == name && p.In == "query" {
			return true
		}
	}
	return false
}

func collectRefs(v interface{}, refs []string) []string {
	switch v := v.(type) {
	case map[string]interface{}:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "$ref" {
				refs = append(refs, s)
				continue
			}
			refs = collectRefs(e, refs)
		}
	case []interface{}:
		for _, e := range v {
			refs = collectRefs(e, refs)
		}
	}
	return refs
}

// badObject has a field no JSON schema can describe.
type badObject struct {
	metav1.TypeMeta `json:",inline"`
	Events          chan int `json:"events"`
}

func (b *badObject) DeepCopyObject() runtime.Object { return &badObject{TypeMeta: b.TypeMeta} }

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*registry.Resource)
		wantErr string
	}{
		{name: "no New", mutate: func(r *registry.Resource) { r.New = nil }, wantErr: "New and NewList are required"},
		{name: "undescribable field", mutate: func(r *registry.Resource) { r.New = func() runtime.Object { return &badObject{} } },
			wantErr: "field events: type chan int has no OpenAPI form"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := testResources()[0]
			tc.mutate(&r)
			_, err := Build([]registry.Resource{r}, "v")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Build error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
