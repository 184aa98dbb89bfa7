package openapi

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"sync"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/tranche/tranche/internal/registry"
)

// Documents are the OpenAPI documents of one API server, serialised once. The protobuf
// forms are converted from the JSON on first use, because the conversion costs more than
// the rest of Build together and most clients (kubectl included) read JSON only.
type Documents struct {
	v2JSON  []byte
	v2ETag  string
	v2Proto lazyProto
	v3Index []byte
	v3      map[string]*v3Doc
}

type v3Doc struct {
	json  []byte
	hash  string
	proto lazyProto
}

// lazyProto is a protobuf encoding computed once, on first use.
type lazyProto struct {
	once sync.Once
	data []byte
}

// get returns the encoding, running convert on the first call; nil if convert failed.
func (l *lazyProto) get(convert func() (proto.Message, error)) []byte {
	l.once.Do(func() {
		msg, err := convert()
		if err != nil {
			return
		}
		if data, err := proto.Marshal(msg); err == nil {
			l.data = data
		}
	})
	return l.data
}

// metaTypes are published in every document, as Kubernetes does, whether or not an
// operation refers to them.
var metaTypes = []reflect.Type{
	reflect.TypeOf(metav1.Status{}),
	reflect.TypeOf(metav1.DeleteOptions{}),
	reflect.TypeOf(metav1.WatchEvent{}),
	reflect.TypeOf(metav1.Patch{}),
	reflect.TypeOf(metav1.APIResourceList{}),
	reflect.TypeOf(metav1.APIGroupList{}),
	reflect.TypeOf(metav1.APIGroup{}),
	reflect.TypeOf(metav1.APIVersions{}),
}

// Build makes the documents for the served resources. version is the server's build
// identity: it is the documents' info.version, so hashes and ETags change with it.
// It fails when a resource's Go types cannot be described (a field of a type with no JSON
// schema, such as a channel or a function).
func Build(resources []registry.Resource, version string) (*Documents, error) {
	b := newSchemaBuilder()
	for _, t := range metaTypes {
		if _, err := b.define(t); err != nil {
			return nil, err
		}
	}
	q, err := newQueryParams()
	if err != nil {
		return nil, fmt.Errorf("query parameters: %w", err)
	}

	gvks := map[string][]schema.GroupVersionKind{}
	addGVK := func(def string, gvk schema.GroupVersionKind) {
		for _, g := range gvks[def] {
			if g == gvk {
				return
			}
		}
		gvks[def] = append(gvks[def], gvk)
	}
	paths := map[string][]pathItem{} // by group version path ("api/v1")
	groupVersions := map[schema.GroupVersion]bool{{Version: "v1"}: true}
	for i := range resources {
		r := &resources[i]
		if r.New == nil || r.NewList == nil {
			return nil, fmt.Errorf("resource %s: New and NewList are required", r.GVR())
		}
		kindDef, err := b.define(objectType(r.New()))
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", r.GVR(), err)
		}
		listType := objectType(r.NewList())
		listDef, err := b.define(listType)
		if err != nil {
			return nil, fmt.Errorf("resource %s list: %w", r.GVR(), err)
		}
		addGVK(kindDef, r.GVK)
		addGVK(listDef, r.GVK.GroupVersion().WithKind(listType.Name()))
		if r.Scale != nil {
			if _, err := b.define(reflect.TypeOf(autoscalingv1.Scale{})); err != nil {
				return nil, err
			}
			addGVK(scaleDef, scaleGVK)
		}
		gv := r.GVK.GroupVersion()
		groupVersions[gv] = true
		paths[gvPath(gv)] = append(paths[gvPath(gv)], resourcePaths(r, kindDef, listDef, q)...)
	}
	// DeleteOptions and WatchEvent are registered in every group version; Status only in
	// the legacy one.
	addGVK(statusDef, schema.GroupVersionKind{Version: "v1", Kind: "Status"})
	for gv := range groupVersions {
		addGVK(deleteOptionsDef, gv.WithKind("DeleteOptions"))
		addGVK(watchEventDef, gv.WithKind("WatchEvent"))
	}
	for def, list := range gvks {
		sort.Slice(list, func(i, j int) bool { return list[i].String() < list[j].String() })
		ext := make([]interface{}, len(list))
		for i, g := range list {
			ext[i] = gvkExtension(g)
		}
		s := b.defs[def]
		s.AddExtension(extGVK, ext)
		b.defs[def] = s
		if s3, ok := b.v3[def]; ok {
			s3.AddExtension(extGVK, ext)
			b.v3[def] = s3
		}
	}

	d := &Documents{v3: map[string]*v3Doc{}}
	if err := d.buildV2(b, paths, version); err != nil {
		return nil, err
	}
	if err := d.buildV3(b, paths, version); err != nil {
		return nil, err
	}
	return d, nil
}

// objectType is the struct type behind a runtime.Object pointer.
func objectType(obj interface{}) reflect.Type {
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func hash(data []byte) string {
	return fmt.Sprintf("%X", sha512.Sum512(data))
}

func info(version string) *spec.Info {
	return &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: version}}
}

const bearerToken = "BearerToken"

func (d *Documents) buildV2(b *schemaBuilder, paths map[string][]pathItem, version string) error {
	sw := &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        info(version),
		Paths:       &spec.Paths{Paths: map[string]spec.PathItem{}},
		Definitions: spec.Definitions(b.defs),
		SecurityDefinitions: spec.SecurityDefinitions{bearerToken: &spec.SecurityScheme{SecuritySchemeProps: spec.SecuritySchemeProps{
			Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication",
		}}},
		Security: []map[string][]string{{bearerToken: {}}},
	}}
	for _, items := range paths {
		for _, p := range items {
			sw.Paths.Paths[p.path] = v2PathItem(p)
		}
	}
	data, err := json.Marshal(sw)
	if err != nil {
		return fmt.Errorf("openapi v2: %w", err)
	}
	d.v2JSON, d.v2ETag = data, strconv.Quote(hash(data))
	return nil
}

func v2Param(p param) spec.Parameter {
	sp := spec.Parameter{ParamProps: spec.ParamProps{Name: p.name, In: p.in, Description: p.description, Required: p.required}}
	sp.Type = p.typ
	sp.UniqueItems = true
	return sp
}

func v2PathItem(p pathItem) spec.PathItem {
	var item spec.PathItem
	for _, pp := range p.params {
		item.Parameters = append(item.Parameters, v2Param(pp))
	}
	for _, o := range p.ops {
		op := &spec.Operation{OperationProps: spec.OperationProps{
			Description: o.description,
			Consumes:    []string{"*/*"},
			Produces:    producesObject,
			Schemes:     []string{"https"},
			Tags:        []string{o.tag},
			ID:          o.id,
			Responses:   &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{}}},
		}}
		if o.patch {
			op.Consumes = patchTypes
		}
		if o.stream {
			op.Produces = producesStream
		}
		if o.body != "" {
			body := refSchema(o.body)
			op.Parameters = append(op.Parameters, spec.Parameter{ParamProps: spec.ParamProps{
				Name: "body", In: "body", Required: o.bodyNeeded, Schema: &body}})
		}
		for _, qp := range o.query {
			op.Parameters = append(op.Parameters, v2Param(qp))
		}
		for _, r := range o.responses {
			s := refSchema(r.def)
			op.Responses.StatusCodeResponses[r.code] = spec.Response{ResponseProps: spec.ResponseProps{
				Description: codeDescription(r.code), Schema: &s}}
		}
		op.Responses.StatusCodeResponses[401] = spec.Response{ResponseProps: spec.ResponseProps{Description: "Unauthorized"}}
		op.AddExtension("x-kubernetes-action", o.action)
		op.AddExtension(extGVK, gvkExtension(o.gvk))
		switch o.method {
		case "get":
			item.Get = op
		case "put":
			item.Put = op
		case "post":
			item.Post = op
		case "patch":
			item.Patch = op
		case "delete":
			item.Delete = op
		}
	}
	return item
}

// codeDescription is the response description Kubernetes gives a status code.
func codeDescription(code int) string {
	switch code {
	case 201:
		return "Created"
	case 202:
		return "Accepted"
	}
	return "OK"
}

func (d *Documents) buildV3(b *schemaBuilder, paths map[string][]pathItem, version string) error {
	index := map[string]map[string]string{}
	for gvp, items := range paths {
		doc := &spec3.OpenAPI{
			Version: "3.0.0",
			Info:    info(version),
			Paths:   &spec3.Paths{Paths: map[string]*spec3.Path{}},
			Components: &spec3.Components{
				Schemas: map[string]*spec.Schema{},
				SecuritySchemes: spec3.SecuritySchemes{bearerToken: &spec3.SecurityScheme{SecuritySchemeProps: spec3.SecuritySchemeProps{
					Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication",
				}}},
			},
			SecurityRequirement: []map[string][]string{{bearerToken: {}}},
		}
		var roots []string
		for _, t := range metaTypes {
			roots = append(roots, b.names[t])
		}
		for _, p := range items {
			doc.Paths.Paths[p.path] = v3Path(p)
			for _, o := range p.ops {
				roots = append(roots, o.body)
				for _, r := range o.responses {
					roots = append(roots, r.def)
				}
			}
		}
		for _, name := range closure(b.defs, roots) {
			s, ok := b.v3[name]
			if !ok {
				s = toV3Schema(b.defs[name])
			}
			doc.Components.Schemas[name] = &s
		}
		data, err := json.Marshal(doc)
		if err != nil {
			return fmt.Errorf("openapi v3 %s: %w", gvp, err)
		}
		h := hash(data)
		d.v3[gvp] = &v3Doc{json: data, hash: h}
		index[gvp] = map[string]string{"serverRelativeURL": "/openapi/v3/" + gvp + "?hash=" + h}
	}
	data, err := json.Marshal(map[string]interface{}{"paths": index})
	if err != nil {
		return fmt.Errorf("openapi v3 index: %w", err)
	}
	d.v3Index = data
	return nil
}

func v3Param(p param) *spec3.Parameter {
	return &spec3.Parameter{ParameterProps: spec3.ParameterProps{
		Name: p.name, In: p.in, Description: p.description, Required: p.required,
		Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{p.typ}, UniqueItems: true}},
	}}
}

func v3Ref(def string) *spec.Schema {
	return &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(v3RefPrefix + def)}}
}

func v3Content(types []string, def string) map[string]*spec3.MediaType {
	content := make(map[string]*spec3.MediaType, len(types))
	for _, t := range types {
		content[t] = &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: v3Ref(def)}}
	}
	return content
}

func v3Path(p pathItem) *spec3.Path {
	item := &spec3.Path{}
	for _, pp := range p.params {
		item.Parameters = append(item.Parameters, v3Param(pp))
	}
	for _, o := range p.ops {
		op := &spec3.Operation{OperationProps: spec3.OperationProps{
			Tags:        []string{o.tag},
			Description: o.description,
			OperationId: o.id,
			Responses:   &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{}}},
		}}
		for _, qp := range o.query {
			op.Parameters = append(op.Parameters, v3Param(qp))
		}
		if o.body != "" {
			consumes := []string{"*/*"}
			if o.patch {
				consumes = patchTypes
			}
			op.RequestBody = &spec3.RequestBody{RequestBodyProps: spec3.RequestBodyProps{
				Content: v3Content(consumes, o.body), Required: o.bodyNeeded}}
		}
		produces := producesObject
		if o.stream {
			produces = producesStream
		}
		for _, r := range o.responses {
			op.Responses.StatusCodeResponses[r.code] = &spec3.Response{ResponseProps: spec3.ResponseProps{
				Description: codeDescription(r.code), Content: v3Content(produces, r.def)}}
		}
		op.Responses.StatusCodeResponses[401] = &spec3.Response{ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}}
		op.AddExtension("x-kubernetes-action", o.action)
		op.AddExtension(extGVK, gvkExtension(o.gvk))
		switch o.method {
		case "get":
			item.Get = op
		case "put":
			item.Put = op
		case "post":
			item.Post = op
		case "patch":
			item.Patch = op
		case "delete":
			item.Delete = op
		}
	}
	return item
}

// V2JSON is the swagger 2.0 document served at /openapi/v2 as application/json.
func (d *Documents) V2JSON() []byte { return d.v2JSON }

// V2Protobuf is the same document as a gnostic openapi_v2.Document in protobuf, served for
// Accept application/com.github.proto-openapi.spec.v2@v1.0+protobuf (and its variants).
// The first call converts the JSON (a few hundred milliseconds); it returns nil if gnostic
// rejects the document, which is a bug here (the tests convert every k8s.io/api type) and
// should be answered with 500.
func (d *Documents) V2Protobuf() []byte {
	return d.v2Proto.get(func() (proto.Message, error) { return openapi_v2.ParseDocument(d.v2JSON) })
}

// V2ETag is the ETag header value of the v2 document (both encodings), quotes included.
func (d *Documents) V2ETag() string { return d.v2ETag }

// V3Index is the /openapi/v3 discovery document: for every group version ("api/v1",
// "apis/apps/v1") the serverRelativeURL of its document, carrying the document's hash.
func (d *Documents) V3Index() []byte { return d.v3Index }

// V3 returns the OpenAPI 3.0 JSON document of a group version, path being "api/v1" or
// "apis/<group>/<version>", and its hash (the ?hash= value in the index; serve it as the
// ETag, quoted). ok is false for a group version that serves no resources.
func (d *Documents) V3(path string) (doc []byte, hash string, ok bool) {
	v, ok := d.v3[path]
	if !ok {
		return nil, "", false
	}
	return v.json, v.hash, true
}

// V3Protobuf returns V3(path) as a gnostic openapi_v3.Document in protobuf, served for
// Accept application/com.github.proto-openapi.spec.v3@v1.0+protobuf. Like V2Protobuf it is
// converted on first use, and nil (with ok true) means gnostic rejected the document.
func (d *Documents) V3Protobuf(path string) ([]byte, bool) {
	v, ok := d.v3[path]
	if !ok {
		return nil, false
	}
	return v.proto.get(func() (proto.Message, error) { return openapi_v3.ParseDocument(v.json) }), true
}
