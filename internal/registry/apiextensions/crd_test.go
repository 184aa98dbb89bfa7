package apiextensions

import (
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func makeCRD(mutate func(*apiextv1.CustomResourceDefinition)) *apiextv1.CustomResourceDefinition {
	crd := &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"},
			Scope: apiextv1.NamespaceScoped,
			Versions: []apiextv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{"size": {Type: "integer"}}},
					},
				}},
			}},
		},
	}
	if mutate != nil {
		mutate(crd)
	}
	return crd
}

// TestCustomResourceDefinitionStrategy runs the resource's hooks in the handlers' order
// and checks upstream's defaulting, strategy and validation come through the v1 ↔
// internal conversion: defaults filled, status cleared on create with the storage
// version recorded, the errors kube-apiserver gives with their field paths.
func TestCustomResourceDefinitionStrategy(t *testing.T) {
	res := CustomResourceDefinitionResource()
	create := func(crd *apiextv1.CustomResourceDefinition) []string {
		res.PrepareForCreate(crd)
		res.Default(crd)
		var out []string
		for _, e := range res.Validate(crd) {
			out = append(out, e.Error())
		}
		return out
	}

	crd := makeCRD(func(c *apiextv1.CustomResourceDefinition) {
		c.Status.AcceptedNames.Kind = "Stale"
	})
	if errs := create(crd); len(errs) != 0 {
		t.Fatalf("valid definition refused: %v", errs)
	}
	if crd.Spec.Names.Singular != "widget" || crd.Spec.Names.ListKind != "WidgetList" || crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextv1.NoneConverter {
		t.Fatalf("defaults not applied: names %+v, conversion %+v", crd.Spec.Names, crd.Spec.Conversion)
	}
	if crd.Status.AcceptedNames.Kind != "" || len(crd.Status.StoredVersions) != 1 || crd.Status.StoredVersions[0] != "v1" {
		t.Fatalf("status after create: %+v", crd.Status)
	}

	for _, tc := range []struct {
		name   string
		mutate func(*apiextv1.CustomResourceDefinition)
		want   string
	}{
		{"name not plural.group", func(c *apiextv1.CustomResourceDefinition) { c.Name = "gadgets.example.com" },
			`metadata.name: Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group`},
		{"no storage version", func(c *apiextv1.CustomResourceDefinition) { c.Spec.Versions[0].Storage = false },
			"must have exactly one version marked as storage version"},
		{"schema without type", func(c *apiextv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = apiextv1.JSONSchemaProps{}
		}, // kube-apiserver reports a schema all versions share at spec.validation, where
			// the internal type keeps it.
			"spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"},
		{"bad scope", func(c *apiextv1.CustomResourceDefinition) { c.Spec.Scope = "Galaxy" },
			`spec.scope: Unsupported value: "Galaxy"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := create(makeCRD(tc.mutate))
			if !strings.Contains(strings.Join(errs, "\n"), tc.want) {
				t.Fatalf("errors %q, want one containing %q", errs, tc.want)
			}
		})
	}

	t.Run("update bumps generation on spec changes only", func(t *testing.T) {
		old := makeCRD(nil)
		create(old)
		old.Generation = 1
		n := old.DeepCopy()
		n.Status.Conditions = []apiextv1.CustomResourceDefinitionCondition{{Type: apiextv1.Established, Status: apiextv1.ConditionTrue}}
		res.PrepareForUpdate(n, old)
		if n.Generation != 1 || len(n.Status.Conditions) != 0 {
			t.Fatalf("a status change through the object: generation %d, conditions %v", n.Generation, n.Status.Conditions)
		}
		n.Spec.Names.ShortNames = []string{"wd"}
		res.PrepareForUpdate(n, old)
		if n.Generation != 2 {
			t.Fatalf("spec change: generation %d, want 2", n.Generation)
		}
	})

	t.Run("deletion adds the cleanup finalizer and Terminating", func(t *testing.T) {
		crd := makeCRD(nil)
		if !res.Delete.Finalizing(crd) {
			t.Fatal("a definition not yet deleting does not wait")
		}
		if !res.Delete.MarkDeleting(crd) || res.Delete.MarkDeleting(crd) {
			t.Fatal("MarkDeleting changed nothing the first time or something the second")
		}
		c := FindCondition(crd, apiextv1.Terminating)
		if len(crd.Finalizers) != 1 || crd.Finalizers[0] != CleanupFinalizer || c == nil || c.Reason != "InstanceDeletionPending" {
			t.Fatalf("finalizers %v, condition %+v", crd.Finalizers, c)
		}
	})
}
