package core

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// makeRC returns a valid, defaulted ReplicationController "web" of 2 replicas, after mutate.
func makeRC(mutate func(*v1.ReplicationController)) *v1.ReplicationController {
	two := int32(2)
	rc := &v1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", CreationTimestamp: svcTestCreated},
		Spec: v1.ReplicationControllerSpec{
			Replicas: &two,
			Template: &v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Image: "nginx"}}},
			},
		},
	}
	ReplicationControllerResource().Default(rc)
	if mutate != nil {
		mutate(rc)
	}
	return rc
}

func TestDefaultReplicationController(t *testing.T) {
	rc := &v1.ReplicationController{Spec: v1.ReplicationControllerSpec{
		Template: &v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}},
	}}
	ReplicationControllerResource().Default(rc)
	if diff := cmp.Diff(map[string]string{"app": "web"}, rc.Spec.Selector); diff != "" {
		t.Errorf("selector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"app": "web"}, rc.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if rc.Spec.Replicas == nil || *rc.Spec.Replicas != 1 {
		t.Errorf("replicas %v, want 1", rc.Spec.Replicas)
	}
	if rc.Spec.Template.Spec.RestartPolicy != v1.RestartPolicyAlways {
		t.Errorf("template not defaulted: restartPolicy %q", rc.Spec.Template.Spec.RestartPolicy)
	}
	// An explicit selector and labels stay.
	rc = makeRC(nil)
	rc.Spec.Selector = map[string]string{"tier": "x"}
	rc.Labels = map[string]string{"mine": "y"}
	ReplicationControllerResource().Default(rc)
	if rc.Spec.Selector["tier"] != "x" || rc.Labels["mine"] != "y" || len(rc.Labels) != 1 {
		t.Errorf("explicit selector or labels overwritten: %v %v", rc.Spec.Selector, rc.Labels)
	}
}

func TestValidateReplicationController(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.ReplicationController)
		want   []string
	}{
		{name: "valid", want: []string{}},
		{name: "selector does not match", mutate: func(rc *v1.ReplicationController) { rc.Spec.Selector = map[string]string{"app": "other"} },
			want: []string{"spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`"}},
		{name: "negative replicas", mutate: func(rc *v1.ReplicationController) { n := int32(-1); rc.Spec.Replicas = &n },
			want: []string{"spec.replicas: Invalid value: -1: must be greater than or equal to 0"}},
		{name: "negative minReadySeconds", mutate: func(rc *v1.ReplicationController) { rc.Spec.MinReadySeconds = -5 },
			want: []string{"spec.minReadySeconds: Invalid value: -5: must be greater than or equal to 0"}},
		{name: "selector required", mutate: func(rc *v1.ReplicationController) { rc.Spec.Selector = nil },
			want: []string{"spec.selector: Required value"}},
		{name: "template required", mutate: func(rc *v1.ReplicationController) { rc.Spec.Template = nil },
			want: []string{"spec.template: Required value"}},
		{name: "restartPolicy", mutate: func(rc *v1.ReplicationController) { rc.Spec.Template.Spec.RestartPolicy = v1.RestartPolicyNever },
			want: []string{`spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"`}},
		{name: "activeDeadlineSeconds", mutate: func(rc *v1.ReplicationController) { n := int64(3); rc.Spec.Template.Spec.ActiveDeadlineSeconds = &n },
			want: []string{"spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicationController is not Supported"}},
		{name: "bad selector label", mutate: func(rc *v1.ReplicationController) {
			rc.Spec.Selector = map[string]string{"app": "web", "bad key!": "x"}
		}, want: []string{
			`spec.selector: Invalid value: "bad key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			"spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`",
		}},
	}
	r := ReplicationControllerResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, svcErrs(r.Validate(makeRC(tc.mutate)))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, svcErrs(r.ValidateUpdate(makeRC(tc.mutate), makeRC(nil)))); diff != "" {
				t.Errorf("update errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateReplicationControllerStatus(t *testing.T) {
	st := v1.ReplicationControllerStatus{Replicas: 2, FullyLabeledReplicas: 3, ReadyReplicas: 1, AvailableReplicas: 2, ObservedGeneration: -1}
	want := []string{
		"status.observedGeneration: Invalid value: -1: must be greater than or equal to 0",
		"status.fullyLabeledReplicas: Invalid value: 3: cannot be greater than status.replicas",
		"status.availableReplicas: Invalid value: 2: cannot be greater than readyReplicas",
	}
	rc := makeRC(func(rc *v1.ReplicationController) { rc.Status = st })
	if diff := cmp.Diff(want, svcErrs(ReplicationControllerResource().Status.ValidateUpdate(rc, makeRC(nil)))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestReplicationControllerRowAndScale(t *testing.T) {
	rc := makeRC(func(rc *v1.ReplicationController) {
		rc.Status = v1.ReplicationControllerStatus{Replicas: 2, ReadyReplicas: 1}
	})
	r := ReplicationControllerResource()
	got := r.Row(rc, svcTestCreated.Add(90*time.Second))
	want := []interface{}{"web", int64(2), int64(2), int64(1), "90s", "nginx", "nginx", "app=web"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	if len(r.Columns) != len(want) {
		t.Errorf("%d columns for %d cells", len(r.Columns), len(want))
	}
	spec, status, sel := r.Scale.Get(rc)
	if spec != 2 || status != 2 || sel != "app=web" {
		t.Errorf("scale %d %d %q, want 2 2 app=web", spec, status, sel)
	}
	r.Scale.Set(rc, 5)
	if *rc.Spec.Replicas != 5 {
		t.Errorf("scale set: replicas %d", *rc.Spec.Replicas)
	}
	if r.ShortNames[0] != "rc" || r.Status == nil {
		t.Errorf("short names %v, status subresource %v", r.ShortNames, r.Status != nil)
	}
}
