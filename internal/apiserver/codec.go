package apiserver

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/tranche/tranche/internal/storage"
)

// fieldValidation is the request's fieldValidation directive.
type fieldValidation string

const (
	validationIgnore fieldValidation = "Ignore"
	validationWarn   fieldValidation = "Warn"
	validationStrict fieldValidation = "Strict"
)

func parseFieldValidation(v string) (fieldValidation, error) {
	switch v {
	case "", "Warn":
		return validationWarn, nil
	case "Ignore":
		return validationIgnore, nil
	case "Strict":
		return validationStrict, nil
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got %q", v))
}

var (
	strictJSON = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, kjson.SerializerOptions{Strict: true})
	laxJSON    = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, kjson.SerializerOptions{})
)

// protobufType is Kubernetes' protobuf media type; client-go sends it by default.
const protobufType = "application/vnd.kubernetes.protobuf"

// decodeRequest decodes a request body (JSON, YAML or protobuf) into obj of kind gvk.
func decodeRequest(contentType string, body []byte, obj runtime.Object, gvk schema.GroupVersionKind, fv fieldValidation) ([]string, error) {
	if mt, _, _ := mime.ParseMediaType(contentType); mt == protobufType {
		if err := decodeProtobuf(body, obj); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized: %v", err))
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		return nil, nil
	}
	data, dup, err := bodyToJSON(contentType, body)
	if err != nil {
		return nil, err
	}
	var strict []error
	if dup != nil {
		strict = append(strict, dup)
	}
	warnings, err := decodeStrict(data, obj, gvk, fv, strict)
	var se *strictRefusal
	if errors.As(err, &se) {
		// kube-apiserver's create and update handlers name the kinds (transformDecodeError).
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, se.err))
	}
	return warnings, err
}

// strictRefusal is the BadRequest of fieldValidation=Strict, carrying the strict
// decoding error for handlers that word it differently.
type strictRefusal struct {
	*apierrors.StatusError
	err error
}

func (r *strictRefusal) Unwrap() error { return r.StatusError }

// bodyToJSON turns a request body in JSON or YAML into JSON. A YAML mapping with a
// duplicate key keeps its last value, as Kubernetes' YAML serializer does; dup is then
// the strict conversion's error, for field validation to report.
func bodyToJSON(contentType string, body []byte) (data []byte, dup error, err error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case "", "application/json", "*/*":
		return body, nil, nil
	case "application/yaml", "application/apply-patch+yaml":
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml: %v", err))
		}
		if _, err := yaml.YAMLToJSONStrict(body); err != nil {
			dup = err
		}
		return j, dup, nil
	}
	if strings.HasSuffix(mt, "+json") {
		return body, nil, nil
	}
	return nil, nil, unsupportedMediaType(mt)
}

// protobufMagic starts every Kubernetes protobuf envelope (runtime.Unknown).
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// decodeProtobuf unwraps the runtime.Unknown envelope and unmarshals its raw bytes into
// obj, whatever group version the client named (DeleteOptions travels as
// meta.k8s.io/v1 or as the resource's version).
func decodeProtobuf(body []byte, obj runtime.Object) error {
	if !bytes.HasPrefix(body, protobufMagic) {
		return fmt.Errorf("protobuf body without the k8s envelope prefix")
	}
	var u runtime.Unknown
	if err := u.Unmarshal(body[len(protobufMagic):]); err != nil {
		return err
	}
	pm, ok := obj.(interface{ Unmarshal([]byte) error })
	if !ok {
		return fmt.Errorf("%T cannot be decoded from protobuf", obj)
	}
	return pm.Unmarshal(u.Raw)
}

// isMetaOptions reports kinds that clients send under several group versions.
func isMetaOptions(kind string) bool {
	switch kind {
	case "DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions", "ListOptions", "GetOptions":
		return true
	}
	return false
}

// decodeInto decodes JSON into obj (a typed object of gvk). Unknown and duplicate fields
// are handled per fv: Strict fails, Warn returns them as warnings, Ignore drops them.
func decodeInto(data []byte, obj runtime.Object, gvk schema.GroupVersionKind, fv fieldValidation) (warnings []string, err error) {
	return decodeStrict(data, obj, gvk, fv, nil)
}

// decodeStrict is decodeInto with strict errors found before decoding (duplicate keys
// of a YAML body), reported first as Kubernetes' serializer does.
func decodeStrict(data []byte, obj runtime.Object, gvk schema.GroupVersionKind, fv fieldValidation, strict []error) (warnings []string, err error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, apierrors.NewBadRequest("the body of the request was empty")
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized: %v", jsonErrorText(err)))
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	_ = json.Unmarshal(data, &tm)
	if isMetaOptions(gvk.Kind) {
		if tm.Kind != "" && tm.Kind != gvk.Kind {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (kind %q, expected %q)", tm.Kind, gvk.Kind))
		}
		if err := json.Unmarshal(data, obj); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid %s: %v", gvk.Kind, err))
		}
		return nil, nil
	}
	if tm.Kind != "" && tm.Kind != gvk.Kind {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (kind %q, expected %q)", tm.Kind, gvk.Kind))
	}
	if tm.APIVersion != "" && tm.APIVersion != gvk.GroupVersion().String() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", tm.APIVersion, gvk.GroupVersion().String()))
	}
	ser := laxJSON
	if fv != validationIgnore {
		ser = strictJSON
	}
	_, _, derr := ser.Decode(data, &gvk, obj)
	if derr != nil {
		se, ok := runtime.AsStrictDecodingError(derr)
		if !ok {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized: %v", derr))
		}
		strict = append(strict, se.Errors()...)
	}
	if len(strict) > 0 {
		switch fv {
		case validationStrict:
			se := runtime.NewStrictDecodingError(strict)
			return nil, &strictRefusal{StatusError: apierrors.NewBadRequest(se.Error()), err: se}
		case validationWarn:
			for _, e := range strict {
				warnings = append(warnings, e.Error())
			}
		}
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return warnings, nil
}

func jsonErrorText(err error) string {
	if se, ok := err.(*json.SyntaxError); ok {
		return fmt.Sprintf("%s at offset %d", se.Error(), se.Offset)
	}
	return err.Error()
}

// protoMarshaler is implemented by every generated Kubernetes API type.
type protoMarshaler interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// encodeStored serialises obj for storage as Kubernetes does: the protobuf envelope
// (magic prefix + runtime.Unknown carrying the type and the object's own protobuf
// encoding), so that decoding is cheap. Types without a protobuf encoding are stored as
// JSON, which DecodeStored also reads.
func encodeStored(obj runtime.Object) ([]byte, error) {
	pm, ok := obj.(protoMarshaler)
	if !ok {
		return json.Marshal(obj)
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	return envelope(gvk, pm.Size(), func(buf []byte) error {
		if _, err := pm.MarshalToSizedBuffer(buf); err != nil {
			return fmt.Errorf("encoding %s: %w", gvk.Kind, err)
		}
		return nil
	})
}

// envelope builds a protobuf envelope for an object of gvk whose encoding is rawSize
// bytes, written by fill into the slice it is given. The envelope is written by hand
// rather than through runtime.Unknown so that the object is encoded once, straight into
// the output buffer.
func envelope(gvk schema.GroupVersionKind, rawSize int, fill func([]byte) error) ([]byte, error) {
	tm := runtime.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}
	tmSize := tm.Size()
	size := len(protobufMagic) + 1 + uvarintLen(uint64(tmSize)) + tmSize + 1 + uvarintLen(uint64(rawSize)) + rawSize
	buf := make([]byte, size)
	i := copy(buf, protobufMagic)
	i = putTag(buf, i, 1, tmSize) // runtime.Unknown.typeMeta
	if _, err := tm.MarshalToSizedBuffer(buf[i : i+tmSize]); err != nil {
		return nil, fmt.Errorf("encoding type of %s: %w", gvk.Kind, err)
	}
	i += tmSize
	i = putTag(buf, i, 2, rawSize) // runtime.Unknown.raw
	if err := fill(buf[i : i+rawSize]); err != nil {
		return nil, err
	}
	return buf, nil
}

// putTag writes the key and length of a length-delimited protobuf field at buf[i:] and
// returns the index after them.
func putTag(buf []byte, i int, field, length int) int {
	buf[i] = byte(field<<3 | 2)
	return i + 1 + binary.PutUvarint(buf[i+1:], uint64(length))
}

// tagLen is the size of the key (of a field numbered below 16) and length prefix of a
// length-delimited field of the given length.
func tagLen(length int) int { return 1 + uvarintLen(uint64(length)) }

// storedRaw returns the object's own protobuf encoding inside a stored envelope, without
// copying, or false for a value stored as JSON.
func storedRaw(value []byte) ([]byte, bool) {
	if !bytes.HasPrefix(value, protobufMagic) {
		return nil, false
	}
	b := value[len(protobufMagic):]
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 || key&7 != 2 {
			return nil, false
		}
		b = b[n:]
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return nil, false
		}
		field := b[n : n+int(l)]
		b = b[n+int(l):]
		if key>>3 == 2 {
			return field, true
		}
	}
	return nil, false
}

// encodeRawList writes the protobuf list response of the stored values kvs without
// decoding them: each item is the stored object's own encoding followed by a metadata
// fragment that sets its resourceVersion. Protobuf merges an embedded message field that
// appears twice and keeps the last value of a scalar, so the item decodes as the stored
// object with that version (every Kubernetes object has its metadata as field 1, and the
// resourceVersion is field 6 of ObjectMeta). Values stored as JSON are decoded and
// re-encoded.
func (rs *resourceStore) encodeRawList(listGVK schema.GroupVersionKind, lm *metav1.ListMeta, kvs []storage.KeyValue) ([]byte, error) {
	raws := make([][]byte, len(kvs))
	rvs := make([]string, len(kvs))
	lmSize := lm.Size()
	size := tagLen(lmSize) + lmSize
	for i, kv := range kvs {
		rvs[i] = strconv.FormatInt(kv.ModRevision, 10)
		raw, ok := storedRaw(kv.Value)
		if !ok {
			obj, err := rs.decode(kv.Value, kv.ModRevision)
			if err != nil {
				return nil, err
			}
			pm, ok := obj.(interface{ Marshal() ([]byte, error) })
			if !ok {
				return nil, fmt.Errorf("%T has no protobuf encoding", obj)
			}
			if raw, err = pm.Marshal(); err != nil {
				return nil, fmt.Errorf("encoding %s %s: %w", rs.gr, kv.Key, err)
			}
		}
		raws[i] = raw
		itemSize := len(raw) + rvFragmentSize(rvs[i])
		size += tagLen(itemSize) + itemSize
	}
	return envelope(listGVK, size, func(buf []byte) error {
		i := putTag(buf, 0, 1, lmSize) // list.metadata
		if _, err := lm.MarshalToSizedBuffer(buf[i : i+lmSize]); err != nil {
			return fmt.Errorf("encoding %s list metadata: %w", rs.gr, err)
		}
		i += lmSize
		for k, raw := range raws {
			i = putTag(buf, i, 2, len(raw)+rvFragmentSize(rvs[k])) // list.items
			i += copy(buf[i:], raw)
			i = putTag(buf, i, 1, tagLen(len(rvs[k]))+len(rvs[k])) // object.metadata
			i = putTag(buf, i, 6, len(rvs[k]))                     // metadata.resourceVersion
			i += copy(buf[i:], rvs[k])
		}
		return nil
	})
}

// rvFragmentSize is the size of the metadata fragment carrying resourceVersion rv.
func rvFragmentSize(rv string) int {
	inner := tagLen(len(rv)) + len(rv)
	return tagLen(inner) + inner
}

func uvarintLen(v uint64) int {
	var tmp [binary.MaxVarintLen64]byte
	return binary.PutUvarint(tmp[:], v)
}

// encodeResponse serialises obj as a protobuf response body (the same envelope as
// stored values), naming its kind from the scheme when the object does not carry it.
func encodeResponse(obj runtime.Object) ([]byte, error) {
	if _, ok := obj.(protoMarshaler); !ok {
		return nil, fmt.Errorf("%T has no protobuf encoding", obj)
	}
	if obj.GetObjectKind().GroupVersionKind().Kind == "" {
		gvks, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil || len(gvks) == 0 {
			return nil, fmt.Errorf("%T has no kind: %w", obj, err)
		}
		obj = obj.DeepCopyObject()
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	return encodeStored(obj)
}

// acceptClause is one media range of an Accept header.
type acceptClause struct {
	mediaType string
	// as, g and v ask for a transformed object (Table, PartialObjectMetadata).
	as, g, v string
}

// acceptClauses parses the Accept header in the client's order of preference.
func acceptClauses(r *http.Request) []acceptClause {
	var out []acceptClause
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		out = append(out, acceptClause{mediaType: mt, as: params["as"], g: params["g"], v: params["v"]})
	}
	return out
}

// prefersProtobuf reports whether the first Accept clause the server can satisfy with
// a plain object asks for protobuf (client-go sends "protobuf,json" by default; kubectl
// and JSON clients get JSON, as does a request without Accept).
func prefersProtobuf(r *http.Request) bool {
	for _, c := range acceptClauses(r) {
		if c.as != "" {
			continue
		}
		return c.mediaType == protobufType
	}
	return false
}

// metadataFormat reports whether the client (client-go's metadata client: the garbage
// collector, the namespace controller) asked for PartialObjectMetadata, and whether in
// protobuf (the first such clause wins).
func metadataFormat(r *http.Request) (wanted, protobuf bool) {
	for _, c := range acceptClauses(r) {
		if c.g != "meta.k8s.io" || (c.as != "PartialObjectMetadata" && c.as != "PartialObjectMetadataList") {
			continue
		}
		switch c.mediaType {
		case "application/json":
			return true, false
		case protobufType:
			return true, true
		}
	}
	return false, false
}

// EncodeStored encodes obj as the API server stores it (the protobuf envelope for the
// built-in kinds), for components that write objects in the API server's transactions
// (the allocator's IPAddress objects). obj's TypeMeta must name its kind; its
// resourceVersion must be empty (storage keeps it as the key's revision).
func EncodeStored(obj runtime.Object) ([]byte, error) {
	if obj.GetObjectKind().GroupVersionKind().Kind == "" {
		return nil, fmt.Errorf("encoding %T for storage: no kind", obj)
	}
	return encodeStored(obj)
}

// DecodeStored decodes a value the API server stored into into (a typed object such as
// *v1.Service): the protobuf envelope it writes, or JSON as written by earlier versions,
// told apart by the envelope's magic prefix. The object's TypeMeta and resourceVersion
// are not set: the stored value does not carry them.
func DecodeStored(data []byte, into runtime.Object) error {
	if bytes.HasPrefix(data, protobufMagic) {
		return decodeProtobuf(data, into)
	}
	return json.Unmarshal(data, into)
}
