package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// bindPod handles POST pods/NAME/binding: it sets spec.nodeName once.
func (s *Server) bindPod(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var b v1.Binding
	if _, err := decodeRequest(r.Header.Get("Content-Type"), body, &b, v1.SchemeGroupVersion.WithKind("Binding"), validationIgnore); err != nil {
		return err
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, b.Name, field.ErrorList{field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node"})})
	}
	if b.Target.Name == "" {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, b.Name, field.ErrorList{field.Required(field.NewPath("target", "name"), "")})
	}
	dry, err := isDryRun(r)
	if err != nil {
		return err
	}
	_, _, _, err = s.updateObject(ctx, e, ri.Namespace, ri.Name, "binding", dry, func(current runtime.Object) (runtime.Object, error) {
		pod := current.(*v1.Pod)
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(e.store.gr, ri.Name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", ri.Name))
		}
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(e.store.gr, ri.Name, fmt.Errorf("pod %s is already assigned to node %q", ri.Name, pod.Spec.NodeName))
		}
		if b.UID != "" && b.UID != pod.UID {
			return nil, apierrors.NewConflict(e.store.gr, ri.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", b.UID, pod.UID))
		}
		pod.Spec.NodeName = b.Target.Name
		pod.ResourceVersion = ""
		pod.Status.Conditions = setPodCondition(pod.Status.Conditions, v1.PodCondition{
			Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(s.now()),
		})
		return pod, nil
	})
	if err != nil {
		return err
	}
	writeObject(w, r, http.StatusCreated, successStatus())
	return nil
}

func setPodCondition(conds []v1.PodCondition, c v1.PodCondition) []v1.PodCondition {
	for i := range conds {
		if conds[i].Type == c.Type {
			if conds[i].Status != c.Status {
				conds[i] = c
			}
			return conds
		}
	}
	return append(conds, c)
}

// evictPod handles POST pods/NAME/eviction as a plain delete (no disruption budgets yet).
func (s *Server) evictPod(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var ev policyv1.Eviction
	if len(body) > 0 {
		if _, err := decodeRequest(r.Header.Get("Content-Type"), body, &ev, policyv1.SchemeGroupVersion.WithKind("Eviction"), validationIgnore); err != nil {
			return err
		}
	}
	opts := ev.DeleteOptions
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	if _, _, err := s.deleteObject(ctx, e, ri.Namespace, ri.Name, opts, false); err != nil {
		return err
	}
	writeObject(w, r, http.StatusCreated, successStatus())
	return nil
}

// finalizeNamespace handles PUT namespaces/NAME/finalize: only spec.finalizers change.
func (s *Server) finalizeNamespace(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	obj, _, err := s.decodeBody(r, e)
	if err != nil {
		return err
	}
	in := obj.(*v1.Namespace)
	var errs field.ErrorList
	for i, f := range in.Spec.Finalizers {
		for _, msg := range validateQualifiedName(string(f)) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "finalizers").Index(i), f, msg))
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(e.res.GVK.GroupKind(), ri.Name, errs)
	}
	out, code, _, err := s.updateObject(ctx, e, "", ri.Name, "finalize", false, func(current runtime.Object) (runtime.Object, error) {
		ns := current.(*v1.Namespace)
		ns.Spec.Finalizers = in.Spec.Finalizers
		ns.ResourceVersion = in.ResourceVersion
		return ns, nil
	})
	if err != nil {
		return err
	}
	writeObject(w, r, code, out)
	return nil
}
