package core

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func makeConfigMap(mutate func(*v1.ConfigMap)) *v1.ConfigMap {
	cm := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: "default", CreationTimestamp: svcTestCreated},
		Data:       map[string]string{"app.properties": "a=b"},
	}
	if mutate != nil {
		mutate(cm)
	}
	return cm
}

func TestValidateConfigMap(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.ConfigMap)
		want   []string
	}{
		{name: "valid", want: []string{}},
		{name: "bad key", mutate: func(cm *v1.ConfigMap) { cm.Data = map[string]string{"a/b": ""} },
			want: []string{`data[a/b]: Invalid value: "a/b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`}},
		{name: "key in both", mutate: func(cm *v1.ConfigMap) { cm.BinaryData = map[string][]byte{"app.properties": {1}} },
			want: []string{`data[app.properties]: Invalid value: "app.properties": duplicate of key present in binaryData`}},
		{name: "bad binary key", mutate: func(cm *v1.ConfigMap) { cm.BinaryData = map[string][]byte{"..": nil} },
			want: []string{`binaryData[..]: Invalid value: "..": must not be '..'`}},
		{name: "too big", mutate: func(cm *v1.ConfigMap) {
			cm.Data["big"] = strings.Repeat("x", 1<<20)
		}, want: []string{"[]: Too long: may not be more than 1048576 bytes"}},
		{name: "exactly 1 MiB", mutate: func(cm *v1.ConfigMap) {
			cm.Data = map[string]string{"a": strings.Repeat("x", 1<<19)}
			cm.BinaryData = map[string][]byte{"b": []byte(strings.Repeat("x", 1<<19))}
		}, want: []string{}},
	}
	r := ConfigMapResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, svcErrs(r.Validate(makeConfigMap(tc.mutate)))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateConfigMapUpdate(t *testing.T) {
	immutable := func(cm *v1.ConfigMap) { cm.Immutable = svcPtr(true) }
	tests := []struct {
		name     string
		old, new *v1.ConfigMap
		want     []string
	}{
		{name: "mutable data changes", old: makeConfigMap(nil), new: makeConfigMap(func(cm *v1.ConfigMap) { cm.Data["x"] = "y" }), want: []string{}},
		{name: "becoming immutable", old: makeConfigMap(nil), new: makeConfigMap(immutable), want: []string{}},
		{name: "immutable labels change", old: makeConfigMap(immutable), new: makeConfigMap(func(cm *v1.ConfigMap) {
			immutable(cm)
			cm.Labels = map[string]string{"a": "b"}
		}), want: []string{}},
		{name: "immutable data", old: makeConfigMap(immutable), new: makeConfigMap(func(cm *v1.ConfigMap) {
			immutable(cm)
			cm.Data["x"] = "y"
			cm.BinaryData = map[string][]byte{"z": nil}
		}), want: []string{
			"data: Forbidden: field is immutable when `immutable` is set",
			"binaryData: Forbidden: field is immutable when `immutable` is set",
		}},
		{name: "unsetting immutable", old: makeConfigMap(immutable), new: makeConfigMap(nil),
			want: []string{"immutable: Forbidden: field is immutable when `immutable` is set"}},
	}
	r := ConfigMapResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, svcErrs(r.ValidateUpdate(tc.new, tc.old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigMapRow(t *testing.T) {
	cm := makeConfigMap(func(cm *v1.ConfigMap) { cm.BinaryData = map[string][]byte{"b": nil} })
	if diff := cmp.Diff([]interface{}{"conf", int64(2), "5m"}, ConfigMapResource().Row(cm, svcTestNow)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}
