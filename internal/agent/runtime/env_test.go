package runtime

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two"}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "1"},
		{"x$(A)-$(B)y", "x1-twoy"},
		{"$(C)", "$(C)"},
		{"$$(A)", "$(A)"},
		{"$$", "$"},
		{"$A", "$A"},
		{"$(A", "$(A"},
		{"end$", "end$"},
	} {
		if got := expand(tc.in, lookup); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func testPod(mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", Labels: map[string]string{"app": "web", "tier": "fe"}},
		Spec:       v1.PodSpec{NodeName: "n1", ServiceAccountName: "sa", Containers: []v1.Container{{Name: "c"}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestContainerEnv(t *testing.T) {
	data := map[string]map[string]string{
		"ConfigMap/cm": {"KEY": "v", "data-1": "x"},
		"Secret/s":     {"pw": "secret"},
	}
	lookup := func(ctx context.Context, kind, ns, name string) (map[string]string, bool, error) {
		d, ok := data[kind+"/"+name]
		return d, ok, nil
	}
	field := func(p string) *v1.EnvVarSource {
		return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: p}}
	}
	for _, tc := range []struct {
		name    string
		c       v1.Container
		want    []string
		wantErr string
	}{
		{name: "literal and expansion", c: v1.Container{Env: []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "$(A)-$(Z)"}}},
			want: []string{"HOSTNAME=web", "A=1", "B=1-$(Z)"}},
		{name: "downward API", c: v1.Container{Env: []v1.EnvVar{
			{Name: "N", ValueFrom: field("metadata.name")}, {Name: "NS", ValueFrom: field("metadata.namespace")},
			{Name: "U", ValueFrom: field("metadata.uid")}, {Name: "L", ValueFrom: field("metadata.labels['app']")},
			{Name: "LS", ValueFrom: field("metadata.labels")}, {Name: "NODE", ValueFrom: field("spec.nodeName")},
			{Name: "SA", ValueFrom: field("spec.serviceAccountName")}, {Name: "IP", ValueFrom: field("status.podIP")},
			{Name: "HIP", ValueFrom: field("status.hostIP")}}},
			want: []string{"HOSTNAME=web", "N=web", "NS=ns", "U=u1", "L=web", "LS=app=\"web\"\ntier=\"fe\"",
				"NODE=n1", "SA=sa", "IP=10.244.0.5", "HIP=10.240.0.10"}},
		// As kubelet since relaxed variable names: every key with the prefix, names that
		// are no shell or C names included (the API validated keys and prefix).
		{name: "envFrom with prefix keeps every key", c: v1.Container{EnvFrom: []v1.EnvFromSource{{Prefix: "1-", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}}},
			want: []string{"HOSTNAME=web", "1-KEY=v", "1-data-1=x"}},
		{name: "secret key", c: v1.Container{Env: []v1.EnvVar{{Name: "PW", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "pw"}}}}},
			want: []string{"HOSTNAME=web", "PW=secret"}},
		{name: "missing configmap", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Key: "k"}}}}},
			wantErr: `configmap "nope" not found`},
		{name: "missing key", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: "k"}}}}},
			wantErr: `couldn't find key k in ConfigMap ns/cm`},
		{name: "optional missing key", c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: "k", Optional: new(true)}}}}},
			want: []string{"HOSTNAME=web"}},
		{name: "resource limit with divisor", c: v1.Container{
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}},
			Env:       []v1.EnvVar{{Name: "MEM", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}}}},
			want: []string{"HOSTNAME=web", "MEM=64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pe := podEnv{pod: testPod(nil), podIPs: []string{"10.244.0.5"}, hostIPs: []string{"10.240.0.10"}, hostname: "web"}
			got, err := containerEnv(context.Background(), pe, &tc.c, lookup)
			if tc.wantErr != "" {
				var ce *configError
				if err == nil || err.Error() != tc.wantErr || !errors.As(err, &ce) {
					t.Fatalf("error = %v, want configError %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}
