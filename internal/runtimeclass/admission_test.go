package runtimeclass

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/apiserver"
)

// classes is an apiserver.Reader serving RuntimeClasses only.
type classes []*nodev1.RuntimeClass

func (c classes) NamespaceLabels(context.Context, string) (map[string]string, error) { return nil, nil }

func (c classes) List(_ context.Context, gvr schema.GroupVersionResource, _ string) ([]runtime.Object, error) {
	if gvr != runtimeClassesGVR {
		return nil, nil
	}
	var out []runtime.Object
	for _, rc := range c {
		out = append(out, rc.DeepCopy())
	}
	return out, nil
}

var _ apiserver.Reader = classes(nil)

var overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")}

func testClasses() classes {
	return classes{
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Handler: "runc"},
		{ObjectMeta: metav1.ObjectMeta{Name: "heavy"}, Handler: "runc", Overhead: &nodev1.Overhead{PodFixed: overhead}},
		{ObjectMeta: metav1.ObjectMeta{Name: "sandboxed"}, Handler: "runc", Scheduling: &nodev1.Scheduling{
			NodeSelector: map[string]string{"sandbox": "yes"},
			Tolerations:  []v1.Toleration{{Key: "sandbox", Operator: v1.TolerationOpExists}}}},
	}
}

func makePod(class string, mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "t1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	if class != "" {
		p.Spec.RuntimeClassName = &class
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestAdmission(t *testing.T) {
	tests := []struct {
		name    string
		pod     *v1.Pod
		wantErr string
		check   func(t *testing.T, p *v1.Pod)
	}{
		{name: "no class", pod: makePod("", nil)},
		{name: "missing class", pod: makePod("nope", nil), wantErr: `pods "p" is forbidden: pod rejected: RuntimeClass "nope" not found`},
		{name: "class without overhead", pod: makePod("plain", nil), check: func(t *testing.T, p *v1.Pod) {
			if p.Spec.Overhead != nil {
				t.Errorf("overhead %v, want none", p.Spec.Overhead)
			}
		}},
		{name: "overhead set", pod: makePod("heavy", nil), check: func(t *testing.T, p *v1.Pod) {
			if q := p.Spec.Overhead[v1.ResourceCPU]; q.String() != "250m" {
				t.Errorf("overhead %v, want cpu 250m", p.Spec.Overhead)
			}
		}},
		{name: "same overhead kept", pod: makePod("heavy", func(p *v1.Pod) { p.Spec.Overhead = overhead.DeepCopy() })},
		{name: "other overhead", pod: makePod("heavy", func(p *v1.Pod) {
			p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
		}), wantErr: `pods "p" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead`},
		{name: "overhead without class overhead", pod: makePod("plain", func(p *v1.Pod) { p.Spec.Overhead = overhead.DeepCopy() }),
			wantErr: `pods "p" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead`},
		{name: "scheduling merged", pod: makePod("sandboxed", func(p *v1.Pod) {
			p.Spec.NodeSelector = map[string]string{"zone": "a"}
			p.Spec.Tolerations = []v1.Toleration{{Key: "sandbox", Operator: v1.TolerationOpEqual, Value: "x"}}
		}), check: func(t *testing.T, p *v1.Pod) {
			if diff := cmp.Diff(map[string]string{"zone": "a", "sandbox": "yes"}, p.Spec.NodeSelector); diff != "" {
				t.Errorf("nodeSelector (-want +got):\n%s", diff)
			}
			// The class's Exists toleration covers the pod's Equal one.
			want := []v1.Toleration{{Key: "sandbox", Operator: v1.TolerationOpExists}}
			if diff := cmp.Diff(want, p.Spec.Tolerations); diff != "" {
				t.Errorf("tolerations (-want +got):\n%s", diff)
			}
		}},
		{name: "node selector conflict", pod: makePod("sandboxed", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"sandbox": "no"} }),
			wantErr: `pods "p" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[sandbox] = yes; pod.spec.nodeSelector[sandbox] = no`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := &apiserver.AdmissionRequest{Operation: apiserver.AdmitCreate, Resource: v1.SchemeGroupVersion.WithResource("pods"),
				Namespace: "t1", Name: "p", Object: tc.pod, Reader: testClasses()}
			err := Admission{}.Mutate(context.Background(), req)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr || !apierrors.IsForbidden(err)):
				t.Fatalf("err %v, want 403 %q", err, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, tc.pod)
			}
		})
	}
}

// Updates and subresources are not this plugin's: a pod whose class went away may still
// change.
func TestAdmissionOnlyCreates(t *testing.T) {
	for _, req := range []*apiserver.AdmissionRequest{
		{Operation: apiserver.AdmitUpdate, Resource: v1.SchemeGroupVersion.WithResource("pods"), Object: makePod("nope", nil), Reader: classes(nil)},
		{Operation: apiserver.AdmitCreate, Resource: v1.SchemeGroupVersion.WithResource("pods"), Subresource: "binding", Object: &v1.Binding{}, Reader: classes(nil)},
	} {
		if err := (Admission{}).Mutate(context.Background(), req); err != nil {
			t.Errorf("%v %s: %v", req.Operation, req.Subresource, err)
		}
	}
}
