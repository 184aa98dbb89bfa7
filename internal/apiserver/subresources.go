package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var scaleGVK = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

// toScale builds the Scale view of a scalable object.
func toScale(e *entry, obj runtime.Object) *autoscalingv1.Scale {
	m, _ := meta.Accessor(obj)
	spec, status, sel := e.res.Scale.Get(obj)
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp(),
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: spec},
		Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: sel},
	}
}

func (s *Server) getScale(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	obj, _, err := e.store.get(ctx, ri.Namespace, ri.Name)
	if err != nil {
		return err
	}
	writeObject(w, r, http.StatusOK, toScale(e, obj))
	return nil
}

// writeScale applies a new Scale (from PUT or PATCH) to the object.
func (s *Server) writeScale(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry, dry bool, next func(cur *autoscalingv1.Scale) (*autoscalingv1.Scale, error)) error {
	out, code, _, err := s.updateObject(ctx, e, ri.Namespace, ri.Name, "", dry, func(current runtime.Object) (runtime.Object, error) {
		scale, err := next(toScale(e, current))
		if err != nil {
			return nil, err
		}
		if scale.Spec.Replicas < 0 {
			return nil, apierrors.NewInvalid(scaleGVK.GroupKind(), ri.Name, field.ErrorList{
				field.Invalid(field.NewPath("spec", "replicas"), scale.Spec.Replicas, "must be greater than or equal to 0")})
		}
		cm, _ := meta.Accessor(current)
		if scale.ResourceVersion != "" && scale.ResourceVersion != cm.GetResourceVersion() {
			return nil, apierrors.NewConflict(e.store.gr, ri.Name, fmt.Errorf("%s", conflictMessage))
		}
		cm.SetResourceVersion("")
		e.res.Scale.Set(current, scale.Spec.Replicas)
		return current, nil
	})
	if err != nil {
		return err
	}
	writeObject(w, r, code, toScale(e, out))
	return nil
}

func (s *Server) putScale(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var in autoscalingv1.Scale
	if _, err := decodeRequest(r.Header.Get("Content-Type"), body, &in, scaleGVK, validationIgnore); err != nil {
		return err
	}
	dry, err := isDryRun(r)
	if err != nil {
		return err
	}
	return s.writeScale(ctx, w, r, ri, e, dry, func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error) { return &in, nil })
}

func (s *Server) patchScale(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry, pt types.PatchType, body []byte, dry bool) error {
	return s.writeScale(ctx, w, r, ri, e, dry, func(cur *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
		cur.ResourceVersion = ""
		orig, _ := json.Marshal(cur)
		var out []byte
		var err error
		switch pt {
		case types.JSONPatchType:
			p, derr := decodeJSONPatch(body)
			if derr != nil {
				return nil, derr
			}
			out, err = p.Apply(orig)
		case types.MergePatchType:
			out, err = jsonpatch.MergePatch(orig, body)
		default:
			out, err = strategicpatch.StrategicMergePatch(orig, body, &autoscalingv1.Scale{})
		}
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error applying patch: %v", err))
		}
		var next autoscalingv1.Scale
		if _, err := decodeInto(out, &next, scaleGVK, validationIgnore); err != nil {
			return nil, err
		}
		return &next, nil
	})
}

// statusMeta names the metadata fields a status write could change.
type statusMeta uint8

const (
	metaLabels statusMeta = 1 << iota
	metaAnnotations
	metaFinalizers
	metaOwnerReferences

	// metaAll is what metav1.ResetObjectMetaForStatus keeps from the stored object.
	metaAll = metaLabels | metaAnnotations | metaFinalizers | metaOwnerReferences
)

// statusKeepsStored lists the resources whose upstream status strategy (PrepareForUpdate)
// keeps some of the stored metadata on a /status write; every other resource takes the
// labels, annotations, finalizers and owner references the write carries, as
// kube-apiserver's Service, Ingress, CronJob, ... status strategies do (they reset the
// spec only).
var statusKeepsStored = map[schema.GroupResource]statusMeta{
	{Resource: "pods"}:                                                               metaOwnerReferences, // old kubelets corrupted them
	{Group: "apps", Resource: "deployments"}:                                         metaLabels,
	{Group: "flowcontrol.apiserver.k8s.io", Resource: "flowschemas"}:                 metaAll,
	{Group: "flowcontrol.apiserver.k8s.io", Resource: "prioritylevelconfigurations"}: metaAll,
	{Group: "networking.k8s.io", Resource: "servicecidrs"}:                           metaAll,
	{Group: "storage.k8s.io", Resource: "volumeattachments"}:                         metaAll,
	{Group: "storage.k8s.io", Resource: "csinodes"}:                                  metaAll,
	{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}: metaAll,
	{Group: "internal.apiserver.k8s.io", Resource: "storageversions"}:                metaAll,
	{Group: "resource.k8s.io", Resource: "resourceclaims"}:                           metaAll,
	{Group: "resource.k8s.io", Resource: "devicetaintrules"}:                         metaAll,
	{Group: "resource.k8s.io", Resource: "resourcepoolstatusrequests"}:               metaAll,
	{Group: "certificates.k8s.io", Resource: "podcertificaterequests"}:               metaAll,
	{Group: "storagemigration.k8s.io", Resource: "storageversionmigrations"}:         metaAll,
}

// statusMetadata carries the metadata a /status write may change from sent (the object
// the client wrote) into kept (the stored object with the new status). The server-owned
// fields (uid, generation, deletionTimestamp, ...) are the stored ones either way.
func statusMetadata(gr schema.GroupResource, kept, sent metav1.Object) {
	if _, ok := kept.(*unstructured.Unstructured); ok {
		// Custom resources' status strategy keeps all of the stored metadata.
		return
	}
	stored := statusKeepsStored[gr]
	if stored&metaLabels == 0 {
		kept.SetLabels(sent.GetLabels())
	}
	if stored&metaAnnotations == 0 {
		kept.SetAnnotations(sent.GetAnnotations())
	}
	if stored&metaFinalizers == 0 {
		kept.SetFinalizers(sent.GetFinalizers())
	}
	if stored&metaOwnerReferences == 0 {
		kept.SetOwnerReferences(sent.GetOwnerReferences())
	}
}
