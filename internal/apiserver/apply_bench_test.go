package apiserver

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
