package apps

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// ControllerRevisionResource serves apps/v1 controllerrevisions: immutable snapshots of a
// workload's template that DaemonSets and StatefulSets roll back to.
func ControllerRevisionResource() registry.Resource {
	return registry.Resource{
		GVK:        appsv1.SchemeGroupVersion.WithKind("ControllerRevision"),
		Plural:     "controllerrevisions",
		Singular:   "controllerrevision",
		Namespaced: true,
		New:        func() runtime.Object { return &appsv1.ControllerRevision{} },
		NewList:    func() runtime.Object { return &appsv1.ControllerRevisionList{} },
		Validate: registry.Func(func(r *appsv1.ControllerRevision) field.ErrorList {
			return validateControllerRevision(r)
		}),
		ValidateUpdate: registry.FuncUpdate(func(r, o *appsv1.ControllerRevision) field.ErrorList {
			errs := validateControllerRevision(r)
			if !sameRevisionData(r.Data, o.Data) {
				errs = append(errs, field.Invalid(field.NewPath("data"), r.Data, apimachineryvalidation.FieldImmutableErrorMsg))
			}
			return errs
		}),
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			stringColumn("Controller", "Controller of the object"),
			stringColumn("Revision", appsv1.ControllerRevision{}.SwaggerDoc()["revision"]),
			registry.AgeColumn,
		},
		Row: registry.FuncWith(func(r *appsv1.ControllerRevision, now time.Time) []interface{} {
			return []interface{}{r.Name, revisionController(r), r.Revision, ageCell(r.ObjectMeta, now)}
		}),
	}
}

func validateControllerRevision(r *appsv1.ControllerRevision) field.ErrorList {
	var errs field.ErrorList
	if len(r.Data.Raw) == 0 && r.Data.Object == nil {
		errs = append(errs, field.Required(field.NewPath("data"), "data is mandatory"))
	}
	return append(errs, apimachineryvalidation.ValidateNonnegativeField(r.Revision, field.NewPath("revision"))...)
}

// sameRevisionData compares revision data as JSON values, so that a client re-sending the
// stored data with different whitespace is not refused.
func sameRevisionData(a, b runtime.RawExtension) bool {
	ab, errA := json.Marshal(a)
	bb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return bytes.Equal(a.Raw, b.Raw)
	}
	return bytes.Equal(ab, bb)
}

// revisionController names the owning controller as "<kind>.<group>/<name>", or "<none>".
func revisionController(r *appsv1.ControllerRevision) string {
	ref := metav1.GetControllerOf(r)
	if ref == nil {
		return "<none>"
	}
	gk := schema.GroupKind{Kind: ref.Kind}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil {
		gk.Group = gv.Group
	}
	if gk.Empty() {
		return ref.Name
	}
	return strings.ToLower(gk.String()) + "/" + ref.Name
}
