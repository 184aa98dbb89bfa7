package scheduling

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// makeClass returns a defaulted PriorityClass of the given name and value, changed by
// mut.
func makeClass(name string, value int32, mut func(*schedulingv1.PriorityClass)) *schedulingv1.PriorityClass {
	lower := v1.PreemptLowerPriority
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Value: value, PreemptionPolicy: &lower}
	if mut != nil {
		mut(pc)
	}
	return pc
}

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestValidatePriorityClass(t *testing.T) {
	never := v1.PreemptNever
	tests := []struct {
		name string
		pc   *schedulingv1.PriorityClass
		want []string
	}{
		{name: "valid", pc: makeClass("high", 1000, nil)},
		{name: "never preempts", pc: makeClass("high", 1000, func(pc *schedulingv1.PriorityClass) { pc.PreemptionPolicy = &never })},
		{name: "highest user value", pc: makeClass("top", 1000000000, nil)},
		{name: "above user range", pc: makeClass("top", 1000000001, nil),
			want: []string{"value: Forbidden: maximum allowed value of a user defined priority is 1000000000"}},
		{name: "system class as bootstrapped", pc: makeClass("system-node-critical", 2000001000, nil)},
		{name: "system class with another value", pc: makeClass("system-cluster-critical", 5, nil),
			want: []string{"metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: value of system-cluster-critical PriorityClass must be 2000000000"}},
		{name: "unknown system name", pc: makeClass("system-mine", 5, nil),
			want: []string{"metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"}},
		{name: "bad policy", pc: makeClass("high", 1, func(pc *schedulingv1.PriorityClass) {
			p := v1.PreemptionPolicy("Sometimes")
			pc.PreemptionPolicy = &p
		}), want: []string{`preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, errStrings(ValidatePriorityClass(tt.pc))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidatePriorityClassUpdate(t *testing.T) {
	old := makeClass("high", 1000, nil)
	never := v1.PreemptNever
	tests := []struct {
		name string
		mut  func(*schedulingv1.PriorityClass)
		want []string
	}{
		{name: "description and default may change", mut: func(pc *schedulingv1.PriorityClass) {
			pc.Description = "updated description"
			pc.GlobalDefault = true
		}},
		{name: "value is immutable", mut: func(pc *schedulingv1.PriorityClass) { pc.Value = 10000 },
			want: []string{"value: Forbidden: may not be changed in an update."}},
		{name: "policy is immutable", mut: func(pc *schedulingv1.PriorityClass) { pc.PreemptionPolicy = &never },
			want: []string{`preemptionPolicy: Invalid value: "Never": field is immutable`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc := old.DeepCopy()
			tt.mut(pc)
			if diff := cmp.Diff(tt.want, errStrings(ValidatePriorityClassUpdate(pc, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPriorityClassResource(t *testing.T) {
	r := PriorityClassResource()
	if r.Namespaced || r.Plural != "priorityclasses" || len(r.ShortNames) != 1 || r.ShortNames[0] != "pc" {
		t.Fatalf("resource = %+v", r)
	}
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high", CreationTimestamp: metav1.NewTime(created)}, Value: 1000}
	r.PrepareForCreate(pc)
	r.Default(pc)
	if pc.Generation != 1 || pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != v1.PreemptLowerPriority {
		t.Fatalf("created class: generation %d, preemptionPolicy %v; want 1 and PreemptLowerPriority", pc.Generation, pc.PreemptionPolicy)
	}
	var names []string
	for _, c := range r.Columns {
		names = append(names, c.Name)
	}
	row := r.Row(pc, created.Add(90*time.Second))
	want := []interface{}{"high", int64(1000), false, "90s", "PreemptLowerPriority"}
	if diff := cmp.Diff([]string{"Name", "Value", "Global-Default", "Age", "PreemptionPolicy"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, row); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

func TestSystemPriorityClasses(t *testing.T) {
	got := map[string]int32{}
	for _, pc := range SystemPriorityClasses() {
		got[pc.Name] = pc.Value
		if errs := ValidatePriorityClass(pc); len(errs) > 0 {
			t.Errorf("%s does not validate: %v", pc.Name, errs)
		}
		if pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != v1.PreemptLowerPriority {
			t.Errorf("%s preemptionPolicy = %v, want PreemptLowerPriority", pc.Name, pc.PreemptionPolicy)
		}
	}
	if diff := cmp.Diff(map[string]int32{"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}, got); diff != "" {
		t.Errorf("system classes (-want +got):\n%s", diff)
	}
	if !IsSystemPriorityClass("system-node-critical") || IsSystemPriorityClass("system-mine") {
		t.Error("IsSystemPriorityClass disagrees with the system classes")
	}
}
