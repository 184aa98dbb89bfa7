package registry

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestTypedAdapters: typed hooks get their own type, and another type or a nil
// pointer never reaches them (the zero result instead of a panic).
func TestTypedAdapters(t *testing.T) {
	calls := 0
	r := Strategy[*v1.ConfigMap]{
		Default: func(cm *v1.ConfigMap) { calls++; cm.Data = map[string]string{"d": "1"} },
		Validate: func(cm *v1.ConfigMap) field.ErrorList {
			calls++
			return field.ErrorList{field.Required(field.NewPath("data"), cm.Name)}
		},
		ValidateUpdate: func(cm, old *v1.ConfigMap) field.ErrorList {
			calls++
			return field.ErrorList{field.Invalid(field.NewPath("data"), cm.Name, old.Name)}
		},
		Warnings: func(cm, old *v1.ConfigMap) []string {
			calls++
			if old == nil {
				return []string{"create " + cm.Name}
			}
			return []string{"update " + cm.Name}
		},
		Row:       func(cm *v1.ConfigMap, _ time.Time) []interface{} { calls++; return []interface{}{cm.Name} },
		HasStatus: true,
	}.Apply(Resource{Plural: "configmaps"})

	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	old := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	r.Default(cm)
	if cm.Data["d"] != "1" {
		t.Errorf("Default did not run: %v", cm.Data)
	}
	if errs := r.Validate(cm); len(errs) != 1 || errs[0].Detail != "a" {
		t.Errorf("Validate: %v", errs)
	}
	if errs := r.ValidateUpdate(cm, old); len(errs) != 1 || errs[0].Detail != "b" {
		t.Errorf("ValidateUpdate: %v", errs)
	}
	if w := r.Warnings(cm, nil); len(w) != 1 || w[0] != "create a" {
		t.Errorf("Warnings on create: %v", w)
	}
	if w := r.Warnings(cm, old); len(w) != 1 || w[0] != "update a" {
		t.Errorf("Warnings on update: %v", w)
	}
	if row := r.Row(cm, time.Time{}); len(row) != 1 || row[0] != "a" {
		t.Errorf("Row: %v", row)
	}
	if r.Status == nil {
		t.Error("HasStatus did not set Status")
	}
	if calls != 6 {
		t.Errorf("%d typed calls, want 6", calls)
	}

	var nilCM *v1.ConfigMap
	for _, other := range []runtime.Object{&v1.Secret{}, nilCM} {
		r.Default(other)
		if r.Validate(other) != nil || r.ValidateUpdate(other, old) != nil || r.ValidateUpdate(cm, other) != nil ||
			r.Warnings(other, nil) != nil || r.Row(other, time.Time{}) != nil {
			t.Errorf("%T reached a typed hook", other)
		}
	}
	if calls != 6 {
		t.Errorf("%d typed calls after foreign objects, want 6", calls)
	}
}
