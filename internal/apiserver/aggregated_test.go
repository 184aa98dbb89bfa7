package apiserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/storage/memory"
)

// fakeAggregated serves wardle.example.com/v1alpha1 (flunders) with a handler that
// names the path it got, and claims apps/v1 too (which the API server serves itself).
type fakeAggregated struct{}

func (fakeAggregated) Proxy(group, version string) http.Handler {
	if group+"/"+version != "wardle.example.com/v1alpha1" {
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "extension "+r.URL.Path) })
}

func (fakeAggregated) Discovery() []AggregatedGroupVersion {
	return []AggregatedGroupVersion{
		{GroupVersion: schema.GroupVersion{Group: "wardle.example.com", Version: "v1alpha1"}, Resources: &metav1.APIResourceList{
			GroupVersion: "wardle.example.com/v1alpha1",
			APIResources: []metav1.APIResource{{Name: "flunders", SingularName: "flunder", Namespaced: true, Kind: "Flunder", Verbs: []string{"get", "list"}},
				{Name: "flunders/status", Kind: "Flunder", Verbs: []string{"get"}}}}},
		{GroupVersion: schema.GroupVersion{Group: "stale.example.com", Version: "v1"}},
		{GroupVersion: schema.GroupVersion{Group: "apps", Version: "v1"}},
	}
}

// Requests below an extension server's group version go to its proxy; discovery (/apis,
// /apis/GROUP, aggregated) lists its group versions beside the served ones.
func TestAggregatedRoutingAndDiscovery(t *testing.T) {
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: testResources(), Aggregated: fakeAggregated{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	get := func(path, accept string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	if code, body := get("/apis/wardle.example.com/v1alpha1/namespaces/x/flunders", ""); code != 200 || body != "extension /apis/wardle.example.com/v1alpha1/namespaces/x/flunders" {
		t.Errorf("proxied request: %d %q", code, body)
	}
	if code, body := get("/apis/apps/v1/deployments", ""); code != 200 || !strings.Contains(body, `"kind":"DeploymentList"`) {
		t.Errorf("served group version: %d %q", code, body)
	}

	_, body := get("/apis", "")
	var groups metav1.APIGroupList
	if err := json.Unmarshal([]byte(body), &groups); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range groups.Groups {
		names = append(names, g.Name)
	}
	if got := strings.Join(names, " "); !strings.HasSuffix(got, " wardle.example.com stale.example.com") || strings.Count(got, "apps") != 1 {
		t.Errorf("/apis groups: %s", got)
	}
	if code, body := get("/apis/wardle.example.com", ""); code != 200 || !strings.Contains(body, `"preferredVersion":{"groupVersion":"wardle.example.com/v1alpha1"`) {
		t.Errorf("/apis/wardle.example.com: %d %s", code, body)
	}

	_, body = get("/apis", aggregatedV2)
	var agg apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal([]byte(body), &agg); err != nil {
		t.Fatal(err)
	}
	found := map[string]apidiscoveryv2.APIVersionDiscovery{}
	for _, g := range agg.Items {
		for _, v := range g.Versions {
			found[g.Name+"/"+v.Version] = v
		}
	}
	w := found["wardle.example.com/v1alpha1"]
	if len(w.Resources) != 1 || w.Resources[0].Resource != "flunders" || w.Resources[0].Scope != apidiscoveryv2.ScopeNamespace ||
		len(w.Resources[0].Subresources) != 1 || w.Resources[0].Subresources[0].Subresource != "status" || w.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
		t.Errorf("aggregated discovery of wardle.example.com/v1alpha1: %+v", w)
	}
	if s := found["stale.example.com/v1"]; s.Freshness != apidiscoveryv2.DiscoveryFreshnessStale {
		t.Errorf("a version whose resources could not be fetched: %+v", s)
	}
}
