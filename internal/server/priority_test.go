package server

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/apiserver"
)

// fakeClasses is an apiserver.Reader holding PriorityClasses only.
type fakeClasses []*schedulingv1.PriorityClass

func (fakeClasses) NamespaceLabels(context.Context, string) (map[string]string, error) {
	return nil, nil
}

func (f fakeClasses) List(_ context.Context, gvr schema.GroupVersionResource, _ string) ([]runtime.Object, error) {
	var out []runtime.Object
	if gvr == priorityClassesGVR {
		for _, pc := range f {
			out = append(out, pc)
		}
	}
	return out, nil
}

// TestPriorityAdmission: the admission steps answer pods and PriorityClasses with
// kube-apiserver's Forbidden statuses, and leave other writes alone.
func TestPriorityAdmission(t *testing.T) {
	classes := fakeClasses{
		{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
		{ObjectMeta: metav1.ObjectMeta{Name: "everyone"}, Value: 5, GlobalDefault: true},
	}
	podsRes := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	pod := func(class string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: v1.PodSpec{PriorityClassName: class}}
	}
	req := func(op apiserver.AdmitOp, res schema.GroupVersionResource, sub, name string, obj, old runtime.Object) *apiserver.AdmissionRequest {
		return &apiserver.AdmissionRequest{Operation: op, Resource: res, Subresource: sub, Name: name, Object: obj, OldObject: old, Reader: classes}
	}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		if !apierrors.IsForbidden(err) {
			t.Errorf("error %v is not Forbidden", err)
		}
		return err.Error()
	}

	p := pod("high")
	if err := (priorityMutator{}).Mutate(context.Background(), req(apiserver.AdmitCreate, podsRes, "", "p", p, nil)); err != nil || p.Spec.Priority == nil || *p.Spec.Priority != 1000 {
		t.Errorf("pod of class high: err %v, priority %v", err, p.Spec.Priority)
	}
	p = pod("")
	if err := (priorityMutator{}).Mutate(context.Background(), req(apiserver.AdmitCreate, podsRes, "", "p", p, nil)); err != nil || p.Spec.PriorityClassName != "everyone" {
		t.Errorf("pod of no class: err %v, class %q, want the default", err, p.Spec.PriorityClassName)
	}
	p = pod("")
	if err := (priorityMutator{}).Mutate(context.Background(), req(apiserver.AdmitCreate, podsRes, "status", "p", p, nil)); err != nil || p.Spec.Priority != nil {
		t.Errorf("subresource write changed: err %v, priority %v", err, p.Spec.Priority)
	}
	got := errText((priorityMutator{}).Mutate(context.Background(), req(apiserver.AdmitCreate, podsRes, "", "p", pod("nope"), nil)))
	if want := `pods "p" is forbidden: no PriorityClass with name nope was found`; got != want {
		t.Errorf("unknown class: %q, want %q", got, want)
	}

	_, err := (priorityValidator{}).Validate(context.Background(), req(apiserver.AdmitDelete, priorityClassesGVR, "", "system-node-critical", nil, nil))
	if want := `priorityclasses.scheduling.k8s.io "system-node-critical" is forbidden: this is a system priority class and cannot be deleted`; errText(err) != want {
		t.Errorf("deleting a system class: %q, want %q", errText(err), want)
	}
	if _, err := (priorityValidator{}).Validate(context.Background(), req(apiserver.AdmitDelete, priorityClassesGVR, "", "high", nil, nil)); err != nil {
		t.Errorf("deleting a user class: %v", err)
	}
	second := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "second"}, Value: 1, GlobalDefault: true}
	_, err = (priorityValidator{}).Validate(context.Background(), req(apiserver.AdmitCreate, priorityClassesGVR, "", "second", second, nil))
	if want := `priorityclasses.scheduling.k8s.io "second" is forbidden: PriorityClass everyone is already marked as default. Only one default can exist`; errText(err) != want {
		t.Errorf("second default: %q, want %q", errText(err), want)
	}
}
