package crd

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"github.com/munnerz/goautoneg"
	"google.golang.org/protobuf/proto"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	apiopenapi "github.com/tranche/tranche/internal/apiserver/openapi"
)

// OpenAPI serves the built-in OpenAPI documents with the custom resources' schemas
// added, as kube-apiserver publishes them (kubectl explain, clients' validation): in
// /openapi/v2 merged into the built-in document, in /openapi/v3 one document per
// custom group version, listed in the index; in JSON or protobuf. Requests for anything else, and every
// request while no definition is served, go to the built-in handler.
type OpenAPI struct {
	static http.Handler
	docs   atomic.Pointer[openAPIDocs]

	// staticV2 is the built-in v2 document, read once from static.
	once     sync.Once
	staticV2 *spec.Swagger
	err      error
}

// openAPIDocs are the documents of one set of served definitions.
type openAPIDocs struct {
	v2 *openAPIDoc
	// v3 holds each custom group version's document, by path ("apis/G/V").
	v3 map[string]*openAPIDoc
}

// openAPIDoc is one document in JSON, its hash, and its protobuf form once asked for.
type openAPIDoc struct {
	data []byte
	hash string

	once  sync.Once
	proto []byte
}

func newDoc(data []byte) *openAPIDoc {
	sum := sha512.Sum512(data)
	return &openAPIDoc{data: data, hash: fmt.Sprintf("%X", sum)}
}

// NewOpenAPI returns the handler serving static's documents with the custom resources'.
func NewOpenAPI(static http.Handler) *OpenAPI { return &OpenAPI{static: static} }

// ServeHTTP implements http.Handler.
func (o *OpenAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d := o.docs.Load()
	if d == nil || r.Method != http.MethodGet {
		o.static.ServeHTTP(w, r)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/openapi/")
	switch {
	case path == "v2":
		d.v2.serve(w, r, apiopenapi.ProtobufV2Type, func(data []byte) (proto.Message, error) { return openapi_v2.ParseDocument(data) })
	case path == "v3" || path == "v3/":
		rec := httptest.NewRecorder()
		o.static.ServeHTTP(rec, r)
		var index struct {
			Paths map[string]map[string]string `json:"paths"`
		}
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &index) != nil {
			o.static.ServeHTTP(w, r)
			return
		}
		for p, doc := range d.v3 {
			if _, builtin := index.Paths[p]; !builtin {
				index.Paths[p] = map[string]string{"serverRelativeURL": "/openapi/v3/" + p + "?hash=" + doc.hash}
			}
		}
		data, _ := json.Marshal(index)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	case strings.HasPrefix(path, "v3/"):
		doc, ok := d.v3[strings.TrimPrefix(path, "v3/")]
		if !ok {
			o.static.ServeHTTP(w, r)
			return
		}
		if h := r.URL.Query().Get("hash"); h != "" && h == doc.hash {
			w.Header().Set("Cache-Control", "public, immutable")
		}
		doc.serve(w, r, apiopenapi.ProtobufV3Type, func(data []byte) (proto.Message, error) { return openapi_v3.ParseDocument(data) })
	default:
		o.static.ServeHTTP(w, r)
	}
}

// serve writes the document in JSON, or in protobuf when the client prefers it
// (client-go's discovery asks for v2 in protobuf), converted on first use.
func (doc *openAPIDoc) serve(w http.ResponseWriter, r *http.Request, protoType string, parse func([]byte) (proto.Message, error)) {
	w.Header().Set("Vary", "Accept")
	w.Header().Set("Etag", `"`+doc.hash+`"`)
	if !wantsProtobuf(r) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc.data)
		return
	}
	doc.once.Do(func() {
		if msg, err := parse(doc.data); err == nil {
			doc.proto, _ = proto.Marshal(msg)
		}
	})
	if doc.proto == nil {
		http.Error(w, "the document has no protobuf form", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", protoType)
	_, _ = w.Write(doc.proto)
}

// wantsProtobuf reports whether the client's most preferred acceptable form is protobuf.
func wantsProtobuf(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	if accept == "" {
		return false
	}
	for _, c := range goautoneg.ParseAccept(accept) {
		if c.Type != "application" && c.Type != "*" {
			continue
		}
		if strings.Contains(c.SubType, "protobuf") {
			return true
		}
		if c.SubType == "json" || c.SubType == "*" {
			return false
		}
	}
	return false
}

// update publishes the schemas of crds' served versions.
func (o *OpenAPI) update(crds []*apiextv1.CustomResourceDefinition) error {
	if len(crds) == 0 {
		o.docs.Store(nil)
		return nil
	}
	o.once.Do(func() {
		req := httptest.NewRequest(http.MethodGet, "/openapi/v2", nil)
		req.Header.Set("Accept", "application/json")
		rec := httptest.NewRecorder()
		o.static.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			o.err = fmt.Errorf("built-in /openapi/v2: %d", rec.Code)
			return
		}
		o.staticV2 = &spec.Swagger{}
		o.err = json.Unmarshal(rec.Body.Bytes(), o.staticV2)
	})
	if o.err != nil {
		return o.err
	}
	sort.Slice(crds, func(i, j int) bool { return crds[i].Name < crds[j].Name })
	var v2s []*spec.Swagger
	byGV := map[string][]*spec3.OpenAPI{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			s2, err := builder.BuildOpenAPIV2(crd, v.Name, builder.Options{V2: true, IncludeSelectableFields: true})
			if err != nil {
				return fmt.Errorf("customresourcedefinition %s version %s: %w", crd.Name, v.Name, err)
			}
			v2s = append(v2s, s2)
			s3, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{IncludeSelectableFields: true})
			if err != nil {
				return fmt.Errorf("customresourcedefinition %s version %s: %w", crd.Name, v.Name, err)
			}
			p := "apis/" + crd.Spec.Group + "/" + v.Name
			byGV[p] = append(byGV[p], s3)
		}
	}
	merged, err := builder.MergeSpecs(o.staticV2, v2s...)
	if err != nil {
		return err
	}
	d := &openAPIDocs{v3: map[string]*openAPIDoc{}}
	v2, err := json.Marshal(merged)
	if err != nil {
		return err
	}
	d.v2 = newDoc(v2)
	for p, specs := range byGV {
		m, err := builder.MergeSpecsV3(specs...)
		if err != nil {
			return err
		}
		data, err := json.Marshal(m)
		if err != nil {
			return err
		}
		d.v3[p] = newDoc(data)
	}
	o.docs.Store(d)
	return nil
}
