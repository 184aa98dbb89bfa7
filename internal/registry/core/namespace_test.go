package core

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// makeNamespace returns a namespace named name, changed by mutate.
func makeNamespace(name string, mutate func(*v1.Namespace)) *v1.Namespace {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(testNow.Add(-90 * time.Second))}}
	if mutate != nil {
		mutate(ns)
	}
	return ns
}

func TestNamespaceCreateAndUpdate(t *testing.T) {
	res := NamespaceResource()
	ns := makeNamespace("team-a", func(ns *v1.Namespace) {
		ns.Labels = map[string]string{v1.LabelMetadataName: "spoofed", "team": "a"}
		ns.Spec.Finalizers = []v1.FinalizerName{"example.com/cleanup"}
		ns.Status.Phase = v1.NamespaceTerminating
	})
	res.PrepareForCreate(ns)
	res.Default(ns)
	want := makeNamespace("team-a", func(ns *v1.Namespace) {
		ns.Labels = map[string]string{v1.LabelMetadataName: "team-a", "team": "a"}
		ns.Spec.Finalizers = []v1.FinalizerName{"example.com/cleanup", v1.FinalizerKubernetes}
		ns.Status.Phase = v1.NamespaceActive
	})
	if d := cmp.Diff(want, ns); d != "" {
		t.Errorf("after create (-want +got):\n%s", d)
	}

	upd := ns.DeepCopy()
	upd.Spec.Finalizers = nil
	delete(upd.Labels, v1.LabelMetadataName)
	res.PrepareForUpdate(upd, ns)
	res.Default(upd)
	if d := cmp.Diff(ns, upd); d != "" {
		t.Errorf("update may not drop finalizers or the name label (-want +got):\n%s", d)
	}
	if got := res.NameValidation("Team_A", false); len(got) == 0 {
		t.Errorf("namespace names must be DNS labels")
	}
}

func TestValidateNamespaceFinalizeUpdate(t *testing.T) {
	tests := []struct {
		name       string
		finalizers []v1.FinalizerName
		want       string
	}{
		{"standard", []v1.FinalizerName{"kubernetes"}, ""},
		{"qualified", []v1.FinalizerName{"example.com/x"}, ""},
		{"empty list", nil, ""},
		{"not standard", []v1.FinalizerName{"cleanup"}, `spec.finalizers[0]: Invalid value: "cleanup": name is neither a standard finalizer name nor is it fully qualified`},
		{"not a qualified name", []v1.FinalizerName{"a/b/c"}, `spec.finalizers[0]: Invalid value: "a/b/c": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`},
	}
	old := makeNamespace("team-a", nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := makeNamespace("team-a", func(ns *v1.Namespace) { ns.Spec.Finalizers = tc.finalizers })
			if got := errString(ValidateNamespaceFinalizeUpdate(ns, old)); got != tc.want {
				t.Errorf("ValidateNamespaceFinalizeUpdate:\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

func TestNamespaceStatusAndTable(t *testing.T) {
	res := NamespaceResource()
	deleting := makeNamespace("old", func(ns *v1.Namespace) {
		ns.DeletionTimestamp = &metav1.Time{Time: testNow}
		ns.Status.Phase = v1.NamespaceActive
	})
	want := "status.Phase: Invalid value: \"Active\": may only be 'Terminating' if `deletionTimestamp` is not empty"
	if got := errString(res.Status.ValidateUpdate(deleting, deleting)); got != want {
		t.Errorf("status:\n got: %s\nwant: %s", got, want)
	}
	ns := makeNamespace("team-a", func(ns *v1.Namespace) { ns.Status.Phase = v1.NamespaceActive })
	if d := cmp.Diff([]interface{}{"team-a", "Active", "90s"}, res.Row(ns, testNow)); d != "" {
		t.Errorf("Row (-want +got):\n%s", d)
	}
	if got := res.Fields(ns)["status.phase"]; got != "Active" {
		t.Errorf("status.phase field = %q", got)
	}
}
