package openapi

import (
	"net/http"
	"strings"

	"github.com/munnerz/goautoneg"
)

// The protobuf media types kube-openapi's handlers answer with (k8s.io/kube-openapi
// pkg/handler and pkg/handler3). Clients ask with the deprecated spelling, which has an
// "@" that Go's mime parser rejects (client-go's discovery and openapi clients send it);
// the answer must use the parseable one, since client-go parses the response's
// Content-Type and fails the request when it cannot.
const (
	ProtobufV2Type = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	ProtobufV3Type = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
)

// format is one representation a document is served in: the media subtypes a client
// may ask for it by and the Content-Type it is answered with.
type format struct {
	subtypes    []string
	contentType string
	protobuf    bool
}

var (
	v2Formats = []format{
		{subtypes: []string{"json"}, contentType: "application/json"},
		{subtypes: []string{"com.github.proto-openapi.spec.v2@v1.0+protobuf", "com.github.proto-openapi.spec.v2.v1.0+protobuf"}, contentType: ProtobufV2Type, protobuf: true},
	}
	v3Formats = []format{
		{subtypes: []string{"json"}, contentType: "application/json"},
		{subtypes: []string{"com.github.proto-openapi.spec.v3@v1.0+protobuf", "com.github.proto-openapi.spec.v3.v1.0+protobuf"}, contentType: ProtobufV3Type, protobuf: true},
	}
)

// negotiate picks the format of the client's most preferred Accept clause that one of
// formats satisfies, as kube-openapi's handlers do (no Accept means any); false when
// none does.
func negotiate(r *http.Request, formats []format) (format, bool) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		accept = "*/*"
	}
	for _, clause := range goautoneg.ParseAccept(accept) {
		if clause.Type != "application" && clause.Type != "*" {
			continue
		}
		for _, f := range formats {
			for _, sub := range f.subtypes {
				if clause.SubType == sub || clause.SubType == "*" {
					return f, true
				}
			}
		}
	}
	return format{}, false
}

// Handler serves the documents at /openapi/v2, /openapi/v3 and /openapi/v3/<path>, in
// JSON or protobuf as the client's Accept header asks (client-go asks for protobuf;
// 406 when neither is acceptable), with ETags so clients can cache them.
func (d *Documents) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		path := strings.TrimPrefix(r.URL.Path, "/openapi/")
		switch {
		case path == "v2":
			serveDoc(w, r, d.V2ETag(), d.V2JSON, d.V2Protobuf, v2Formats)
		case path == "v3" || path == "v3/":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(d.V3Index())
		case strings.HasPrefix(path, "v3/"):
			gv := strings.TrimPrefix(path, "v3/")
			doc, hash, ok := d.V3(gv)
			if !ok {
				http.NotFound(w, r)
				return
			}
			if h := r.URL.Query().Get("hash"); h != "" && h == hash {
				w.Header().Set("Cache-Control", "public, immutable")
			}
			serveDoc(w, r, `"`+hash+`"`, func() []byte { return doc }, func() []byte {
				p, _ := d.V3Protobuf(gv)
				return p
			}, v3Formats)
		default:
			http.NotFound(w, r)
		}
	})
}

func serveDoc(w http.ResponseWriter, r *http.Request, etag string, jsonDoc, protoDoc func() []byte, formats []format) {
	w.Header().Set("Vary", "Accept")
	f, ok := negotiate(r, formats)
	if !ok {
		w.WriteHeader(http.StatusNotAcceptable)
		return
	}
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	data := jsonDoc
	if f.protobuf {
		data = protoDoc
	}
	body := data()
	if body == nil {
		http.Error(w, "the OpenAPI document could not be converted to protobuf", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", f.contentType)
	_, _ = w.Write(body)
}
