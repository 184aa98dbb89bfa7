package openapi

import (
	"mime"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"
)

// TestHandlerContentTypes: client-go's discovery and openapi clients ask for protobuf
// with the deprecated media type and parse the Content-Type of the answer; the answer
// must be kube-openapi's parseable type, or the client fails (kubectl apply of a List,
// Helm) with "mime: unexpected content after media subtype".
func TestHandlerContentTypes(t *testing.T) {
	d, _ := buildTestDocuments(t)
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(srv.Close)
	dc := discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: srv.URL})
	doc, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatalf("client-go's OpenAPISchema: %v", err)
	}
	if len(doc.GetDefinitions().GetAdditionalProperties()) == 0 {
		t.Error("the v2 document read through client-go has no definitions")
	}
	paths, err := dc.OpenAPIV3().Paths()
	if err != nil {
		t.Fatalf("client-go's OpenAPIV3 paths: %v", err)
	}
	gv, ok := paths["api/v1"]
	if !ok {
		t.Fatalf("no api/v1 in %v", paths)
	}
	if _, err := gv.Schema(openapi.ContentTypeOpenAPIV3PB); err != nil {
		t.Errorf("client-go's v3 protobuf schema: %v", err)
	}

	for _, tc := range []struct{ path, accept, want string }{
		{"/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf", ProtobufV2Type},
		{"/openapi/v2", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf", ProtobufV2Type},
		{"/openapi/v2", "application/json", "application/json"},
		{"/openapi/v2", "", "application/json"},
		{"/openapi/v2", "*/*", "application/json"},
		// The client's preference decides, not the mere mention of protobuf.
		{"/openapi/v2", "application/json, application/com.github.proto-openapi.spec.v2@v1.0+protobuf", "application/json"},
		{"/openapi/v2", "application/json;q=0.5, application/com.github.proto-openapi.spec.v2@v1.0+protobuf", ProtobufV2Type},
		{"/openapi/v2", "text/html", ""},
		{"/openapi/v2", openapi.ContentTypeOpenAPIV3PB, ""},
		{"/openapi/v3/api/v1", openapi.ContentTypeOpenAPIV3PB, ProtobufV3Type},
		{"/openapi/v3/api/v1", "", "application/json"},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if tc.want == "" {
			if resp.StatusCode != http.StatusNotAcceptable {
				t.Errorf("%s with Accept %q: %d, want 406", tc.path, tc.accept, resp.StatusCode)
			}
			continue
		}
		ct := resp.Header.Get("Content-Type")
		if ct != tc.want {
			t.Errorf("%s with Accept %q: Content-Type %q, want %q", tc.path, tc.accept, ct, tc.want)
		}
		if _, _, err := mime.ParseMediaType(ct); err != nil {
			t.Errorf("%s: Content-Type %q does not parse: %v", tc.path, ct, err)
		}
	}
}
