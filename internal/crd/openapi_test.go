package crd

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/apiserver/openapi"
	"github.com/tranche/tranche/internal/registry/all"
)

// TestOpenAPIPublishesSchemas checks the documents gain a served definition's schema
// (merged into v2, a document of its own listed in the v3 index, as kube-apiserver
// publishes them) and lose it when it is no longer served, the built-in ones kept.
func TestOpenAPIPublishesSchemas(t *testing.T) {
	docs, err := openapi.Build(all.Resources(), apiserver.KubernetesVersion.GitVersion)
	if err != nil {
		t.Fatal(err)
	}
	o := NewOpenAPI(docs.Handler())
	get := func(path string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Accept", "application/json")
		rec := httptest.NewRecorder()
		o.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	crd := widgetCRD(func(c *apiextv1.CustomResourceDefinition) {
		c.Status.AcceptedNames = c.Spec.Names
		c.Status.AcceptedNames.ListKind = "WidgetList"
		c.Spec.Names.ListKind = "WidgetList"
		c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["color"] = apiextv1.JSONSchemaProps{Type: "string", Description: "the widget's colour"}
	})
	if err := o.update([]*apiextv1.CustomResourceDefinition{crd}); err != nil {
		t.Fatal(err)
	}
	code, v2 := get("/openapi/v2")
	if code != http.StatusOK || !strings.Contains(v2, `"com.example.v1.Widget"`) || !strings.Contains(v2, `"io.k8s.api.core.v1.Pod"`) || !strings.Contains(v2, "the widget's colour") {
		t.Fatalf("v2: %d, %d bytes, Widget %v Pod %v", code, len(v2), strings.Contains(v2, `"com.example.v1.Widget"`), strings.Contains(v2, `"io.k8s.api.core.v1.Pod"`))
	}
	_, index := get("/openapi/v3")
	var idx struct {
		Paths map[string]struct {
			URL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal([]byte(index), &idx); err != nil {
		t.Fatal(err)
	}
	if _, ok := idx.Paths["api/v1"]; !ok {
		t.Fatalf("v3 index lost the built-in documents: %s", index)
	}
	p, ok := idx.Paths["apis/example.com/v1"]
	if !ok || !strings.Contains(p.URL, "?hash=") {
		t.Fatalf("v3 index: %s", index)
	}
	code, doc := get(p.URL)
	if code != http.StatusOK || !strings.Contains(doc, `"com.example.v1.Widget"`) || !strings.Contains(doc, `"/apis/example.com/v1/namespaces/{namespace}/widgets"`) {
		t.Fatalf("v3 document: %d %.300s", code, doc)
	}
	// client-go's discovery reads v2 in protobuf.
	req := httptest.NewRequest(http.MethodGet, "/openapi/v2", nil)
	req.Header.Set("Accept", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
	rec := httptest.NewRecorder()
	o.ServeHTTP(rec, req)
	pb := &openapi_v2.Document{}
	if rec.Code != http.StatusOK || proto.Unmarshal(rec.Body.Bytes(), pb) != nil {
		t.Fatalf("v2 in protobuf: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	found := false
	for _, def := range pb.GetDefinitions().GetAdditionalProperties() {
		found = found || def.GetName() == "com.example.v1.Widget"
	}
	if !found {
		t.Fatal("v2 in protobuf lacks com.example.v1.Widget")
	}
	if err := o.update(nil); err != nil {
		t.Fatal(err)
	}
	if _, index := get("/openapi/v3"); strings.Contains(index, "example.com") {
		t.Fatalf("v3 index after the definition went: %s", index)
	}
}
