package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
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
	data, err := bodyToJSON(contentType, body)
	if err != nil {
		return nil, err
	}
	return decodeInto(data, obj, gvk, fv)
}

// bodyToJSON turns a request body in JSON or YAML into JSON.
func bodyToJSON(contentType string, body []byte) ([]byte, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case "", "application/json", "*/*":
		return body, nil
	case "application/yaml", "application/apply-patch+yaml":
		j, err := yaml.YAMLToJSONStrict(body)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml: %v", err))
		}
		return j, nil
	}
	if strings.HasSuffix(mt, "+json") {
		return body, nil
	}
	return nil, unsupportedMediaType(mt)
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
		if se, ok := runtime.AsStrictDecodingError(derr); ok {
			switch fv {
			case validationStrict:
				return nil, apierrors.NewBadRequest(se.Error())
			case validationWarn:
				for _, e := range se.Errors() {
					warnings = append(warnings, e.Error())
				}
			}
		} else {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized: %v", derr))
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

// encodeStored serialises obj for storage (JSON, resourceVersion cleared).
func encodeStored(obj runtime.Object) ([]byte, error) {
	return json.Marshal(obj)
}

// decodeStored decodes a stored value into a new object of res.
func decodeStored(data []byte, obj runtime.Object) error {
	return json.Unmarshal(data, obj)
}
