package apiserver

import (
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DecodeBody decodes a request body (JSON, YAML or protobuf) into obj of kind gvk with
// strict field validation unless the request says otherwise; for extra handlers.
func DecodeBody(r *http.Request, obj runtime.Object, gvk schema.GroupVersionKind) ([]string, error) {
	fv, body, err := readWriteBody(r)
	if err != nil {
		return nil, err
	}
	return decodeRequest(r.Header.Get("Content-Type"), body, obj, gvk, fv)
}

// WriteObject writes obj as JSON with the given status code; for extra handlers.
func WriteObject(w http.ResponseWriter, code int, obj runtime.Object) { writeObject(w, nil, code, obj) }

// WriteWarnings adds Kubernetes warning headers; for extra handlers.
func WriteWarnings(w http.ResponseWriter, warnings []string) { addWarnings(w, warnings) }

// WriteError answers with err as a Kubernetes Status (a non-Status error is a 500); for
// handlers in front of the API server's.
func WriteError(w http.ResponseWriter, err error) { writeError(w, nil, err) }
