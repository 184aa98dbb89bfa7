package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/tranche/tranche/internal/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// writeJSON writes v as JSON with the given status code.
func writeJSON(w http.ResponseWriter, code int, v interface{}) {
	data, err := json.Marshal(v)
	if err != nil {
		writeError(w, nil, apierrors.NewInternalError(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

// writeObject writes a runtime object in the format r prefers: Kubernetes protobuf when
// the client lists it before JSON (client-go's default), else JSON. A nil r means JSON.
func writeObject(w http.ResponseWriter, r *http.Request, code int, obj runtime.Object) {
	writeEncoded(w, code, obj, r != nil && prefersProtobuf(r))
}

// writeEncoded writes obj as protobuf when protobuf is set and obj has a protobuf
// encoding, else as JSON.
func writeEncoded(w http.ResponseWriter, code int, obj runtime.Object, protobuf bool) {
	if protobuf {
		if data, err := encodeResponse(obj); err == nil {
			w.Header().Set("Content-Type", protobufType)
			w.WriteHeader(code)
			_, _ = w.Write(data)
			return
		}
	}
	writeJSON(w, code, obj)
}

// writeError turns any error into a Kubernetes Status response.
func writeError(w http.ResponseWriter, log *slog.Logger, err error) {
	var st apierrors.APIStatus
	if se, ok := storeFailure(err); ok && !errors.As(err, &st) {
		st = se
	} else if !errors.As(err, &st) {
		if log != nil {
			log.Error("internal error", "err", err)
		}
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.Kind = "Status"
	status.APIVersion = "v1"
	code := int(status.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	if d := status.Details; d != nil && d.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(d.RetryAfterSeconds)))
	}
	writeJSON(w, code, status)
}

// addWarnings adds Kubernetes warning headers ("299 - \"text\"").
func addWarnings(w http.ResponseWriter, warnings []string) {
	for _, msg := range warnings {
		msg = strings.ReplaceAll(msg, "\"", "\\\"")
		w.Header().Add("Warning", fmt.Sprintf("299 - \"%s\"", msg))
	}
}

// successStatus is the Status returned by deletes of collections.
func successStatus() *metav1.Status { return registry.SuccessStatus() }

// unsupportedMediaType is the 415 for a body type the server does not take.
func unsupportedMediaType(mt string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got %q)", mt),
	}}
}
