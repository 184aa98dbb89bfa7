package apiserver

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche/tranche/internal/registry/all"
	"github.com/tranche/tranche/internal/storage/memory"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestDiscoveryGolden serves every real resource and compares each discovery document
// (legacy and aggregated) with testdata/discovery.golden: moving behaviour between the
// generic handlers and the registries must not change what clients discover.
func TestDiscoveryGolden(t *testing.T) {
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: all.Resources()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	paths := []string{"/api", "/apis", "/api/v1"}
	for _, gv := range api.groupVersions() {
		if gv.Group != "" {
			paths = append(paths, "/apis/"+gv.Group, "/apis/"+gv.String())
		}
	}
	var got bytes.Buffer
	get := func(path, accept string) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		var doc any
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
			t.Fatalf("%s: %v: %s", path, err, rec.Body.String())
		}
		out, _ := json.MarshalIndent(doc, "", " ")
		got.WriteString("## " + path + " " + accept + "\n")
		got.Write(out)
		got.WriteString("\n")
	}
	for _, p := range paths {
		get(p, "")
	}
	get("/api", aggregatedV2)
	get("/apis", aggregatedV2)
	golden := filepath.Join("testdata", "discovery.golden")
	if *updateGolden {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got.String(), "\n")); diff != "" {
		t.Errorf("discovery changed (-want +got):\n%s", diff)
	}
}
