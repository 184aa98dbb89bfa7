package apiserver

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/tranche/tranche/internal/apiserver/openapi"
	"github.com/tranche/tranche/internal/storage/memory"
)

// deploymentJSON is a Deployment like the seed's api (000-api.yaml), with replicas and
// image varied so that every write changes the object.
func deploymentJSON(name string, replicas int, image string) string {
	return fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q,"labels":{"app":"api"}},
"spec":{"replicas":%d,"selector":{"matchLabels":{"app":"api"}},"template":{"metadata":{"labels":{"app":"api"}},
"spec":{"containers":[{"name":"api","image":%q,"ports":[{"containerPort":8080}],
"readinessProbe":{"httpGet":{"path":"/healthz","port":8080},"periodSeconds":5}}]}}}}`, name, replicas, image)
}

// BenchmarkApplyVsUpdate compares server-side apply with plain writes of the same
// Deployments through the whole handler (in-memory storage, no network): creates by POST
// against creates by apply, updates by PUT against updates by apply. Both sides record
// managedFields; the figures are throughputs and their ratio (apply / plain; the goal is
// at least 0.7).
//
//	go test -run '^$' -bench ApplyVsUpdate -benchtime 1x ./internal/apiserver/
func BenchmarkApplyVsUpdate(b *testing.B) {
	const n = 300
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: testResources()})
	if err != nil {
		b.Fatal(err)
	}
	defer api.Close()
	send := func(method, path, contentType, body string, want int) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("User-Agent", "bench/v0")
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("%s %s = %d, want %d: %s", method, path, rec.Code, want, rec.Body.String())
		}
	}
	const base = "/apis/apps/v1/namespaces/default/deployments"
	send(http.MethodPost, "/api/v1/namespaces", "application/json", `{"metadata":{"name":"default"}}`, http.StatusCreated)
	// The first write builds the type converter; keep it out of the figures.
	send(http.MethodPost, base, "application/json", deploymentJSON("warm", 1, "api:1"), http.StatusCreated)

	// Plain and apply writes alternate in batches, so that a change in the machine's load
	// (it is shared) weighs on both sides alike.
	const batch = 25
	var elapsed [4]time.Duration // create, apply create, update, apply update
	timed := func(k, from int, write func(i int)) {
		start := time.Now()
		for i := from; i < from+batch; i++ {
			write(i)
		}
		elapsed[k] += time.Since(start)
	}
	for round := 0; round < b.N; round++ {
		p, a := fmt.Sprintf("plain-%d-", round), fmt.Sprintf("applied-%d-", round)
		for from := 0; from < n; from += batch {
			timed(0, from, func(i int) {
				send(http.MethodPost, base, "application/json", deploymentJSON(p+fmt.Sprint(i), 3, "api:1"), http.StatusCreated)
			})
			timed(1, from, func(i int) {
				name := a + fmt.Sprint(i)
				send(http.MethodPatch, base+"/"+name+"?fieldManager=bench", "application/apply-patch+yaml", deploymentJSON(name, 3, "api:1"), http.StatusCreated)
			})
		}
		for from := 0; from < n; from += batch {
			timed(2, from, func(i int) {
				name := p + fmt.Sprint(i)
				send(http.MethodPut, base+"/"+name, "application/json", deploymentJSON(name, 4, "api:2"), http.StatusOK)
			})
			timed(3, from, func(i int) {
				name := a + fmt.Sprint(i)
				send(http.MethodPatch, base+"/"+name+"?fieldManager=bench", "application/apply-patch+yaml", deploymentJSON(name, 4, "api:2"), http.StatusOK)
			})
		}
	}
	perSec := func(k int) float64 { return float64(n*b.N) / elapsed[k].Seconds() }
	create, applyCreate, update, applyUpdate := perSec(0), perSec(1), perSec(2), perSec(3)
	b.Logf("\n%-8s %14s %14s %8s\n%-8s %14.0f %14.0f %8.2f\n%-8s %14.0f %14.0f %8.2f",
		"writes/s", "plain", "apply", "ratio",
		"create", create, applyCreate, applyCreate/create,
		"update", update, applyUpdate, applyUpdate/update)
	b.ReportMetric(applyCreate/create, "create-ratio")
	b.ReportMetric(applyUpdate/update, "update-ratio")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkFieldManagerApplyVsUpdate is the anchor for BenchmarkApplyVsUpdate: the same
// Deployment writes through k8s.io/apimachinery's managedfields alone, wired as
// kube-apiserver wires it (NewDefaultFieldManager over the published schemas; an
// update decodes its JSON body into the typed object and calls UpdateNoErrors with the
// stored object, a create with an empty one; an apply decodes its body into
// unstructured content with sigs.k8s.io/yaml and calls Apply), without HTTP, admission
// or storage. Its ratios are what apply costs over update in kube-apiserver's own
// managedFields stack, the bound for any API server built on the library.
//
//	go test -run '^$' -bench FieldManagerApplyVsUpdate -benchtime 5x ./internal/apiserver/
func BenchmarkFieldManagerApplyVsUpdate(b *testing.B) {
	const n = 300
	defs, err := openapi.SchemaDefinitions(testResources())
	if err != nil {
		b.Fatal(err)
	}
	tc, err := managedfields.NewTypeConverter(defs, false)
	if err != nil {
		b.Fatal(err)
	}
	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	fm, err := managedfields.NewDefaultFieldManager(tc, scheme.Scheme, scheme.Scheme, scheme.Scheme, gvk, gvk.GroupVersion(), "", nil)
	if err != nil {
		b.Fatal(err)
	}
	decoder := scheme.Codecs.UniversalDeserializer()
	update := func(live runtime.Object, body string) runtime.Object {
		obj, _, err := decoder.Decode([]byte(body), nil, &appsv1.Deployment{})
		if err != nil {
			b.Fatal(err)
		}
		return fm.UpdateNoErrors(live, obj, "bench")
	}
	apply := func(live runtime.Object, body string) runtime.Object {
		patch := &unstructured.Unstructured{Object: map[string]interface{}{}}
		if err := yaml.Unmarshal([]byte(body), &patch.Object); err != nil {
			b.Fatal(err)
		}
		out, err := fm.Apply(live, patch, "bench", false)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	empty := func() runtime.Object {
		d := &appsv1.Deployment{}
		d.GetObjectKind().SetGroupVersionKind(gvk)
		return d
	}
	// As in BenchmarkApplyVsUpdate, both sides alternate in batches.
	const batch = 25
	var elapsed [4]time.Duration // create, apply create, update, apply update
	timed := func(k, from int, write func(i int)) {
		start := time.Now()
		for i := from; i < from+batch; i++ {
			write(i)
		}
		elapsed[k] += time.Since(start)
	}
	plain, applied := make([]runtime.Object, n), make([]runtime.Object, n)
	for round := 0; round < b.N; round++ {
		for from := 0; from < n; from += batch {
			timed(0, from, func(i int) { plain[i] = update(empty(), deploymentJSON(fmt.Sprint("plain-", i), 3, "api:1")) })
			timed(1, from, func(i int) { applied[i] = apply(empty(), deploymentJSON(fmt.Sprint("applied-", i), 3, "api:1")) })
		}
		for from := 0; from < n; from += batch {
			timed(2, from, func(i int) { plain[i] = update(plain[i], deploymentJSON(fmt.Sprint("plain-", i), 4, "api:2")) })
			timed(3, from, func(i int) { applied[i] = apply(applied[i], deploymentJSON(fmt.Sprint("applied-", i), 4, "api:2")) })
		}
	}
	perSec := func(k int) float64 { return float64(n*b.N) / elapsed[k].Seconds() }
	create, applyCreate, upd, applyUpdate := perSec(0), perSec(1), perSec(2), perSec(3)
	b.Logf("\n%-8s %14s %14s %8s\n%-8s %14.0f %14.0f %8.2f\n%-8s %14.0f %14.0f %8.2f",
		"writes/s", "update", "apply", "ratio",
		"create", create, applyCreate, applyCreate/create,
		"update", upd, applyUpdate, applyUpdate/upd)
	b.ReportMetric(applyCreate/create, "create-ratio")
	b.ReportMetric(applyUpdate/upd, "update-ratio")
	b.ReportMetric(0, "ns/op")
}
