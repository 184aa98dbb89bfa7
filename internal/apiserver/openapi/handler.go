package openapi

import (
	"net/http"
	"strings"
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

// Handler serves the documents at /openapi/v2, /openapi/v3 and /openapi/v3/<path>,
// in protobuf when the client asks for it (client-go's OpenAPISchema does) and JSON
// otherwise, with ETags so clients can cache them.
func (d *Documents) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		wantProto := strings.Contains(r.Header.Get("Accept"), "protobuf")
		path := strings.TrimPrefix(r.URL.Path, "/openapi/")
		switch {
		case path == "v2":
			serveDoc(w, r, d.V2ETag(), d.V2JSON, d.V2Protobuf, wantProto, ProtobufV2Type)
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
			}, wantProto, ProtobufV3Type)
		default:
			http.NotFound(w, r)
		}
	})
}

func serveDoc(w http.ResponseWriter, r *http.Request, etag string, jsonDoc, protoDoc func() []byte, wantProto bool, protoType string) {
	w.Header().Set("ETag", etag)
	w.Header().Set("Vary", "Accept")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if wantProto {
		data := protoDoc()
		if data == nil {
			http.Error(w, "the OpenAPI document could not be converted to protobuf", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", protoType)
		_, _ = w.Write(data)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(jsonDoc())
}
