package core

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// makePodTemplate returns a valid, defaulted PodTemplate "tpl", after mutate.
func makePodTemplate(mutate func(*v1.PodTemplate)) *v1.PodTemplate {
	pt := &v1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "default", CreationTimestamp: svcTestCreated},
		Template: v1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Image: "nginx"}, {Name: "side", Image: "busybox"}}},
		},
	}
	PodTemplateResource().Default(pt)
	if mutate != nil {
		mutate(pt)
	}
	return pt
}

func TestPodTemplateDefaultsTemplate(t *testing.T) {
	pt := makePodTemplate(nil)
	if pt.Template.Spec.RestartPolicy != v1.RestartPolicyAlways || pt.Template.Spec.DNSPolicy != v1.DNSClusterFirst {
		t.Errorf("template not defaulted: restartPolicy %q dnsPolicy %q", pt.Template.Spec.RestartPolicy, pt.Template.Spec.DNSPolicy)
	}
}

func TestValidatePodTemplate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.PodTemplate)
		want   string
	}{
		{name: "valid"},
		{name: "no containers", mutate: func(pt *v1.PodTemplate) { pt.Template.Spec.Containers = nil },
			want: "template.spec.containers: Required value"},
		{name: "bad label", mutate: func(pt *v1.PodTemplate) { pt.Template.Labels = map[string]string{"a b": "x"} },
			want: `template.labels: Invalid value: "a b": name part must consist of alphanumeric characters`},
		{name: "ephemeral containers", mutate: func(pt *v1.PodTemplate) {
			pt.Template.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", Image: "busybox"}}}
		}, want: "template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pt := makePodTemplate(tc.mutate)
			got := errString(PodTemplateResource().Validate(pt))
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("Validate = %q, want %q", got, tc.want)
			}
			// An update is checked by the same rules.
			got = errString(PodTemplateResource().ValidateUpdate(pt, makePodTemplate(nil)))
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("ValidateUpdate = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPodTemplateRow(t *testing.T) {
	r := PodTemplateResource()
	var names []string
	for _, c := range r.Columns {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Containers", "Images", "Pod Labels"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	got := r.Row(makePodTemplate(nil), svcTestCreated.Add(time.Hour))
	want := []interface{}{"tpl", "nginx,side", "nginx,busybox", "app=web,tier=front"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}
