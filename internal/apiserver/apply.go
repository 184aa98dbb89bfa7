package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// serverSideApply handles PATCH with Content-Type application/apply-patch+yaml: the body
// is the writer's whole intent for the fields it manages, merged into the object by
// structured-merge-diff under the schemas' list and map semantics. A field another
// manager set to a different value is a conflict (409 naming fields and managers) unless
// ?force=true, which takes the field over. An apply to an object that does not exist
// creates it (201), as kube-apiserver does.
func (s *Server) serverSideApply(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	q := r.URL.Query()
	opts := metav1.PatchOptions{FieldManager: q.Get("fieldManager")}
	if v, ok := q["force"]; ok && len(v) > 0 {
		force, err := strconv.ParseBool(v[0])
		if err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid value for force: %q: %v", v[0], err))
		}
		opts.Force = &force
	}
	if errs := metavalidation.ValidatePatchOptions(&opts, types.ApplyYAMLPatchType); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	if !applySubresources[ri.Subresource] {
		return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", e.store.gr, ri.Name,
			fmt.Sprintf("server-side apply of the %s subresource is not supported by tranche yet", ri.Subresource), 0, false)
	}
	fv, body, err := readWriteBody(r)
	if err != nil {
		return err
	}
	dry, err := isDryRun(r)
	if err != nil {
		return err
	}
	patch, warnings, err := decodeApplyPatch(body, fv)
	if err != nil {
		return err
	}
	if name := patch.GetName(); name != ri.Name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", name, ri.Name))
	}
	if ns := patch.GetNamespace(); e.res.Namespaced && ns != "" && ns != ri.Namespace {
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	fm, err := s.fieldManager(e, ri.Subresource)
	if err != nil {
		return err
	}
	force := opts.Force != nil && *opts.Force
	// The first attempt applies the decoded patch itself; a retry (a conflicting write
	// in between) decodes the body again, as kube-apiserver does on every attempt,
	// rather than every apply paying for a copy the library may write into.
	unused := patch
	apply := func(live runtime.Object) (runtime.Object, error) {
		live.GetObjectKind().SetGroupVersionKind(e.res.GVK)
		p := unused
		if unused = nil; p == nil {
			var derr error
			if p, _, derr = decodeApplyPatch(body, fv); derr != nil {
				return nil, derr
			}
		}
		out, err := fm.Apply(live, p, opts.FieldManager, force)
		if err != nil {
			if _, ok := err.(apierrors.APIStatus); ok {
				return nil, err
			}
			return nil, apierrors.NewBadRequest(err.Error())
		}
		obj, err := typedObject(e, out)
		if err != nil {
			return nil, err
		}
		// Only a resourceVersion the client applied is a precondition (see applyPatch).
		m, _ := meta.Accessor(obj)
		m.SetResourceVersion(patch.GetResourceVersion())
		return obj, nil
	}
	ctx = withApply(ctx)
	for attempt := 0; ; attempt++ {
		out, code, more, err := s.updateObject(ctx, e, ri.Namespace, ri.Name, ri.Subresource, dry, apply)
		if apierrors.IsNotFound(err) && ri.Subresource == "" {
			var obj runtime.Object
			if obj, err = apply(e.res.New()); err != nil {
				return err
			}
			out, more, err = s.createObject(ctx, e, ri.Namespace, obj, dry)
			code = http.StatusCreated
			if apierrors.IsAlreadyExists(err) && attempt < 3 {
				continue // created meanwhile: apply to it
			}
		}
		if err != nil {
			return err
		}
		addWarnings(w, append(warnings, more...))
		writeObject(w, r, code, out)
		return nil
	}
}

// typedObject returns obj as e's Go type; the field manager may hand back unstructured
// content.
func typedObject(e *entry, obj runtime.Object) (runtime.Object, error) {
	u, ok := obj.(runtime.Unstructured)
	if !ok {
		return obj, nil
	}
	typed := e.res.New()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), typed); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("applied object does not decode into %s: %v", e.res.GVK.Kind, err))
	}
	return typed, nil
}

// decodeApplyPatch decodes an apply configuration, YAML or JSON (kubectl sends JSON), as
// kube-apiserver does, reporting duplicate fields as fieldValidation asks (an error for
// Strict, a warning for Warn). JSON is decoded directly, without the YAML parser, which
// would cost half as much again as the apply itself.
func decodeApplyPatch(body []byte, fv fieldValidation) (*unstructured.Unstructured, []string, error) {
	data := bytes.TrimSpace(body)
	var strictErr error
	if !bytes.HasPrefix(data, []byte("{")) || !json.Valid(data) {
		j, err := yaml.YAMLToJSONStrict(body)
		if err != nil {
			strictErr = err
			if j, err = yaml.YAMLToJSON(body); err != nil {
				return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
			}
		}
		data = j
	}
	patch := &unstructured.Unstructured{Object: map[string]interface{}{}}
	strictErrs, err := kjson.UnmarshalStrict(data, &patch.Object)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
	}
	if strictErr == nil && len(strictErrs) > 0 {
		strictErr = errors.Join(strictErrs...)
	}
	if strictErr == nil || fv == validationIgnore {
		return patch, nil, nil
	}
	if fv == validationStrict {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding patch: %v", strictErr))
	}
	return patch, []string{strictErr.Error()}, nil
}
