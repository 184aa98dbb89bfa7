package crd

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/tranche/tranche/internal/testutil"
)

// hostPortWebhook converts Endpoint objects between v1 (spec-less, hostPort "h:p") and
// v2 (host and port), answering ConversionReview v1 as a conversion webhook does; it
// counts the reviews it answered.
func hostPortWebhook(t testing.TB, calls *atomic.Int64) *httptest.Server {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review apiextv1.ConversionReview
		if r.URL.Path != "/convert" || json.NewDecoder(r.Body).Decode(&review) != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		calls.Add(1)
		resp := &apiextv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
		for _, raw := range review.Request.Objects {
			var obj map[string]interface{}
			if err := json.Unmarshal(raw.Raw, &obj); err != nil {
				resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
				break
			}
			switch review.Request.DesiredAPIVersion {
			case "example.com/v2":
				if hp, ok := obj["hostPort"].(string); ok {
					host, port, _ := strings.Cut(hp, ":")
					obj["host"], obj["port"] = host, port
					delete(obj, "hostPort")
				}
			case "example.com/v1":
				if host, ok := obj["host"].(string); ok {
					port, _ := obj["port"].(string)
					obj["hostPort"] = host + ":" + port
					delete(obj, "host")
					delete(obj, "port")
				}
			}
			obj["apiVersion"] = review.Request.DesiredAPIVersion
			data, _ := json.Marshal(obj)
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtimeRaw(data))
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func endpointCRD(webhook *httptest.Server) *apiextv1.CustomResourceDefinition {
	str := apiextv1.JSONSchemaProps{Type: "string"}
	version := func(name string, storage bool, props map[string]apiextv1.JSONSchemaProps, selectable string) apiextv1.CustomResourceDefinitionVersion {
		return apiextv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
			Schema:           &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{Type: "object", Properties: props}},
			SelectableFields: []apiextv1.SelectableField{{JSONPath: selectable}}}
	}
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: webhook.Certificate().Raw})
	return &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "endpoints.example.com"},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextv1.CustomResourceDefinitionNames{Plural: "endpoints", Kind: "Endpoint"},
			Scope: apiextv1.NamespaceScoped,
			Versions: []apiextv1.CustomResourceDefinitionVersion{
				version("v1", true, map[string]apiextv1.JSONSchemaProps{"hostPort": str}, ".hostPort"),
				version("v2", false, map[string]apiextv1.JSONSchemaProps{"host": str, "port": str}, ".host"),
			},
			Conversion: &apiextv1.CustomResourceConversion{Strategy: apiextv1.WebhookConverter, Webhook: &apiextv1.WebhookConversion{
				ClientConfig:             &apiextv1.WebhookClientConfig{URL: ptr(webhook.URL + "/convert"), CABundle: caBundle},
				ConversionReviewVersions: []string{"v1", "v1beta1"},
			}},
		},
	}
}

// Objects are converted by the definition's webhook when read in another version than
// stored (get, list of mixed versions, watch with a selectable field of the other
// version) and when written in another version than the storage version.
func TestWebhookConversion(t *testing.T) {
	a, _ := twoServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var calls atomic.Int64
	webhook := hostPortWebhook(t, &calls)
	crds := apiextclient.NewForConfigOrDie(a).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, endpointCRD(webhook), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(a)
	v1 := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "endpoints"}).Namespace("default")
	v2 := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "endpoints"}).Namespace("default")
	obj := func(version, name string, fields map[string]interface{}) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/" + version, "kind": "Endpoint",
			"metadata": map[string]interface{}{"name": name}}}
		for k, v := range fields {
			u.Object[k] = v
		}
		return u
	}
	testutil.EventuallyState(t, 20*time.Second, "endpoints served", func() (bool, string) {
		_, err := v1.Create(ctx, obj("v1", "e1", map[string]interface{}{"hostPort": "h1:80"}), metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	w, err := v2.Watch(ctx, metav1.ListOptions{FieldSelector: "host=h2"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created, err := v2.Create(ctx, obj("v2", "e2", map[string]interface{}{"host": "h2", "port": "8080"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetAPIVersion() != "example.com/v2" || created.Object["host"] != "h2" {
		t.Errorf("create through v2 answered %v", created.Object)
	}

	got, err := v1.Get(ctx, "e2", metav1.GetOptions{})
	if err != nil || got.Object["hostPort"] != "h2:8080" || got.Object["host"] != nil {
		t.Errorf("v2 object read as v1: %v %v", err, got)
	}
	list, err := v2.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]interface{}{}
	for _, item := range list.Items {
		hosts[item.GetName()] = item.Object["host"]
		if item.GetAPIVersion() != "example.com/v2" {
			t.Errorf("list item %s has apiVersion %s", item.GetName(), item.GetAPIVersion())
		}
	}
	if hosts["e1"] != "h1" || hosts["e2"] != "h2" {
		t.Errorf("v2 list of a v1 and a v2 object: hosts %v", hosts)
	}
	sel, err := v1.List(ctx, metav1.ListOptions{FieldSelector: "hostPort=h2:8080"})
	if err != nil || len(sel.Items) != 1 || sel.Items[0].GetName() != "e2" {
		t.Errorf("v1 list with hostPort=h2:8080: %v %v", err, sel)
	}
	select {
	case ev := <-w.ResultChan():
		u, _ := ev.Object.(*unstructured.Unstructured)
		if ev.Type != watch.Added || u == nil || u.GetName() != "e2" || u.Object["port"] != "8080" {
			t.Errorf("v2 watch with host=h2: got %v %v", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("v2 watch with host=h2 saw nothing")
	}
	if calls.Load() == 0 {
		t.Error("the webhook was never called")
	}

	// A webhook that cannot be reached fails the read with 500 naming the conversion.
	webhook.Close()
	_, err = v2.Get(ctx, "e1", metav1.GetOptions{})
	if err == nil || !strings.Contains(err.Error(), "conversion webhook for example.com/v1, Kind=Endpoint failed") {
		t.Errorf("read with the webhook down: want the conversion's error, got %v", err)
	}
}

func runtimeRaw(data []byte) runtime.RawExtension { return runtime.RawExtension{Raw: data} }
