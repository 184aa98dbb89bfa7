package storagemigration

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	svmv1 "k8s.io/api/storagemigration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func makeSVM(group, resource string, conditions ...metav1.Condition) *svmv1.StorageVersionMigration {
	return &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "test"},
		Spec:   svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: group, Resource: resource}},
		Status: svmv1.StorageVersionMigrationStatus{Conditions: conditions}}
}

func cond(t string, s metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: "Test", LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
}

func TestValidate(t *testing.T) {
	r := StorageVersionMigrationResource()
	for _, tc := range []struct {
		group, resource string
		want            []string
	}{
		{resource: "foo"},
		{group: "apps", resource: "deployments"},
		{want: []string{"spec.resource.resource: Required value: resource is required to be set"}},
		{resource: "Foo", group: "a_b", want: []string{
			`spec.resource.resource: Invalid value: "Foo": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`,
			`spec.resource.group: Invalid value: "a_b": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		}},
	} {
		if diff := cmp.Diff(tc.want, errStrings(r.Validate(makeSVM(tc.group, tc.resource)))); diff != "" {
			t.Errorf("%s/%s (-want +got):\n%s", tc.group, tc.resource, diff)
		}
	}
	if got := errStrings(r.ValidateUpdate(makeSVM("", "bar"), makeSVM("", "foo"))); len(got) != 1 || got[0][:22] != "spec: Invalid value: {" {
		t.Errorf("spec change: %q", got)
	}
}

func TestStatusUpdate(t *testing.T) {
	r := StorageVersionMigrationResource()
	old := makeSVM("", "foo")
	if errs := r.Status.ValidateUpdate(makeSVM("", "foo", cond("TestCondition", metav1.ConditionTrue)), old); len(errs) != 0 {
		t.Errorf("conformance condition refused: %v", errs)
	}
	both := makeSVM("", "foo", cond("Succeeded", metav1.ConditionTrue), cond("Failed", metav1.ConditionTrue))
	if got := errStrings(r.Status.ValidateUpdate(both, old)); len(got) != 1 || !strings.HasSuffix(got[0], ": Both success and failed conditions cannot be true at the same time") {
		t.Errorf("both: %q", got)
	}
	done := makeSVM("", "foo", cond("Succeeded", metav1.ConditionTrue))
	back := makeSVM("", "foo", cond("Succeeded", metav1.ConditionFalse))
	if got := errStrings(r.Status.ValidateUpdate(back, done)); len(got) != 1 || !strings.HasSuffix(got[0], ": Success condition cannot be set to false once it is true") {
		t.Errorf("success undone: %q", got)
	}
	rv := makeSVM("", "foo")
	rv.Status.ResourceVersion = "abc"
	if got := errStrings(r.Status.ValidateUpdate(rv, old)); len(got) != 1 {
		t.Errorf("non-numeric resourceVersion: %q", got)
	}
	if diff := cmp.Diff([]interface{}{"test", "deployments.apps", "Succeeded"}, r.Row(makeSVM("apps", "deployments", cond("Succeeded", metav1.ConditionTrue)), time.Time{})); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}
