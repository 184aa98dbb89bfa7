package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// patch handles PATCH of an object or a subresource (status, scale).
func (s *Server) patch(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	pt := types.PatchType(mt)
	switch pt {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
	case types.ApplyYAMLPatchType:
		return s.serverSideApply(ctx, w, r, ri, e)
	case types.ApplyCBORPatchType:
		return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", e.store.gr, ri.Name,
			"server-side apply in CBOR is not supported by tranche yet; send application/apply-patch+yaml", 0, false)
	default:
		return unsupportedMediaType(mt)
	}
	fv, body, err := readWriteBody(r)
	if err != nil {
		return err
	}
	dry, err := isDryRun(r)
	if err != nil {
		return err
	}
	if ri.Subresource == "scale" {
		return s.patchScale(ctx, w, r, ri, e, pt, body, dry)
	}
	var warnings []string
	out, code, moreWarnings, err := s.updateObject(ctx, e, ri.Namespace, ri.Name, ri.Subresource, dry, func(current runtime.Object) (runtime.Object, error) {
		obj, warn, err := applyPatch(e, current, pt, body, fv)
		warnings = warn
		return obj, err
	})
	if err != nil {
		return err
	}
	addWarnings(w, append(warnings, moreWarnings...))
	writeObject(w, r, code, out)
	return nil
}

// applyPatch applies a patch to current and decodes the result. current's
// resourceVersion is dropped first, so a resourceVersion in the result is the
// client's precondition.
func applyPatch(e *entry, current runtime.Object, pt types.PatchType, patch []byte, fv fieldValidation) (runtime.Object, []string, error) {
	cm, _ := meta.Accessor(current)
	cm.SetResourceVersion("")
	current.GetObjectKind().SetGroupVersionKind(e.res.GVK)
	orig, err := json.Marshal(current)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	var patched []byte
	switch pt {
	case types.JSONPatchType:
		p, err := decodeJSONPatch(patch)
		if err != nil {
			return nil, nil, err
		}
		patched, err = p.Apply(orig)
		if err != nil {
			return nil, nil, jsonPatchFailed(err)
		}
	case types.MergePatchType:
		// Only checked here, not decoded: the syntax error says what is wrong,
		// nesting deeper than encoding/json's 10000 levels included.
		var raw json.RawMessage
		if err := json.Unmarshal(patch, &raw); err != nil {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
		}
		patched, err = jsonpatch.MergePatch(orig, patch)
		if err != nil {
			return nil, nil, invalidPatch(e, cm.GetName(), err)
		}
	case types.StrategicMergePatchType:
		var pm map[string]interface{}
		if err := json.Unmarshal(patch, &pm); err != nil {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
		}
		patched, err = strategicpatch.StrategicMergePatch(orig, patch, e.res.New())
		if err != nil {
			return nil, nil, invalidPatch(e, cm.GetName(), err)
		}
	}
	if err := checkPatchedSize(patched); err != nil {
		return nil, nil, err
	}
	obj := e.res.New()
	warnings, err := decodeInto(patched, obj, e.res.GVK, fv)
	if err == nil {
		warnings, err = checkUnknownFields(e, obj, fv, warnings)
	}
	if err != nil {
		return nil, nil, err
	}
	return obj, warnings, nil
}

func invalidPatch(e *entry, name string, err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnprocessableEntity,
		Reason:  metav1.StatusReasonInvalid,
		Message: fmt.Sprintf("%s %q is invalid: %v", e.store.gr.String(), name, err),
		Details: &metav1.StatusDetails{Name: name, Group: e.store.gr.Group, Kind: e.store.gr.Resource},
	}}
}

// jsonPatchFailed is a JSON patch that does not apply: 422 Invalid without kind or name,
// as kube-apiserver answers, but with json-patch's reason as the message (kubectl
// prints "The request is invalid: <message>") where kube-apiserver's says only that
// the request was in error.
func jsonPatchFailed(err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnprocessableEntity,
		Reason:  metav1.StatusReasonInvalid,
		Message: err.Error(),
		Details: &metav1.StatusDetails{},
	}}
}
