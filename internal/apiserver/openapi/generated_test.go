package openapi

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/registry"
)

// TestGeneratedDefinitions checks that the published schemas are openapi-gen's, carrying
// what reflection could not see: Service ports are a map keyed by port and protocol (two
// ports may share a number), and v2 has no defaults while v3 keeps them.
func TestGeneratedDefinitions(t *testing.T) {
	d, err := Build(clusterResources(), "v1.32.0-test")
	if err != nil {
		t.Fatal(err)
	}
	var v2 struct {
		Definitions map[string]map[string]json.RawMessage `json:"definitions"`
	}
	if err := json.Unmarshal(d.V2JSON(), &v2); err != nil {
		t.Fatal(err)
	}
	doc, _, _ := d.V3("api/v1")
	var v3 struct {
		Components struct {
			Schemas map[string]map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &v3); err != nil {
		t.Fatal(err)
	}
	for name, def := range map[string]map[string]map[string]json.RawMessage{"v2": v2.Definitions, "v3": v3.Components.Schemas} {
		var props map[string]map[string]interface{}
		if err := json.Unmarshal(def["io.k8s.api.core.v1.ServiceSpec"]["properties"], &props); err != nil {
			t.Fatalf("%s ServiceSpec: %v", name, err)
		}
		if diff := cmp.Diff([]interface{}{"port", "protocol"}, props["ports"][extListMapKeys]); diff != "" {
			t.Errorf("%s ServiceSpec.ports %s (-want +got):\n%s", name, extListMapKeys, diff)
		}
		if got := props["ports"][extPatchMergeKey]; got != "port" {
			t.Errorf("%s ServiceSpec.ports %s = %v, want port", name, extPatchMergeKey, got)
		}
		if err := json.Unmarshal(def["io.k8s.api.core.v1.Service"]["properties"], &props); err != nil {
			t.Fatalf("%s Service: %v", name, err)
		}
		_, hasDefault := props["spec"]["default"]
		if hasDefault != (name == "v3") {
			t.Errorf("%s Service.spec has a default: %v, want %v (kube-apiserver prunes v2 defaults)", name, hasDefault, name == "v3")
		}
	}
	var gvk []map[string]string
	if err := json.Unmarshal(v3.Components.Schemas["io.k8s.api.core.v1.Service"][extGVK], &gvk); err != nil || len(gvk) != 1 || gvk[0]["kind"] != "Service" {
		t.Errorf("v3 Service %s = %v (%v), want the Service kind", extGVK, gvk, err)
	}
}

// ownObject is a kind with no generated definition.
type ownObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Size              int32 `json:"size"`
}

func (o *ownObject) DeepCopyObject() runtime.Object { c := *o; return &c }

// TestReflectionFallback checks that a type openapi-gen did not cover is still described,
// under its own name rather than that of the metav1.TypeMeta it embeds.
func TestReflectionFallback(t *testing.T) {
	r := makeResource(schema.GroupVersionKind{Group: "example.tranche.io", Version: "v1", Kind: "Own"}, "owns", &ownObject{}, &ownObject{}, nil)
	d, err := Build([]registry.Resource{r}, "v")
	if err != nil {
		t.Fatal(err)
	}
	var v2 struct {
		Definitions map[string]struct {
			Properties map[string]interface{} `json:"properties"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(d.V2JSON(), &v2); err != nil {
		t.Fatal(err)
	}
	own, ok := v2.Definitions["com.github.tranche.tranche.internal.apiserver.openapi.ownObject"]
	if !ok || own.Properties["size"] == nil {
		t.Errorf("no reflected definition of ownObject with its size field: %v", own)
	}
	if _, ok := v2.Definitions["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]; !ok {
		t.Error("ObjectMeta, which ownObject refers to, is not defined")
	}
}

// TestServedTypesAreGenerated checks that every definition of the served resources comes
// from openapi-gen, none from the reflection fallback: a type missing here means its
// package is missing from hack/update-openapi.sh.
func TestServedTypesAreGenerated(t *testing.T) {
	b := newSchemaBuilder()
	for _, r := range clusterResources() {
		for _, obj := range []runtime.Object{r.New(), r.NewList()} {
			if _, err := b.define(objectType(obj)); err != nil {
				t.Fatalf("%s: %v", r.GVR(), err)
			}
		}
	}
	for name := range b.defs {
		if _, ok := b.gen[name]; !ok {
			t.Errorf("%s is described by reflection, not generated", name)
		}
	}
	if len(b.defs) < 100 {
		t.Errorf("only %d definitions", len(b.defs))
	}
}
