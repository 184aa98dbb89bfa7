package crd

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/registry/all"
	"github.com/tranche/tranche/internal/storage/memory"
	"github.com/tranche/tranche/internal/testutil"
)

// twoServers starts two API servers over one store, each with its controller, as two
// `tranche server` over one etcd: what one learns of definitions comes from storage.
func twoServers(t testing.TB) (a, b *rest.Config) {
	a, b, _ = twoServersWithMetrics(t)
	return a, b
}

// twoServersWithMetrics is twoServers, also returning the second server's metrics.
func twoServersWithMetrics(t testing.TB) (a, b *rest.Config, metricsB *prometheus.Registry) {
	t.Helper()
	store := memory.New(50 * time.Millisecond)
	// Cleanups run last first: the controllers' watches end (cancel) and the servers
	// end theirs (Close) before the HTTP servers wait for idle connections.
	ctx, cancel := context.WithCancel(context.Background())
	var cfgs []*rest.Config
	metricsB = prometheus.NewRegistry()
	for i := range 2 {
		var reg prometheus.Registerer
		if i == 1 {
			reg = metricsB
		}
		api, err := apiserver.New(apiserver.Config{Storage: store, Resources: all.Resources(), Metrics: reg})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(api)
		t.Cleanup(srv.Close)
		t.Cleanup(api.Close)
		cfg := &rest.Config{Host: srv.URL}
		c, err := New(api, cfg, nil, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, cfg)
	}
	t.Cleanup(cancel)
	if _, err := kubernetes.NewForConfigOrDie(cfgs[0]).CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cfgs[0], cfgs[1], metricsB
}

func widgetCRD(mutate func(*apiextv1.CustomResourceDefinition)) *apiextv1.CustomResourceDefinition {
	min1 := 1.0
	crd := &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget", ShortNames: []string{"wd"}},
			Scope: apiextv1.NamespaceScoped,
			Versions: []apiextv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
							"replicas": {Type: "integer", Minimum: &min1},
							"color":    {Type: "string", Default: &apiextv1.JSON{Raw: []byte(`"blue"`)}},
							"selector": {Type: "string"},
							"ports": {Type: "array", XListType: ptr("map"), XListMapKeys: []string{"name"},
								Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &apiextv1.JSONSchemaProps{Type: "object", Required: []string{"name"},
									Properties: map[string]apiextv1.JSONSchemaProps{"name": {Type: "string"}, "port": {Type: "integer"}}}}},
						}},
						"status": {Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{"replicas": {Type: "integer"}}},
					},
				}},
				Subresources: &apiextv1.CustomResourceSubresources{
					Status: &apiextv1.CustomResourceSubresourceStatus{},
					Scale: &apiextv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas",
						LabelSelectorPath: ptr(".spec.selector")},
				},
				AdditionalPrinterColumns: []apiextv1.CustomResourceColumnDefinition{{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas"}},
				SelectableFields:         []apiextv1.SelectableField{{JSONPath: ".spec.color"}},
			}},
		},
	}
	if mutate != nil {
		mutate(crd)
	}
	return crd
}

func ptr[T any](v T) *T { return &v }

func condition(crd *apiextv1.CustomResourceDefinition, t apiextv1.CustomResourceDefinitionConditionType) string {
	for _, c := range crd.Status.Conditions {
		if c.Type == t {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return ""
}

// TestDefinitionsServedByEveryServer creates a definition through one server and
// drives its custom resources through the other: names accepted and Established as
// upstream's controllers write them, schema pruning, defaulting and validation, the
// status and scale subresources, field selectors on selectableFields; a second
// definition claiming the same kind is refused its names; deleting the definition
// through the second server deletes its objects, then the definition, and both servers
// stop serving the resource.
func TestDefinitionsServedByEveryServer(t *testing.T) {
	a, b, metricsB := twoServersWithMetrics(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	crdsA := apiextclient.NewForConfigOrDie(a).ApiextensionsV1().CustomResourceDefinitions()
	crdsB := apiextclient.NewForConfigOrDie(b).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crdsA.Create(ctx, widgetCRD(nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyState(t, 20*time.Second, "widgets established", func() (bool, string) {
		crd, err := crdsB.Get(ctx, "widgets.example.com", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := condition(crd, apiextv1.NamesAccepted) + " " + condition(crd, apiextv1.Established) + " " + crd.Status.AcceptedNames.ListKind
		return got == "True/NoConflicts True/InitialNamesAccepted WidgetList", got
	})

	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	widgetsB := dynamic.NewForConfigOrDie(b).Resource(gvr).Namespace("default")
	var created *unstructured.Unstructured
	testutil.EventuallyState(t, 20*time.Second, "server b serves widgets", func() (bool, string) {
		var err error
		created, err = widgetsB.Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]interface{}{"name": "w1"},
			"spec":   map[string]interface{}{"replicas": int64(2), "selector": "app=w", "unknown": "x"},
			"status": map[string]interface{}{"replicas": int64(7)},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if c, _, _ := unstructured.NestedString(created.Object, "spec", "color"); c != "blue" {
		t.Errorf("default not applied: spec.color %q", c)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(created.Object, "spec", "unknown"); found {
		t.Errorf("unknown field kept: %v", created.Object["spec"])
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(created.Object, "status"); found || created.GetGeneration() != 1 {
		t.Errorf("create with status subresource: status %v, generation %d", created.Object["status"], created.GetGeneration())
	}
	_, err := widgetsB.Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]interface{}{"name": "bad"},
		"spec": map[string]interface{}{"replicas": int64(0)},
	}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1") {
		t.Errorf("replicas 0: %v", err)
	}

	// apiserver_storage_objects counts custom resources once, not once per version.
	if got := storageObjects(t, metricsB, "widgets.example.com"); got != 1 {
		t.Errorf("apiserver_storage_objects{resource=widgets.example.com} = %v, want 1", got)
	}

	// Unknown fields: refused with fieldValidation=Strict, in metadata and spec alike.
	_, err = widgetsB.Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]interface{}{"name": "strict", "colour": "x"},
		"spec": map[string]interface{}{"replicas": int64(1), "unknown": "x"},
	}}, metav1.CreateOptions{FieldValidation: "Strict"})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "metadata.colour", unknown field "spec.unknown"`) {
		t.Errorf("strict create with unknown fields: %v", err)
	}
	_, err = widgetsB.Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"other":1}}`), metav1.PatchOptions{FieldValidation: "Strict"})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `unknown field "spec.other"`) {
		t.Errorf("strict patch with an unknown field: %v", err)
	}

	// JSON patch, validated against the schema like any write.
	if _, err := widgetsB.Patch(ctx, "w1", types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/replicas","value":0}]`), metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("JSON patch to replicas 0: %v, want Invalid", err)
	}
	if p, err := widgetsB.Patch(ctx, "w1", types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/labels","value":{"tier":"gold"}}]`), metav1.PatchOptions{}); err != nil || p.GetLabels()["tier"] != "gold" {
		t.Errorf("JSON patch of labels: %v", err)
	}

	// Server-side apply merges the list-type map entries of two managers by key.
	for _, m := range []struct{ manager, port string }{{"alpha", "a"}, {"beta", "b"}} {
		if _, err := widgetsB.Patch(ctx, "w1", types.ApplyPatchType, []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"ports":[{"name":"`+m.port+`","port":1}]}}`),
			metav1.PatchOptions{FieldManager: m.manager}); err != nil {
			t.Fatalf("apply by %s: %v", m.manager, err)
		}
	}
	_, err = widgetsB.Patch(ctx, "w1", types.ApplyPatchType, []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1"},"unknownField":"x"}`),
		metav1.PatchOptions{FieldManager: "alpha", FieldValidation: "Strict"})
	if err == nil || !strings.Contains(err.Error(), ".unknownField: field not declared in schema") {
		t.Errorf("strict apply of an unknown field: %v", err)
	}
	applied, err := widgetsB.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ports, _, _ := unstructured.NestedSlice(applied.Object, "spec", "ports"); len(ports) != 2 {
		t.Errorf("ports after two managers' applies: %v", ports)
	}

	// status: spec ignored on /status, status ignored on the object.
	st, err := widgetsB.Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"replicas":9},"status":{"replicas":2}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(st.Object, "spec", "replicas"); r != 2 {
		t.Errorf("status write changed spec.replicas to %d", r)
	}
	gen := applied.GetGeneration()
	if r, _, _ := unstructured.NestedInt64(st.Object, "status", "replicas"); r != 2 || st.GetGeneration() != gen {
		t.Errorf("status write: status.replicas %d, generation %d", r, st.GetGeneration())
	}
	sc, err := widgetsB.Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{}, "scale")
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(sc.Object, "spec", "replicas"); r != 3 || sc.GetKind() != "Scale" {
		t.Errorf("scale: %v", sc.Object)
	}
	sel, _, _ := unstructured.NestedString(sc.Object, "status", "selector")
	if sel != "app=w" {
		t.Errorf("scale selector %q", sel)
	}
	w1, err := widgetsB.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w1.GetGeneration() != gen+1 {
		t.Errorf("generation after a spec change %d, want %d", w1.GetGeneration(), gen+1)
	}
	for sel, want := range map[string]int{"spec.color=blue": 1, "spec.color=red": 0, "metadata.name=w1": 1} {
		l, err := widgetsB.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil || len(l.Items) != want {
			t.Errorf("field selector %s: %v items, err %v", sel, l, err)
		}
	}
	if _, err := widgetsB.List(ctx, metav1.ListOptions{FieldSelector: "spec.replicas=3"}); !apierrors.IsBadRequest(err) {
		t.Errorf("selector on a field not selectable: %v", err)
	}

	// A second definition of the group claiming the kind Widget.
	if _, err := crdsA.Create(ctx, widgetCRD(func(c *apiextv1.CustomResourceDefinition) {
		c.Name = "gizmos.example.com"
		c.Spec.Names.Plural = "gizmos"
		c.Spec.Names.ShortNames = nil
	}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyState(t, 20*time.Second, "gizmos refused the kind", func() (bool, string) {
		crd, err := crdsA.Get(ctx, "gizmos.example.com", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := condition(crd, apiextv1.NamesAccepted) + " " + condition(crd, apiextv1.Established)
		// As upstream, the last conflict found names the reason: WidgetList is taken too.
		return got == "False/ListKindConflict False/NotAccepted", got
	})

	// A second version (the new storage version, conversion None) and a default added
	// to the schema: objects stored before read through both versions, defaulted.
	crd, err := crdsA.Get(ctx, "widgets.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v2 := *crd.Spec.Versions[0].DeepCopy()
	v2.Name = "v2"
	// (Identical selectableFields would move to the spec's top level in the internal
	// form, which upstream's validation refuses beside per-version schemas.)
	v2.SelectableFields = nil
	crd.Spec.Versions[0].Storage = false
	v2.Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"] = apiextv1.JSONSchemaProps{Type: "string", Default: &apiextv1.JSON{Raw: []byte(`"M"`)}}
	crd.Spec.Versions = append(crd.Spec.Versions, v2)
	if _, err := crdsA.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	v2gvr := gvr.GroupVersion().WithResource("widgets")
	v2gvr.Version = "v2"
	testutil.EventuallyState(t, 20*time.Second, "w1 read through v2 with the new default", func() (bool, string) {
		got, err := dynamic.NewForConfigOrDie(a).Resource(v2gvr).Namespace("default").Get(ctx, "w1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		size, _, _ := unstructured.NestedString(got.Object, "spec", "size")
		return got.GetAPIVersion() == "example.com/v2" && size == "M", got.GetAPIVersion() + " size " + size
	})
	testutil.EventuallyState(t, 20*time.Second, "storedVersions v1, v2", func() (bool, string) {
		crd, err := crdsB.Get(ctx, "widgets.example.com", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := strings.Join(crd.Status.StoredVersions, ",")
		return got == "v1,v2", got
	})

	// An object with a finalizer of its own holds the definition's deletion; meanwhile
	// creates are refused as upstream refuses them.
	if _, err := widgetsB.Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{"name": "held", "finalizers": []interface{}{"example.com/hold"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := crdsB.Delete(ctx, "widgets.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyState(t, 20*time.Second, "creates refused while terminating", func() (bool, string) {
		_, err := dynamic.NewForConfigOrDie(a).Resource(gvr).Namespace("default").Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]interface{}{"generateName": "late-"},
		}}, metav1.CreateOptions{})
		return apierrors.IsMethodNotSupported(err) && strings.Contains(err.Error(), "create not allowed while custom resource definition is terminating"), errString(err)
	})
	// Terminating turns from InstanceDeletionPending (the deletion's) to
	// InstanceDeletionInProgress (the controller's) while the finalizer holds it.
	testutil.EventuallyState(t, 20*time.Second, "deletion in progress", func() (bool, string) {
		crd, err := crdsA.Get(ctx, "widgets.example.com", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := condition(crd, apiextv1.Terminating) + " " + strings.Join(crd.Finalizers, ",")
		return got == "True/InstanceDeletionInProgress customresourcecleanup.apiextensions.k8s.io", got
	})
	if _, err := widgetsB.Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyState(t, 20*time.Second, "widgets deleted", func() (bool, string) {
		crd, err := crdsA.Get(ctx, "widgets.example.com", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, condition(crd, apiextv1.Terminating)
	})
	for _, cfg := range []*rest.Config{a, b} {
		testutil.EventuallyState(t, 20*time.Second, "widgets no longer served", func() (bool, string) {
			_, err := dynamic.NewForConfigOrDie(cfg).Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
			return apierrors.IsNotFound(err), "list: " + errString(err)
		})
	}
	// Its names freed, gizmos is now accepted.
	testutil.EventuallyState(t, 20*time.Second, "gizmos established", func() (bool, string) {
		crd, err := crdsA.Get(ctx, "gizmos.example.com", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := condition(crd, apiextv1.Established)
		return got == "True/InitialNamesAccepted", got
	})
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestDefinitionStatusSubresource writes a definition's status the way the conformance
// spec does (a condition appended through an update of /status, conditions replaced by
// a JSON patch of /status): both are kept, next to what the controller writes.
func TestDefinitionStatusSubresource(t *testing.T) {
	a, _ := twoServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	crds := apiextclient.NewForConfigOrDie(a).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, widgetCRD(nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	status := dynamic.NewForConfigOrDie(a).Resource(apiextv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))
	var updated *apiextv1.CustomResourceDefinition
	testutil.EventuallyState(t, 20*time.Second, "status updated", func() (bool, string) {
		u, err := status.Get(ctx, "widgets.example.com", metav1.GetOptions{}, "status")
		if err != nil {
			return false, err.Error()
		}
		crd, err := crds.Get(ctx, u.GetName(), metav1.GetOptions{ResourceVersion: u.GetResourceVersion()})
		if err != nil {
			return false, err.Error()
		}
		crd.Status.Conditions = append(crd.Status.Conditions, apiextv1.CustomResourceDefinitionCondition{Message: "updated"})
		updated, err = crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		return err == nil, errString(err)
	})
	if c := updated.Status.Conditions[len(updated.Status.Conditions)-1]; c.Message != "updated" {
		t.Fatalf("updated conditions %+v", updated.Status.Conditions)
	}
	patched, err := crds.Patch(ctx, "widgets.example.com", types.JSONPatchType,
		[]byte(`[{"op": "add", "path": "/status/conditions", "value": [{"message": "patched"}]}]`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if len(patched.Status.Conditions) == 0 || patched.Status.Conditions[0].Message != "patched" {
		t.Fatalf("patched conditions %+v", patched.Status.Conditions)
	}
}

// storageObjects returns apiserver_storage_objects of resource in reg, -2 when absent.
func storageObjects(t *testing.T, reg *prometheus.Registry, resource string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "apiserver_storage_objects" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "resource" && l.GetValue() == resource {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -2
}

// TestCELValidationRules serves a definition whose schema carries an
// x-kubernetes-validations rule and checks writes breaking it are refused with the
// rule's message at its field path, as kube-apiserver's CEL validator reports them (the
// value of an object omitted).
func TestCELValidationRules(t *testing.T) {
	a, _ := twoServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	crd := widgetCRD(func(c *apiextv1.CustomResourceDefinition) {
		spec := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		spec.XValidations = apiextv1.ValidationRules{{Rule: "self.replicas <= 5", Message: "at most 5 replicas"}}
		c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	})
	if _, err := apiextclient.NewForConfigOrDie(a).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	widgets := dynamic.NewForConfigOrDie(a).Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Namespace("default")
	make := func(name string, replicas int64) error {
		_, err := widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]interface{}{"name": name},
			"spec": map[string]interface{}{"replicas": replicas},
		}}, metav1.CreateOptions{})
		return err
	}
	testutil.EventuallyState(t, 20*time.Second, "widgets served", func() (bool, string) {
		err := make("ok", 5)
		return err == nil, errString(err)
	})
	if err := make("too-many", 7); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec: Invalid value: at most 5 replicas") {
		t.Fatalf("breaking the rule: %v", err)
	}
}
